package media

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/machine"
)

// byteServer serves body at every path (honouring Range unless told to
// ignore it) and counts the bytes it sends.
type byteServer struct {
	*httptest.Server
	body        []byte
	sent        atomic.Int64
	ignoreRange bool
	handlers    sync.WaitGroup // requests whose handler has not returned
}

// sentAll is what the server sent once every request's handler has
// returned: a client can have read the last bytes before the handler's
// Write returned and counted them.
func (s *byteServer) sentAll(t *testing.T) int64 {
	t.Helper()
	done := make(chan struct{})
	go func() { s.handlers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("a request's handler had not returned 30 s after the client was done")
	}
	return s.sent.Load()
}

func newByteServer(t *testing.T, body []byte, ignoreRange bool) *byteServer {
	s := &byteServer{body: body, ignoreRange: ignoreRange}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.handlers.Add(1)
		defer s.handlers.Done()
		if r.URL.Path == "/missing.iso" {
			http.NotFound(w, r)
			return
		}
		cw := &sentWriter{ResponseWriter: w, n: &s.sent}
		if s.ignoreRange {
			r.Header.Del("Range")
			w.Header().Set("Content-Length", strconv.Itoa(len(s.body)))
		}
		http.ServeContent(cw, r, "image.iso", time.Time{}, bytes.NewReader(s.body))
	}))
	t.Cleanup(s.Close)
	return s
}

type sentWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w *sentWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	w.n.Add(int64(n))
	return n, err
}

// A probe reads the image's first 64 KiB, checks them as a fetch checks
// the whole image, and downloads nothing else; what a drive then holds is
// the URL.
func TestProbeReadsTheHeadOnly(t *testing.T) {
	iso := fakeISO(4<<20, "probed")
	for _, ignoreRange := range []bool{false, true} {
		srv := newByteServer(t, iso, ignoreRange)
		c := newCache(t, Config{})
		img, release, err := c.Probe(context.Background(), machine.ImageRequest{Image: srv.URL + "/boot.iso", ISO: true})
		if err != nil {
			t.Fatalf("ignoring Range %v: %v", ignoreRange, err)
		}
		release()
		if img.Path != srv.URL+"/boot.iso" || img.Size != 4<<20 {
			t.Errorf("ignoring Range %v: %+v", ignoreRange, img)
		}
		// A server that ignores Range sends what is buffered before the
		// client closes: more than 64 KiB, far from the 4 MiB.
		sent := srv.sentAll(t)
		if (!ignoreRange && sent != ProbeBytes) || sent >= 4<<20 {
			t.Errorf("ignoring Range %v: the server sent %d bytes of the 4 MiB image", ignoreRange, sent)
		}
		if st := c.Stats(); st.Probes != 1 || st.Downloads != 0 || st.Images != 0 {
			t.Errorf("cache after a probe: %+v", st)
		}
	}
}

// A probe refuses what a fetch refuses, with the same kinds.
func TestProbeRefusals(t *testing.T) {
	page := bytes.Repeat([]byte("<html>not an image</html>\n"), 5000)
	srv := newByteServer(t, page, false)
	c := newCache(t, Config{})
	for _, tc := range []struct {
		req  machine.ImageRequest
		kind machine.MediaErrorKind
	}{
		{machine.ImageRequest{Image: srv.URL + "/page.iso", ISO: true}, machine.MediaNotImage},
		{machine.ImageRequest{Image: srv.URL + "/page.img"}, machine.MediaNotImage},
		{machine.ImageRequest{Image: srv.URL + "/missing.iso", ISO: true}, machine.MediaNotFound},
		{machine.ImageRequest{Image: "ftp://example.invalid/a.iso", ISO: true}, machine.MediaForbidden},
		{machine.ImageRequest{Image: "/etc/passwd", ISO: true}, machine.MediaForbidden},
	} {
		if _, _, err := c.Probe(context.Background(), tc.req); kindOf(err) != tc.kind {
			t.Errorf("%s: %v, want %s", tc.req.Image, err, tc.kind)
		}
	}
	strict, err := New(Config{Dir: t.TempDir()}) // loopback not allowed
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := strict.Probe(context.Background(), machine.ImageRequest{Image: srv.URL + "/a.iso", ISO: true}); kindOf(err) != machine.MediaDenied {
		t.Errorf("a loopback image under the default policy: %v, want denied", err)
	}
}

// ProbeFor probes for the machines it is told of, fetches for the others,
// and always fetches a firmware image.
func TestProbeForChoosesByMachine(t *testing.T) {
	srv := newByteServer(t, fakeISO(1<<20, "x"), false)
	c := newCache(t, Config{})
	f := c.ProbeFor(func(id string) bool { return id == "probed" })
	for _, req := range []machine.ImageRequest{
		{Machine: "probed", Image: srv.URL + "/a.iso", ISO: true},
		{Machine: "fetched", Image: srv.URL + "/b.iso", ISO: true},
		{Machine: "probed", Image: srv.URL + "/fw.bin", Raw: true},
	} {
		_, release, err := f.Fetch(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		release()
	}
	if st := c.Stats(); st.Probes != 1 || st.Downloads != 2 {
		t.Errorf("stats %+v: want one probe and two downloads", st)
	}
}
