package kubevirt

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// ImageServer serves the images vbmcd fetched into its cache to CDI's
// importer: a DataVolume's http source points here, so the cluster never
// needs to reach the URL a client gave, nor its credentials, and vbmcd's
// address policy, certificate checks and size bound apply as on libvirt.
// Each image is served at an unguessable path for as long as it is
// registered, and only GET and HEAD are answered.
type ImageServer struct {
	base string // URL the cluster reaches this server at, without a trailing slash

	mu      sync.Mutex
	byToken map[string]string  // token → local file
	byPath  map[string]*served // local file → its token and users
}

type served struct {
	token string
	users int // Serve calls not yet matched by Stop
}

// NewImageServer returns a server whose images are reached at base
// (http://host:port as the cluster's importer pods see it).
func NewImageServer(base string) *ImageServer {
	return &ImageServer{base: strings.TrimSuffix(base, "/"), byToken: map[string]string{}, byPath: map[string]*served{}}
}

// Serve registers a local file and returns its URL. Two machines
// inserting the same cached image share the URL; each Serve is undone by
// one Stop.
func (s *ImageServer) Serve(path string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	sv, ok := s.byPath[path]
	if !ok {
		var b [16]byte
		_, _ = rand.Read(b[:])
		sv = &served{token: hex.EncodeToString(b[:])}
		s.byPath[path], s.byToken[sv.token] = sv, path
	}
	sv.users++
	return s.base + "/" + sv.token + "/" + filepath.Base(path)
}

// Stop undoes one Serve of a local file; the last one stops serving it.
func (s *ImageServer) Stop(path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sv, ok := s.byPath[path]; ok {
		if sv.users--; sv.users <= 0 {
			delete(s.byPath, path)
			delete(s.byToken, sv.token)
		}
	}
}

// ServeHTTP answers GET and HEAD of /<token>/<name> with the file (ranges
// included, which CDI's importer may ask for); anything else is 404 or 405.
func (s *ImageServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	tok, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	s.mu.Lock()
	path, ok := s.byToken[tok]
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	f, err := os.Open(path)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, "", fi.ModTime(), f)
}
