package rfb

import (
	"bytes"
	"context"
	"encoding/binary"
	"image/color"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// server plays the server's side of a handshake on conn: version, the
// security exchange of that version, ServerInit of a w×h screen; it
// returns what the client sent after ServerInit's reply is read.
func server(t *testing.T, conn net.Conn, version string, w, h int) {
	t.Helper()
	must := func(err error) {
		if err != nil {
			t.Error(err)
		}
	}
	_, err := conn.Write([]byte(version))
	must(err)
	reply := make([]byte, 12)
	_, err = io.ReadFull(conn, reply)
	must(err)
	switch string(reply) {
	case "RFB 003.003\n":
		_, err = conn.Write([]byte{0, 0, 0, 1})
		must(err)
	case "RFB 003.007\n", "RFB 003.008\n":
		_, err = conn.Write([]byte{2, 2, 1}) // VNC auth, None
		must(err)
		var choice [1]byte
		_, err = io.ReadFull(conn, choice[:])
		must(err)
		if choice[0] != 1 {
			t.Errorf("client chose security type %d, want 1", choice[0])
		}
		if reply[10] == '8' {
			_, err = conn.Write([]byte{0, 0, 0, 0})
			must(err)
		}
	default:
		t.Errorf("client replied %q", reply)
	}
	var ci [1]byte
	_, err = io.ReadFull(conn, ci[:])
	must(err)
	if ci[0] != 1 {
		t.Errorf("ClientInit shared flag %d, want 1", ci[0])
	}
	si := binary.BigEndian.AppendUint16(nil, uint16(w))
	si = binary.BigEndian.AppendUint16(si, uint16(h))
	si = append(si, make([]byte, 16)...)
	si = binary.BigEndian.AppendUint32(si, 4)
	si = append(si, "test"...)
	_, err = conn.Write(si)
	must(err)
	// SetPixelFormat (20 bytes) and SetEncodings (4 + 2×4).
	got := make([]byte, 32)
	_, err = io.ReadFull(conn, got)
	must(err)
	want := []byte{0, 0, 0, 0, 32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0, 2, 0, 0, 2, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x21}
	if !bytes.Equal(got, want) {
		t.Errorf("pixel format and encodings:\n got %v\nwant %v", got, want)
	}
}

func TestHandshakeVersions(t *testing.T) {
	for _, v := range []string{"RFB 003.008\n", "RFB 003.007\n", "RFB 003.003\n", "RFB 003.889\n", "RFB 004.001\n"} {
		t.Run(strings.TrimSpace(v), func(t *testing.T) {
			c, s := net.Pipe()
			done := make(chan struct{})
			go func() { defer close(done); server(t, s, v, 640, 480) }()
			cl, err := Handshake(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			<-done
			if cl.Width != 640 || cl.Height != 480 || cl.Name != "test" {
				t.Errorf("got %d×%d %q", cl.Width, cl.Height, cl.Name)
			}
			cl.Close()
		})
	}
}

func TestHandshakeRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		serve      func(net.Conn)
	}{
		{"not rfb", "not an RFB server", func(s net.Conn) { s.Write([]byte("HTTP/1.1 200")) }},
		{"password", "only an unauthenticated display", func(s net.Conn) {
			s.Write([]byte("RFB 003.008\n"))
			io.ReadFull(s, make([]byte, 12))
			s.Write([]byte{1, 2})
		}},
		{"refused", `"too many clients"`, func(s net.Conn) {
			s.Write([]byte("RFB 003.008\n"))
			io.ReadFull(s, make([]byte, 12))
			s.Write(append([]byte{0, 0, 0, 0, 16}, "too many clients"...))
		}},
		{"huge screen", "want 1–8192", func(s net.Conn) {
			s.Write([]byte("RFB 003.003\n"))
			io.ReadFull(s, make([]byte, 12))
			s.Write([]byte{0, 0, 0, 1})
			io.ReadFull(s, make([]byte, 1))
			s.Write(append([]byte{0xff, 0xff, 0, 10}, make([]byte, 20)...))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, s := net.Pipe()
			go func() { tc.serve(s); io.Copy(io.Discard, s) }()
			_, err := Handshake(context.Background(), c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
			s.Close()
		})
	}
}

func TestHandshakeBounded(t *testing.T) {
	c, s := net.Pipe()
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := Handshake(ctx, c); err == nil {
		t.Fatal("a silent server: handshake succeeded")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("a silent server held the handshake %s", d)
	}
}

func rect(x, y, w, h int, enc int32) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(x))
	b = binary.BigEndian.AppendUint16(b, uint16(y))
	b = binary.BigEndian.AppendUint16(b, uint16(w))
	b = binary.BigEndian.AppendUint16(b, uint16(h))
	return binary.BigEndian.AppendUint32(b, uint32(enc))
}

func pixels(n int, r, g, b byte) []byte {
	return bytes.Repeat([]byte{b, g, r, 0}, n)
}

