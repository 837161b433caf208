package media

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
)

// fakeISO returns n bytes (n > 32774) that pass the ISO check, marked with tag.
func fakeISO(n int, tag string) []byte {
	b := make([]byte, n)
	copy(b[32769:], "CD001")
	copy(b[40000:], tag)
	return b
}

// imageServer serves one image whose content and validators tests change.
type imageServer struct {
	*httptest.Server
	mu       sync.Mutex
	body     []byte
	etag     string
	modified time.Time
	gets     atomic.Int32 // requests answered with a body
	cut      atomic.Int32 // the next n responses stop halfway
	status   int
}

func newImageServer(t *testing.T, tls bool) *imageServer {
	s := &imageServer{modified: time.Now().Add(-time.Hour).Truncate(time.Second)}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		body, etag, mod, status := s.body, s.etag, s.modified, s.status
		s.mu.Unlock()
		if status != 0 {
			w.WriteHeader(status)
			return
		}
		if etag != "" {
			w.Header().Set("ETag", etag)
		}
		if s.cut.Load() > 0 {
			s.cut.Add(-1)
			s.gets.Add(1)
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.WriteHeader(http.StatusOK)
			w.Write(body[:len(body)/2])
			if hj, ok := w.(http.Hijacker); ok {
				c, _, _ := hj.Hijack()
				c.Close()
			}
			return
		}
		http.ServeContent(&countingWriter{ResponseWriter: w, gets: &s.gets}, r, "image.iso", mod, bytes.NewReader(body))
	})
	if tls {
		s.Server = httptest.NewTLSServer(h)
	} else {
		s.Server = httptest.NewServer(h)
	}
	t.Cleanup(s.Close)
	return s
}

// countingWriter counts a response with a body before the client can
// have read it.
type countingWriter struct {
	http.ResponseWriter
	status  int
	gets    *atomic.Int32
	counted bool
}

func (w *countingWriter) WriteHeader(code int) { w.status = code; w.ResponseWriter.WriteHeader(code) }
func (w *countingWriter) Write(b []byte) (int, error) {
	if (w.status == 0 || w.status == http.StatusOK) && !w.counted {
		w.counted = true
		w.gets.Add(1)
	}
	return w.ResponseWriter.Write(b)
}

func (s *imageServer) set(body []byte, etag string, modified time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.body, s.etag, s.modified = body, etag, modified
}

