package wire

import (
	"bytes"
	"testing"
)

// Every decoder is fuzzed: it must not panic, and what it decodes must
// encode to bytes that decode to the same value.

func FuzzRMCPAndSessions(f *testing.F) {
	f.Add([]byte{0x06, 0x00, 0xff, 0x07, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0x09, 0x20, 0x18, 0xc8, 0x81, 0x00, 0x38, 0x8e, 0x04, 0xb5})
	f.Add([]byte{0x06, 0x00, 0xff, 0x07, 0x06, 0xc0, 1, 2, 3, 4, 3, 0, 0, 0, 2, 0, 0xab, 0xcd, 0xff, 0xff, 2, 7})
	f.Add([]byte{0x06, 0x00, 0xff, 0x06, 0, 0, 0x11, 0xbe, 0x80, 1, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, rest, err := DecodeRMCP(b)
		if err != nil {
			return
		}
		// Reserved bits are not kept; the decoded fields must survive.
		if r2, _, err := DecodeRMCP(r.Append(nil)); err != nil || r2 != r {
			t.Fatalf("rmcp round trip: %+v -> %+v (%v)", r, r2, err)
		}
		if a, err := DecodeASF(rest); err == nil {
			if _, err := DecodeASF(a.Append(nil)); err != nil {
				t.Fatal(err)
			}
		}
		if h, msg, err := DecodeV15(rest); err == nil {
			h2, msg2, err := DecodeV15(AppendV15(nil, h, msg))
			if err != nil || h2.Sequence != h.Sequence || !bytes.Equal(msg, msg2) {
				t.Fatalf("v1.5 round trip: %v", err)
			}
		}
		if p, err := DecodeV2(rest); err == nil {
			p2, err := DecodeV2(AppendV2(nil, p.Header, p.Payload))
			if err != nil || p2.Header != p.Header || !bytes.Equal(p.Payload, p2.Payload) {
				t.Fatalf("v2 round trip: %v", err)
			}
		}
	})
}

func FuzzMessages(f *testing.F) {
	f.Add([]byte{0x20, 0x18, 0xc8, 0x81, 0x00, 0x38, 0x8e, 0x04, 0xb5})
	f.Add([]byte{0x81, 0x04, 0x7b, 0x20, 0x04, 0x02, 0x00, 0xda})
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := DecodeRequest(b); err == nil {
			if !bytes.Equal(r.Append(nil), b) {
				t.Fatalf("request round trip")
			}
		}
		if r, err := DecodeResponse(b); err == nil {
			if !bytes.Equal(r.Append(nil), b) {
				t.Fatalf("response round trip")
			}
		}
		if s, err := DecodeSOL(b); err == nil {
			if s2, err := DecodeSOL(s.Append(nil)); err != nil || s2.Seq != s.Seq || !bytes.Equal(s2.Data, s.Data) {
				t.Fatalf("sol round trip")
			}
		}
	})
}

func FuzzSessionSetup(f *testing.F) {
	f.Add(OpenSessionRequest{Tag: 1, MaxPrivilege: 4, ConsoleID: 7, Algorithms: Algorithms{3, 4, 1}}.Append(nil))
	f.Add(RAKP1{Tag: 2, BMCID: 9, Role: 0x14, Username: []byte("admin")}.Append(nil))
	f.Add(OpenSessionResponse{Tag: 7, MaxPrivilege: 4, ConsoleID: 1, BMCID: 2, Algorithms: Algorithms{1, 1, 1}}.Append(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		if m, err := DecodeOpenSessionRequest(b); err == nil {
			if m2, err := DecodeOpenSessionRequest(m.Append(nil)); err != nil || m2 != m {
				t.Fatalf("open session request round trip: %v", err)
			}
		}
		if m, err := DecodeOpenSessionResponse(b); err == nil {
			if m2, err := DecodeOpenSessionResponse(m.Append(nil)); err != nil || m2 != m {
				t.Fatalf("open session response round trip: %v", err)
			}
		}
		if m, err := DecodeRAKP1(b); err == nil {
			if m2, err := DecodeRAKP1(m.Append(nil)); err != nil || !bytes.Equal(m2.Username, m.Username) || m2.Role != m.Role {
				t.Fatalf("rakp1 round trip: %v", err)
			}
		}
		if m, err := DecodeRAKP2(b); err == nil {
			if m2, err := DecodeRAKP2(m.Append(nil)); err != nil || m2.Status != m.Status || !bytes.Equal(m2.AuthCode, m.AuthCode) {
				t.Fatalf("rakp2 round trip: %v", err)
			}
		}
		if m, err := DecodeRAKP3(b); err == nil {
			if m2, err := DecodeRAKP3(m.Append(nil)); err != nil || !bytes.Equal(m2.AuthCode, m.AuthCode) {
				t.Fatalf("rakp3 round trip: %v", err)
			}
		}
		if m, err := DecodeRAKP4(b); err == nil {
			if m2, err := DecodeRAKP4(m.Append(nil)); err != nil || !bytes.Equal(m2.IntegrityCheck, m.IntegrityCheck) {
				t.Fatalf("rakp4 round trip: %v", err)
			}
		}
	})
}
