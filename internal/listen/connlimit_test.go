package listen

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/testenv"
)

// A source is an IPv4 address, or an IPv6 address's /64 (what one host is
// usually given); an IPv4-mapped address is its IPv4 one.
func TestConnectionSource(t *testing.T) {
	src := func(s string) string {
		return source(&net.TCPAddr{IP: net.ParseIP(s), Port: 1234}).String()
	}
	for _, tc := range []struct{ a, b string }{
		{"2001:db8::1", "2001:db8::ffff:1"},
		{"::ffff:192.0.2.1", "192.0.2.1"},
	} {
		if src(tc.a) != src(tc.b) {
			t.Errorf("%s and %s are counted apart (%s, %s), want together", tc.a, tc.b, src(tc.a), src(tc.b))
		}
	}
	for _, tc := range []struct{ a, b string }{
		{"2001:db8::1", "2001:db8:0:1::1"},
		{"192.0.2.1", "192.0.2.2"},
	} {
		if src(tc.a) == src(tc.b) {
			t.Errorf("%s and %s are counted together (%s), want apart", tc.a, tc.b, src(tc.a))
		}
	}
}

// An idle connection is closed after idleFor by the limiter's sweep (the
// server arms no idle timer per connection: Go's runtime kept each ended
// connection's buffers until its timer would have fired); one in use is
// not.
func TestIdleConnectionsClosed(t *testing.T) {
	const idleFor = 1500 * time.Millisecond
	l := newConnLimiter(8, 8, idleFor, testenv.Logger(t))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	slow := make(chan struct{})
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, ConnState: l.connState,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/slow" {
				<-slow
			}
		})}
	go srv.Serve(l.wrap(ln))
	t.Cleanup(func() { close(slow); srv.Close() })
	idle, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	busy, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	fmt.Fprintf(idle, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, err := http.ReadResponse(bufio.NewReader(idle), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET: %v %v", resp, err)
	}
	fmt.Fprintf(busy, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	start := time.Now()
	idle.SetReadDeadline(time.Now().Add(idleFor + 3*time.Second))
	_, err = idle.Read(make([]byte, 1))
	took := time.Since(start)
	if err != io.EOF || took < idleFor-100*time.Millisecond || took > idleFor+2*time.Second {
		t.Errorf("the idle connection: %v after %v, want closed (EOF) after about %v", err, took, idleFor)
	}
	busy.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	var ne net.Error
	if _, err := busy.Read(make([]byte, 1)); !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("the connection in use: %v, want it kept open", err)
	}
}