func TestCapture(t *testing.T) {
	c, s := net.Pipe()
	go func() {
		server(t, s, "RFB 003.008\n", 4, 2)
		req := make([]byte, 10)
		io.ReadFull(s, req)
		if want := []byte{3, 0, 0, 0, 0, 0, 0, 4, 0, 2}; !bytes.Equal(req, want) {
			t.Errorf("request %v, want %v", req, want)
		}
		// A bell, a colour map, a cut text, then a resize to 2×2 in the
		// same update as stale pixels, then the new screen in two updates.
		var m []byte
		m = append(m, 2)
		m = append(m, 1, 0, 0, 0, 0, 1, 1, 2, 3, 4, 5, 6)
		m = append(m, 3, 0, 0, 0, 0, 0, 0, 2, 'h', 'i')
		m = append(m, 0, 0, 0, 2)
		m = append(m, rect(0, 0, 2, 2, encDesktopSize)...)
		m = append(m, rect(0, 0, 4, 1, encRaw)...)
		m = append(m, pixels(4, 9, 9, 9)...)
		s.Write(m)
		io.ReadFull(s, req)
		if want := []byte{3, 0, 0, 0, 0, 0, 0, 2, 0, 2}; !bytes.Equal(req, want) {
			t.Errorf("request after the resize %v, want %v", req, want)
		}
		m = append([]byte{0, 0, 0, 1}, rect(0, 0, 2, 1, encRaw)...)
		m = append(m, pixels(2, 255, 0, 0)...)
		m = append(m, 0, 0, 0, 1)
		m = append(m, rect(0, 1, 2, 1, encRaw)...)
		m = append(m, pixels(1, 0, 255, 0)...)
		m = append(m, pixels(1, 0, 0, 255)...)
		s.Write(m)
	}()
	cl, err := Handshake(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	img, err := cl.Capture(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []color.RGBA
	for y := range 2 {
		for x := range 2 {
			got = append(got, img.RGBAAt(x, y))
		}
	}
	want := []color.RGBA{{255, 0, 0, 255}, {255, 0, 0, 255}, {0, 255, 0, 255}, {0, 0, 255, 255}}
	if diff := cmp.Diff(want, got); diff != "" || img.Bounds().Dx() != 2 {
		t.Errorf("pixels (-want +got):\n%s (bounds %v)", diff, img.Bounds())
	}
}

func TestCaptureRefusesBadRects(t *testing.T) {
	for _, tc := range []struct {
		name string
		msg  []byte
		want string
	}{
		{"outside", append([]byte{0, 0, 0, 1}, rect(3, 0, 2, 1, encRaw)...), "outside the 4×2 screen"},
		{"encoding", append([]byte{0, 0, 0, 1}, rect(0, 0, 1, 1, 7)...), "encoding 7"},
		{"message", []byte{9}, "unknown server message type 9"},
		{"cut text", []byte{3, 0, 0, 0, 0x7f, 0, 0, 0}, "want at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, s := net.Pipe()
			go func() {
				server(t, s, "RFB 003.008\n", 4, 2)
				io.ReadFull(s, make([]byte, 10))
				s.Write(tc.msg)
				io.Copy(io.Discard, s)
			}()
			cl, err := Handshake(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if _, err := cl.Capture(context.Background()); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestParseKey(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Stroke
		err  string
	}{
		{in: "Enter", want: Stroke{Key: "Enter"}},
		{in: "return", want: Stroke{Key: "Enter"}},
		{in: "Ctrl-Alt-Del", want: Stroke{Key: "Delete", Ctrl: true, Alt: true}},
		{in: "shift-TAB", want: Stroke{Key: "Tab", Shift: true}},
		{in: "Ctrl-c", want: Stroke{Key: "c", Ctrl: true}},
		{in: "F12", want: Stroke{Key: "F12"}},
		{in: "-", want: Stroke{Key: "-"}},
		{in: "Alt--", want: Stroke{Key: "-", Alt: true}},
		{in: "F13", err: `unknown key "F13"`},
		{in: "Hyper-a", err: `unknown key "Hyper-a"`},
		{in: "", err: `unknown key ""`},
	} {
		got, err := ParseKey(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseKey(%q): %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseKey(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestEvents(t *testing.T) {
	for _, tc := range []struct {
		s    Stroke
		want []KeyEvent
	}{
		{Stroke{Key: "a"}, []KeyEvent{{'a', true}, {'a', false}}},
		{Stroke{Key: "A"}, []KeyEvent{{symShift, true}, {'A', true}, {'A', false}, {symShift, false}}},
		{Stroke{Key: "!"}, []KeyEvent{{symShift, true}, {'!', true}, {'!', false}, {symShift, false}}},
		{Stroke{Key: "Delete", Ctrl: true, Alt: true}, []KeyEvent{{symCtrl, true}, {symAlt, true}, {0xffff, true}, {0xffff, false}, {symAlt, false}, {symCtrl, false}}},
		{Stroke{Key: "F2"}, []KeyEvent{{0xffbf, true}, {0xffbf, false}}},
	} {
		got, err := tc.s.Events()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.s, diff)
		}
	}
	if _, err := (Stroke{Key: "Nope"}).Events(); err == nil {
		t.Error("an unknown key made events")
	}
}

func TestTextStrokes(t *testing.T) {
	got, err := TextStrokes("a B\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []Stroke{{Key: "a"}, {Key: "Space"}, {Key: "B"}, {Key: "Enter"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := TextStrokes("né"); err == nil || !strings.Contains(err.Error(), "at byte 1") {
		t.Errorf("a non-ASCII letter: %v", err)
	}
}

func TestKeyWire(t *testing.T) {
	c, s := net.Pipe()
	go func() { server(t, s, "RFB 003.008\n", 1, 1) }()
	cl, err := Handshake(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte)
	go func() { b := make([]byte, 8); io.ReadFull(s, b); got <- b }()
	if err := cl.Key(0xff0d, true); err != nil {
		t.Fatal(err)
	}
	if b, want := <-got, []byte{4, 1, 0, 0, 0, 0, 0xff, 0x0d}; !bytes.Equal(b, want) {
		t.Errorf("KeyEvent %v, want %v", b, want)
	}
}
