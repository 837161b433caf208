package labvirt

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFetch: the provider downloads an image once, on 127.0.0.1: the
// body through the caller's watch with its size, a path that is there
// kept; a refused or broken download leaves neither the image nor its
// part.
func TestFetch(t *testing.T) {
	ctx := context.Background()
	const body = "qcow2 image bytes"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/rhcos.qcow2":
			_, _ = io.WriteString(w, body)
		case "/broken.qcow2":
			w.Header().Set("Content-Length", "1000")
			_, _ = io.WriteString(w, "short")
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	h := &Host{}
	var sizes []int64
	watch := func(r io.Reader, size int64) io.Reader { sizes = append(sizes, size); return r }
	path := filepath.Join(dir, "images", "rhcos.qcow2")
	for i, want := range []bool{true, false} {
		changed, err := h.Fetch(ctx, srv.URL+"/rhcos.qcow2", path, watch)
		if err != nil || changed != want {
			t.Fatalf("fetch %d = %v, %v; want %v", i, changed, err, want)
		}
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != body {
		t.Errorf("image = %q, %v; want %q", got, err, body)
	}
	if len(sizes) != 1 || sizes[0] != int64(len(body)) {
		t.Errorf("watch saw sizes %v, want [%d]", sizes, len(body))
	}
	for _, name := range []string{"missing.qcow2", "broken.qcow2"} {
		p := filepath.Join(dir, "images", name)
		if _, err := h.Fetch(ctx, srv.URL+"/"+name, p, watch); err == nil || !strings.Contains(err.Error(), "download "+srv.URL+"/"+name) {
			t.Errorf("fetch %s = %v, want an error naming the download", name, err)
		}
		for _, left := range []string{p, p + ".part"} {
			if _, err := os.Stat(left); !os.IsNotExist(err) {
				t.Errorf("%s after a failed download: %v, want it absent", left, err)
			}
		}
	}
}