// newCache opens a cache in a temporary directory. The tests' image servers
// are on loopback, so the policy allows it, as an operator who serves images
// on the BMC host would (vbmcd --media-allow-loopback).
func newCache(t *testing.T, cfg Config) *Cache {
	t.Helper()
	cfg.Policy.AllowLoopback = true
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func fetch(t *testing.T, c *Cache, req machine.ImageRequest) (machine.FetchedImage, error) {
	t.Helper()
	img, release, err := c.Fetch(context.Background(), req)
	release()
	return img, err
}

func mustFetch(t *testing.T, c *Cache, req machine.ImageRequest) machine.FetchedImage {
	t.Helper()
	img, err := fetch(t, c, req)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func kindOf(err error) machine.MediaErrorKind {
	if me, ok := machine.IsMediaError(err); ok {
		return me.Kind
	}
	return ""
}

// TestUnchangedImageIsFetchedOnce: the same URL, unchanged, is revalidated
// (304) and never downloaded again, with ETag or with Last-Modified only.
func TestUnchangedImageIsFetchedOnce(t *testing.T) {
	for _, etag := range []string{`"v1"`, ""} {
		t.Run("etag="+etag, func(t *testing.T) {
			srv := newImageServer(t, false)
			srv.set(fakeISO(64<<10, "one"), etag, time.Now().Add(-time.Hour))
			c := newCache(t, Config{})
			req := machine.ImageRequest{Image: srv.URL + "/boot-node.iso", ISO: true}
			a := mustFetch(t, c, req)
			b := mustFetch(t, c, req)
			if got := srv.gets.Load(); got != 1 {
				t.Fatalf("%d downloads of an unchanged image, want 1", got)
			}
			if a.Path != b.Path || a.SHA256 != b.SHA256 {
				t.Fatalf("second fetch gave %+v, first %+v", b, a)
			}
			if !strings.HasPrefix(a.Path, filepath.Join(c.Dir(), "objects")+"/") {
				t.Fatalf("image at %s, outside the cache's objects", a.Path)
			}
		})
	}
}

// TestChangedImageIsFetchedAgain: Ironic reuses boot-<node>.iso with new
// content; the cache must fetch it again, also when only Last-Modified
// changes and when the change falls within the same second as the last
// fetch (Last-Modified cannot tell; the entry is not trusted), and when the
// new file is older than the cached one (Ironic links images from its own
// cache into its HTTP root: If-Modified-Since would get a 304), also with
// only a weak ETag.
func TestChangedImageIsFetchedAgain(t *testing.T) {
	cases := []struct {
		name         string
		etag1, etag2 string
		racy, older  bool
	}{
		{"etag", `"v1"`, `"v2"`, false, false},
		{"last-modified", "", "", false, false},
		{"same-second", "", "", true, false},
		{"older", "", "", false, true},
		{"older-weak-etag", `W/"v1"`, `W/"v1"`, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newImageServer(t, false)
			mod := time.Now().Add(-time.Hour)
			if tc.racy {
				mod = time.Now()
			}
			srv.set(fakeISO(64<<10, "one"), tc.etag1, mod)
			c := newCache(t, Config{})
			req := machine.ImageRequest{Image: srv.URL + "/boot-node.iso", ISO: true}
			a := mustFetch(t, c, req)
			mod2 := mod.Add(time.Minute)
			if tc.racy {
				mod2 = mod // same second, same length: only the content differs
			}
			if tc.older {
				mod2 = mod.Add(-24 * time.Hour)
			}
			srv.set(fakeISO(64<<10, "two"), tc.etag2, mod2)
			b := mustFetch(t, c, req)
			if got := srv.gets.Load(); got != 2 {
				t.Fatalf("%d downloads, want 2", got)
			}
			if a.SHA256 == b.SHA256 {
				t.Fatalf("the changed image has the old hash")
			}
			got, _ := os.ReadFile(b.Path)
			if !bytes.Contains(got, []byte("two")) {
				t.Fatalf("the cache returned the old content")
			}
		})
	}
}

// TestInterruptedDownload: a transfer cut halfway is a clean error (no file
// left, nothing cached) and a retry succeeds.
func TestInterruptedDownload(t *testing.T) {
	srv := newImageServer(t, false)
	srv.set(fakeISO(1<<20, "one"), `"v1"`, time.Now().Add(-time.Hour))
	srv.cut.Store(1)
	c := newCache(t, Config{})
	req := machine.ImageRequest{Image: srv.URL + "/a.iso", ISO: true}
	_, err := fetch(t, c, req)
	if kindOf(err) != machine.MediaFailed || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("cut transfer: %v (kind %q), want an interrupted-transfer failure", err, kindOf(err))
	}
	for _, d := range []string{"tmp", "objects"} {
		if es, _ := os.ReadDir(filepath.Join(c.Dir(), d)); len(es) != 0 {
			t.Fatalf("%s holds %d files after a failed transfer", d, len(es))
		}
	}
	if st := c.Stats(); st.Images != 0 {
		t.Fatalf("cache has %+v after a failed transfer", st)
	}
	img := mustFetch(t, c, req)
	if img.Size != 1<<20 {
		t.Fatalf("retry got %d bytes", img.Size)
	}
}

func TestFetchErrorsSayWhich(t *testing.T) {
	srv := newImageServer(t, false)
	srv.set(fakeISO(64<<10, "x"), "", time.Now().Add(-time.Hour))
	notISO := newImageServer(t, false)
	notISO.set(make([]byte, 64<<10), "", time.Now().Add(-time.Hour))
	missing := newImageServer(t, false)
	missing.status = http.StatusNotFound
	denied := newImageServer(t, false)
	denied.status = http.StatusUnauthorized
	tlsSrv := newImageServer(t, true)
	tlsSrv.set(fakeISO(64<<10, "x"), "", time.Now().Add(-time.Hour))
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()

	c := newCache(t, Config{})
	for _, tc := range []struct {
		name string
		req  machine.ImageRequest
		want machine.MediaErrorKind
	}{
		{"404", machine.ImageRequest{Image: missing.URL + "/x.iso"}, machine.MediaNotFound},
		{"401", machine.ImageRequest{Image: denied.URL + "/x.iso"}, machine.MediaAuth},
		{"unreachable", machine.ImageRequest{Image: closed.URL + "/x.iso"}, machine.MediaUnreachable},
		{"not an ISO", machine.ImageRequest{Image: notISO.URL + "/x.iso", ISO: true}, machine.MediaNotImage},
		{"TLS untrusted", machine.ImageRequest{Image: tlsSrv.URL + "/x.iso", VerifyCertificate: true}, machine.MediaTLS},
		{"scheme", machine.ImageRequest{Image: "nfs://127.0.0.1/x.iso"}, machine.MediaForbidden},
		{"local not allowed", machine.ImageRequest{Image: "/etc/hostname"}, machine.MediaForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := fetch(t, c, tc.req)
			if kindOf(err) != tc.want {
				t.Fatalf("got %v (kind %q), want kind %q", err, kindOf(err), tc.want)
			}
		})
	}
	t.Run("TLS trusted by the member's certificate", func(t *testing.T) {
		cert := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw}))
		mustFetch(t, c, machine.ImageRequest{Image: tlsSrv.URL + "/x.iso", VerifyCertificate: true, Certificates: []string{cert}})
	})
	t.Run("TLS unverified", func(t *testing.T) {
		mustFetch(t, c, machine.ImageRequest{Image: tlsSrv.URL + "/y.iso"})
	})
	t.Run("basic auth", func(t *testing.T) {
		var user, pass string
		auth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			user, pass, _ = r.BasicAuth()
			w.Write(fakeISO(40<<10, "a"))
		}))
		defer auth.Close()
		mustFetch(t, c, machine.ImageRequest{Image: auth.URL + "/x.iso", UserName: "u", Password: "p"})
		if user != "u" || pass != "p" {
			t.Fatalf("server saw %q/%q", user, pass)
		}
	})
}

