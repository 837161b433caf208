package webui

import "testing"

// TestTrimOverlap: the stream's first output repeats what the serial log
// shown at the connect ended with (both hold what was printed between the
// connect and the log's read); the repeat is cut once, a short or absent
// one is not mistaken.
func TestTrimOverlap(t *testing.T) {
	for _, c := range []struct{ tail, out, want string }{
		{"boot...\r\ngrub> ", "grub> ls\r\n", "ls\r\n"},
		{"abc\r\n", "\r\nnext", "\r\nnext"}, // 2 bytes: not a repeat
		{"", "hello", "hello"},
		{"xyz", "hello", "hello"},
		{"hello", "hello", ""},
	} {
		tp := &tap{overlap: []byte(c.tail)}
		if got := string(tp.trimOverlap([]byte(c.out))); got != c.want {
			t.Errorf("tail %q, out %q: %q, want %q", c.tail, c.out, got, c.want)
		}
		if tp.overlap != nil {
			t.Errorf("the overlap is kept after the first output")
		}
	}
}
