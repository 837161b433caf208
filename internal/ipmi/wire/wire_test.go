package wire

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	var out []byte
	var hi, n int
	for _, c := range s {
		var v int
		switch {
		case c >= '0' && c <= '9':
			v = int(c - '0')
		case c >= 'a' && c <= 'f':
			v = int(c-'a') + 10
		default:
			continue
		}
		if n%2 == 0 {
			hi = v
		} else {
			out = append(out, byte(hi<<4|v))
		}
		n++
	}
	return out
}

// TestV15AuthCapsCapture: the Get Channel Authentication Capabilities that
// ipmitool -I lanplus sends first (captured), both ways.
func TestV15AuthCapsCapture(t *testing.T) {
	pkt := unhex(t, "06 00 ff 07  00 00000000 00000000 09  20 18 c8 81 00 38 8e 04 b5")
	r, rest, err := DecodeRMCP(pkt)
	if err != nil {
		t.Fatal(err)
	}
	h, msg, err := DecodeV15(rest)
	if err != nil {
		t.Fatal(err)
	}
	req, err := DecodeRequest(msg)
	if err != nil {
		t.Fatal(err)
	}
	want := Request{RsAddr: 0x20, NetFn: NetFnApp, RqAddr: 0x81, Cmd: 0x38, Data: []byte{0x8e, 0x04}}
	if diff := cmp.Diff(want, req); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
	back := AppendV15(r.Append(nil), h, req.Append(nil))
	if !bytes.Equal(back, pkt) {
		t.Errorf("re-encoded\n% x\nwant\n% x", back, pkt)
	}
}

// roundTrip is a TestRoundTrips case: bytes (hex) decode to want, and
// want encodes to the same bytes.
type roundTrip struct {
	name   string
	bytes  string
	decode func([]byte) (any, error)
	encode func(any) []byte
	want   any
}

// rt is the roundTrip case of a message of type T, decoded by decode.
func rt[T interface{ Append([]byte) []byte }](name, bytes string, decode func([]byte) (T, error), want T) roundTrip {
	return roundTrip{name, bytes,
		func(b []byte) (any, error) { return decode(b) },
		func(v any) []byte { return v.(T).Append(nil) },
		want}
}

func TestRoundTrips(t *testing.T) {
	tests := []roundTrip{
		rt("open session request, suite 17",
			"01 04 0000 78563412 00000008 03000000 01000008 04000000 02000008 01000000",
			DecodeOpenSessionRequest, OpenSessionRequest{Tag: 1, MaxPrivilege: 4, ConsoleID: 0x12345678, Algorithms: Algorithms{3, 4, 1}}),
		rt("open session response, suite 3",
			"07 00 04 00 78563412 efbeadde 00000008 01000000 01000008 01000000 02000008 01000000",
			DecodeOpenSessionResponse, OpenSessionResponse{Tag: 7, MaxPrivilege: 4, ConsoleID: 0x12345678, BMCID: 0xdeadbeef, Algorithms: Algorithms{1, 1, 1}}),
		rt("open session refused",
			"07 11 00 00 78563412",
			DecodeOpenSessionResponse, OpenSessionResponse{Tag: 7, Status: StatusNoCipherSuiteMatch, ConsoleID: 0x12345678}),
		rt("rakp 1",
			"02 000000 efbeadde 000102030405060708090a0b0c0d0e0f 14 0000 05 61646d696e",
			DecodeRAKP1, RAKP1{Tag: 2, BMCID: 0xdeadbeef, ConsoleRandom: [16]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, Role: 0x14, Username: []byte("admin")}),
		rt("rakp 2 refused: unauthorized name",
			"02 0d 0000 78563412",
			DecodeRAKP2, RAKP2{Tag: 2, Status: StatusUnauthorizedName, ConsoleID: 0x12345678}),
		rt("rakp 3",
			"03 00 0000 efbeadde aabbcc",
			DecodeRAKP3, RAKP3{Tag: 3, BMCID: 0xdeadbeef, AuthCode: []byte{0xaa, 0xbb, 0xcc}}),
		rt("rakp 4 refused: integrity",
			"03 0f 0000 78563412",
			DecodeRAKP4, RAKP4{Tag: 3, Status: StatusInvalidIntegrityValue, ConsoleID: 0x12345678, IntegrityCheck: []byte{}}),
		rt("chassis control response",
			"81 04 7b 20 04 02 00 da",
			DecodeResponse, Response{RqAddr: 0x81, NetFn: NetFnChassis | 1, RsAddr: 0x20, RqSeq: 1, Cmd: 0x02, Code: CodeOK, Data: []byte{}}),
		rt("sol data",
			"03 00 00 00 6869",
			DecodeSOL, SOL{Seq: 3, Data: []byte("hi")}),
		rt("asf presence ping",
			"000011be 80 2a 00 00",
			DecodeASF, ASF{Type: ASFPresencePing, Tag: 0x2a, Data: []byte{}}),
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := unhex(t, tt.bytes)
			got, err := tt.decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("decode (-want +got):\n%s", diff)
			}
			if enc := tt.encode(tt.want); !bytes.Equal(enc, b) {
				t.Errorf("encode\n% x\nwant\n% x", enc, b)
			}
		})
	}
}

func TestV2Header(t *testing.T) {
	b := unhex(t, "06 c0 efbeadde 03000000 0200 abcd ffff0207")
	p, err := DecodeV2(b)
	if err != nil {
		t.Fatal(err)
	}
	want := V2Header{Encrypted: true, Authenticated: true, PayloadType: PayloadIPMI, SessionID: 0xdeadbeef, Sequence: 3}
	if diff := cmp.Diff(want, p.Header); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if !bytes.Equal(p.Payload, []byte{0xab, 0xcd}) || !bytes.Equal(p.Trailer, []byte{0xff, 0xff, 0x02, 0x07}) {
		t.Errorf("payload % x trailer % x", p.Payload, p.Trailer)
	}
	if enc := AppendV2(nil, want, []byte{0xab, 0xcd}); !bytes.Equal(enc, b[:len(b)-4]) {
		t.Errorf("encode % x", enc)
	}
}

func TestShortInputsSayWhatTheyWant(t *testing.T) {
	_, err := DecodeOpenSessionRequest(make([]byte, 10))
	if !errors.Is(err, ErrShort) || err.Error() != "packet too short: open session request: want 32 bytes, got 10" {
		t.Errorf("err %v", err)
	}
	if _, err := DecodeRequest(unhex(t, "20 18 c8 81 00 38 8e 04 b6")); !errors.Is(err, ErrChecksum) {
		t.Errorf("bad checksum: %v", err)
	}
}
