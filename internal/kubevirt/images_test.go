package kubevirt

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/bmlab/bmlab/internal/testenv"
)

// TestImageServer: a registered file is served (GET, ranges) at the URL
// Serve returned, under the server's base, until as many Stops as Serves
// (two machines inserting the same cached image); a guessed token,
// another method and a stopped file are refused.
func TestImageServer(t *testing.T) {
	p := testenv.WriteFile(t, t.TempDir(), "boot.iso", []byte("0123456789"))
	s := NewImageServer("http://vbmcd.lab.svc:8081/")
	u := s.Serve(p)
	if !strings.HasPrefix(u, "http://vbmcd.lab.svc:8081/") || !strings.HasSuffix(u, "/boot.iso") || len(u) < len("http://vbmcd.lab.svc:8081/")+32 {
		t.Fatalf("URL %s", u)
	}
	if again := s.Serve(p); again != u {
		t.Errorf("the same file got a second URL %s", again)
	}
	path := strings.TrimPrefix(u, "http://vbmcd.lab.svc:8081")
	get := func(method, path, rng string) (int, string) {
		req := httptest.NewRequest(method, path, nil)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		b, _ := io.ReadAll(w.Result().Body)
		return w.Code, string(b)
	}
	if c, b := get("GET", path, ""); c != http.StatusOK || b != "0123456789" {
		t.Errorf("GET: %d %q", c, b)
	}
	if c, b := get("GET", path, "bytes=2-4"); c != http.StatusPartialContent || b != "234" {
		t.Errorf("GET range: %d %q", c, b)
	}
	if c, _ := get("POST", path, ""); c != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d, want 405", c)
	}
	if c, _ := get("GET", "/00000000000000000000000000000000/boot.iso", ""); c != http.StatusNotFound {
		t.Errorf("a guessed token: %d, want 404", c)
	}
	s.Stop(p) // one of the two Serves: a second machine still uses it
	if c, _ := get("GET", path, ""); c != http.StatusOK {
		t.Errorf("after one of two Stops: %d, want 200", c)
	}
	s.Stop(p)
	if c, _ := get("GET", path, ""); c != http.StatusNotFound {
		t.Errorf("after the last Stop: %d, want 404", c)
	}
}