func TestSizeBoundEvictsLeastRecentlyUsedUnheld(t *testing.T) {
	srv := newImageServer(t, false)
	c := newCache(t, Config{MaxBytes: 200 << 10})
	var imgs []machine.FetchedImage
	for i, tag := range []string{"a", "b", "c"} {
		srv.set(fakeISO(90<<10, tag), `"`+tag+`"`, time.Now().Add(-time.Hour))
		var inUse []string
		if i == 2 {
			inUse = []string{imgs[0].Path} // a machine holds the oldest one
		}
		imgs = append(imgs, mustFetch(t, c, machine.ImageRequest{Image: srv.URL + "/" + tag + ".iso", InUse: func() []string { return inUse }}))
	}
	if _, err := os.Stat(imgs[0].Path); err != nil {
		t.Fatalf("the held image was evicted: %v", err)
	}
	if _, err := os.Stat(imgs[1].Path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the least recently used unheld image is still there (%v)", err)
	}
	if st := c.Stats(); st.Bytes > 200<<10 || st.Images != 2 {
		t.Fatalf("cache %+v exceeds its bound", st)
	}
	// Too big for the bound at all.
	srv.set(fakeISO(300<<10, "big"), `"big"`, time.Now().Add(-time.Hour))
	if _, err := fetch(t, c, machine.ImageRequest{Image: srv.URL + "/big.iso"}); kindOf(err) != machine.MediaNoSpace {
		t.Fatalf("oversized image: %v", err)
	}
}

func TestDiskFullIsReported(t *testing.T) {
	srv := newImageServer(t, false)
	srv.set(fakeISO(64<<10, "a"), "", time.Now().Add(-time.Hour))
	c := newCache(t, Config{})
	c.statfs = func(string) (int64, error) { return 1 << 20, nil }
	_, err := fetch(t, c, machine.ImageRequest{Image: srv.URL + "/a.iso"})
	if kindOf(err) != machine.MediaNoSpace || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("got %v", err)
	}
}

func TestSameContentOneCopyAndSafeNames(t *testing.T) {
	srv := newImageServer(t, false)
	srv.set(fakeISO(64<<10, "a"), `"a"`, time.Now().Add(-time.Hour))
	c := newCache(t, Config{})
	a := mustFetch(t, c, machine.ImageRequest{Image: srv.URL + "/x/../../../etc/passwd"})
	b := mustFetch(t, c, machine.ImageRequest{Image: srv.URL + "/other%2F..%2Fname.iso"})
	if a.Path != b.Path {
		t.Fatalf("same content stored twice: %s, %s", a.Path, b.Path)
	}
	if filepath.Dir(a.Path) != filepath.Join(c.Dir(), "objects") {
		t.Fatalf("image at %s", a.Path)
	}
	// A reopened cache knows what it has.
	c2 := newCache(t, Config{Dir: c.Dir()})
	mustFetch(t, c2, machine.ImageRequest{Image: srv.URL + "/x/../../../etc/passwd"})
	if got := srv.gets.Load(); got != 2 {
		t.Fatalf("%d downloads, want 2 (the reopened cache revalidates)", got)
	}
}

func TestLocalImagesOnlyInsideTheAllowedDirectory(t *testing.T) {
	allowed := t.TempDir()
	outside := t.TempDir()
	iso := testenv.WriteFile(t, allowed, "a.iso", fakeISO(40<<10, "a"))
	testenv.WriteFile(t, outside, "b.iso", fakeISO(40<<10, "b"))
	os.Symlink(filepath.Join(outside, "b.iso"), filepath.Join(allowed, "link.iso"))
	c := newCache(t, Config{LocalDir: allowed})
	if img := mustFetch(t, c, machine.ImageRequest{Image: "file://" + iso, ISO: true}); img.Path != iso {
		t.Fatalf("local image at %s, want in place %s", img.Path, iso)
	}
	for _, p := range []string{filepath.Join(allowed, "..", filepath.Base(outside), "b.iso"), filepath.Join(allowed, "link.iso")} {
		if _, err := fetch(t, c, machine.ImageRequest{Image: p}); kindOf(err) != machine.MediaForbidden {
			t.Fatalf("%s: %v, want forbidden", p, err)
		}
	}
}
