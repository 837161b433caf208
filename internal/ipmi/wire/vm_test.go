package wire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// frames reads every frame of s, and the errors between them.
func frames(t *testing.T, s []byte) ([]VMFrame, []error) {
	t.Helper()
	r := NewVMReader(bufio.NewReader(bytes.NewReader(s)))
	var fs []VMFrame
	var errs []error
	for {
		f, err := r.Next()
		if errors.Is(err, io.EOF) {
			return fs, errs
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		fs = append(fs, VMFrame{Command: f.Command, Data: append([]byte(nil), f.Data...)})
	}
}

// TestVMHello: what qemu 7.2 (Debian 12's) writes when it connects,
// captured from its socket: version 1, then capabilities 0x3f (power,
// reset, IRQ, NMI, attention, graceful shutdown).
func TestVMHello(t *testing.T) {
	capture := unhex(t, "ff 01 a1 08 3f a1")
	fs, errs := frames(t, capture)
	want := []VMFrame{{Command: true, Data: []byte{0xff, 0x01}}, {Command: true, Data: []byte{0x08, 0x3f}}}
	if diff := cmp.Diff(want, fs); diff != "" || errs != nil {
		t.Errorf("frames (-want +got):\n%s errors %v", diff, errs)
	}
	back := AppendVMCommand(AppendVMCommand(nil, VMCmdVersion, VMProtocolVersion), VMCmdCapabilities, 0x3f)
	if !bytes.Equal(back, capture) {
		t.Errorf("encoded % x, want % x", back, capture)
	}
}

// TestVMMessages: requests and responses both ways, escapes included.
func TestVMMessages(t *testing.T) {
	for _, tc := range []struct {
		name string
		wire string
		req  VMRequest
	}{
		// Get Device ID, seq 0: 00 18 01, checksum -(0x19) = e7.
		{"get device id", "00 18 01 e7 a0", VMRequest{VMHeader: VMHeader{Seq: 0, NetFn: NetFnApp, Cmd: 0x01}}},
		// Set System Boot Options, parameter 5, Force PXE: 03 00 08 05 80 04 00 00 00 + checksum.
		{"boot flags", "03 00 08 05 80 04 00 00 00 6c a0", VMRequest{VMHeader: VMHeader{Seq: 3, NetFn: NetFnChassis, Cmd: 0x08}, Data: []byte{5, 0x80, 4, 0, 0, 0}}},
		// seq 0xa0, command 0xa1, a data byte 0xaa and the checksum 0xa0 travel escaped.
		{"escaped", "aa b0 18 aa b1 aa ba 5d aa b0 a0", VMRequest{VMHeader: VMHeader{Seq: 0xa0, NetFn: NetFnApp, Cmd: 0xa1}, Data: []byte{0xaa, 0x5d}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := unhex(t, tc.wire)
			if got := tc.req.AppendRequest(nil); !bytes.Equal(got, b) {
				t.Fatalf("encoded % x, want % x", got, b)
			}
			fs, errs := frames(t, b)
			if len(fs) != 1 || errs != nil || fs[0].Command {
				t.Fatalf("frames %v, errors %v", fs, errs)
			}
			got, err := DecodeVMRequest(fs[0].Data)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.req, got, cmp.Comparer(bytes.Equal)); diff != "" {
				t.Errorf("decoded (-want +got):\n%s", diff)
			}
			resp := tc.req.AppendResponse(nil, CodeOK, []byte{0x20, 0xa0})
			rfs, errs := frames(t, resp)
			if len(rfs) != 1 || errs != nil {
				t.Fatalf("response frames %v, errors %v", rfs, errs)
			}
			r, err := DecodeVMResponse(rfs[0].Data)
			if err != nil {
				t.Fatal(err)
			}
			want := VMResponse{VMHeader: VMHeader{Seq: tc.req.Seq, NetFn: tc.req.NetFn | 1, Cmd: tc.req.Cmd}, Data: []byte{0x20, 0xa0}}
			if diff := cmp.Diff(want, r); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
		})
	}
}

// TestVMBadFrames: a checksum that does not sum to zero, a frame too short,
// one too long, one ending in an escape; the stream is in step again after
// each.
func TestVMBadFrames(t *testing.T) {
	good := VMRequest{VMHeader: VMHeader{Seq: 1, NetFn: NetFnApp, Cmd: 0x01}}.AppendRequest(nil)
	long := append(bytes.Repeat([]byte{0x11}, VMMaxFrame+1), VMMsgChar)
	stream := bytes.Join([][]byte{long, {0x01, 0xaa, VMMsgChar}, good, {VMMsgChar, VMMsgChar}, good}, nil)
	fs, errs := frames(t, stream)
	if len(errs) != 2 || !errors.Is(errs[0], ErrMalformed) || !errors.Is(errs[1], ErrMalformed) {
		t.Errorf("errors %v, want two malformed frames", errs)
	}
	if len(fs) != 2 {
		t.Fatalf("%d good frames, want 2", len(fs))
	}
	if _, err := DecodeVMRequest([]byte{1, 0x18, 0xe7}); !errors.Is(err, ErrShort) {
		t.Errorf("short request: %v", err)
	}
	if _, err := DecodeVMRequest([]byte{1, 0x18, 0x01, 0x00}); !errors.Is(err, ErrChecksum) {
		t.Errorf("bad checksum: %v", err)
	}
}

// FuzzVMReader: any byte stream, no panic, memory bounded by the frame
// limit.
func FuzzVMReader(f *testing.F) {
	f.Add([]byte{0xff, 0x01, 0xa1, 0x08, 0x3f, 0xa1, 0x00, 0x18, 0x01, 0xe7, 0xa0})
	f.Add([]byte{0xaa, 0xa0, 0xaa, 0xaa, 0xb0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewVMReader(bufio.NewReader(bytes.NewReader(b)))
		for {
			fr, err := r.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				continue
			}
			if len(fr.Data) > VMMaxFrame {
				t.Fatalf("frame of %d bytes", len(fr.Data))
			}
			if !fr.Command {
				_, _ = DecodeVMRequest(fr.Data)
				_, _ = DecodeVMResponse(fr.Data)
			}
		}
	})
}
