package media

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/efiboot"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/netpolicy"
	"github.com/bmlab/bmlab/internal/qemuaccess"
)

// Config configures a Cache.
type Config struct {
	// Dir holds the images. Default /var/lib/bmlab/media. It is made 0750
	// and the images 0640, owned by the group qemu runs with (Group), so
	// that qemu can open them and other users cannot; the index is 0600.
	Dir string
	// Group is the group (name or number) the hypervisor reads images as.
	// Default: libvirt-qemu, else kvm (Debian's qemu runs as user
	// libvirt-qemu, a member of both); when neither exists the images are
	// private to vbmcd (0700/0600).
	Group string
	// MaxBytes bounds the images kept; the least recently used image that no
	// machine holds is evicted to make room. Default 20 GiB.
	MaxBytes int64
	// LocalDir, when set, allows images given as a local path (or file://
	// URI) inside it; they are used in place, not copied. Empty refuses
	// local paths.
	LocalDir string
	// StallTimeout fails a download that receives nothing for this long
	// (default 60 s).
	StallTimeout time.Duration
	// Deadline bounds a whole fetch, however slowly the server keeps
	// sending (default 1 h).
	Deadline time.Duration
	// Policy says which addresses images may come from.
	Policy Policy
	// CAFile is a PEM bundle trusted for HTTPS images, with the system's
	// roots, when the member has no certificates of its own.
	CAFile string
	// InsecureTLS never verifies image servers' certificates, whatever a
	// member's VerifyCertificate says.
	InsecureTLS bool
	Log         *zap.Logger
}

// Cache is a machine.ImageFetcher that downloads images over HTTP(S) into a
// directory, once per content.
type Cache struct {
	cfg     Config
	objects string // content-addressed files: <sha256>.img
	tmp     string
	log     *zap.Logger

	roots *x509.CertPool // system roots and CAFile; nil: the system's
	gid   int            // the images' group; -1: none (private files)

	keyMu sync.Mutex
	keys  map[string]*keyLock // per URL+user: one fetch at a time

	mu       sync.Mutex
	idx      index
	pins     map[string]int // sha256 -> fetches that returned it and are not released
	reserved int64          // bytes promised to downloads in progress
	hits     int64          // fetches answered from the cache (under mu)
	fetched  int64          // images downloaded (under mu)
	probes   int64          // images probed (under mu)
	statfs   func(path string) (free int64, err error)
	nowFunc  func() time.Time
}

// index is the cache's record, kept as index.json in Dir.
type index struct {
	Entries map[string]*entry  `json:"entries"` // by key (URL and user)
	Objects map[string]*object `json:"objects"` // by sha256
}

// entry is what a server said about a URL when it was last fetched.
type entry struct {
	URL          string    `json:"url"`
	ETag         string    `json:"etag,omitempty"`
	LastModified string    `json:"lastModified,omitempty"`
	Length       int64     `json:"length"`
	SHA256       string    `json:"sha256"`
	Fetched      time.Time `json:"fetched"`
}

type object struct {
	Size     int64     `json:"size"`
	LastUsed time.Time `json:"lastUsed"`
}

// New opens (or creates) a cache directory. Leftover partial downloads are
// removed and index entries whose files are gone are dropped.
func New(cfg Config) (*Cache, error) {
	if cfg.Dir == "" {
		cfg.Dir = "/var/lib/bmlab/media"
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 20 << 30
	}
	if cfg.StallTimeout <= 0 {
		cfg.StallTimeout = 60 * time.Second
	}
	if cfg.Deadline <= 0 {
		cfg.Deadline = time.Hour
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.LocalDir != "" {
		d, err := filepath.EvalSymlinks(cfg.LocalDir)
		if err != nil {
			return nil, fmt.Errorf("allowed local image directory: %w", err)
		}
		cfg.LocalDir = d
	}
	c := &Cache{
		cfg: cfg, log: cfg.Log,
		objects: filepath.Join(cfg.Dir, "objects"),
		tmp:     filepath.Join(cfg.Dir, "tmp"),
		pins:    map[string]int{},
		keys:    map[string]*keyLock{},
		statfs:  freeBytes,
		nowFunc: time.Now,
	}
	var err error
	if c.gid, err = lookupGroup(cfg.Group); err != nil {
		return nil, err
	}
	if cfg.CAFile != "" {
		b, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("image servers' CA file: %w", err)
		}
		if c.roots, err = x509.SystemCertPool(); err != nil {
			c.roots = x509.NewCertPool()
		}
		if !c.roots.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("image servers' CA file %s: no PEM certificate in it", cfg.CAFile)
		}
	}
	// Missing parents of the directory are made traversable by qemu's user
	// (0755): made 0700 by a plain MkdirAll, /var/lib/bmlab kept qemu from
	// the images on a fresh machine ("Permission denied" at power-on).
	if _, err := qemuaccess.MkdirTraversable(filepath.Dir(filepath.Clean(cfg.Dir))); err != nil {
		return nil, fmt.Errorf("image cache: %w", err)
	}
	for _, d := range []string{cfg.Dir, c.objects, c.tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("image cache: %w", err)
		}
		if err := c.share(d, true); err != nil {
			return nil, fmt.Errorf("image cache: %w", err)
		}
	}
	if err := c.load(); err != nil {
		return nil, err
	}
	return c, nil
}

// Dir returns the cache's directory.
func (c *Cache) Dir() string { return c.cfg.Dir }

func (c *Cache) indexPath() string { return filepath.Join(c.cfg.Dir, "index.json") }

func (c *Cache) objectPath(sum string) string { return filepath.Join(c.objects, sum+".img") }

func (c *Cache) load() error {
	c.idx = index{Entries: map[string]*entry{}, Objects: map[string]*object{}}
	if names, err := os.ReadDir(c.tmp); err == nil {
		for _, n := range names {
			os.Remove(filepath.Join(c.tmp, n.Name()))
		}
	}
	b, err := os.ReadFile(c.indexPath())
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("image cache index: %w", err)
	default:
		if err := json.Unmarshal(b, &c.idx); err != nil {
			c.log.Warn("image cache index unreadable; starting empty", zap.Error(err))
			c.idx = index{}
		}
	}
	if c.idx.Entries == nil {
		c.idx.Entries = map[string]*entry{}
	}
	if c.idx.Objects == nil {
		c.idx.Objects = map[string]*object{}
	}
	// The directory is the truth: objects without a file are forgotten, files
	// the index does not know are adopted (their name is their hash).
	names, err := os.ReadDir(c.objects)
	if err != nil {
		return fmt.Errorf("image cache: %w", err)
	}
	onDisk := map[string]int64{}
	for _, n := range names {
		sum, ok := strings.CutSuffix(n.Name(), ".img")
		if !ok || !validSum(sum) {
			continue
		}
		if fi, err := n.Info(); err == nil {
			onDisk[sum] = fi.Size()
			// An older version made images world-readable.
			if err := c.share(filepath.Join(c.objects, n.Name()), false); err != nil {
				return fmt.Errorf("image cache: %w", err)
			}
		}
	}
	for sum, o := range c.idx.Objects {
		if size, ok := onDisk[sum]; !ok || size != o.Size {
			delete(c.idx.Objects, sum)
		}
	}
	for sum, size := range onDisk {
		if _, ok := c.idx.Objects[sum]; !ok {
			c.idx.Objects[sum] = &object{Size: size}
		}
	}
	for k, e := range c.idx.Entries {
		if _, ok := c.idx.Objects[e.SHA256]; !ok {
			delete(c.idx.Entries, k)
		}
	}
	return nil
}

func validSum(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// save writes the index atomically; callers hold c.mu.
func (c *Cache) save() {
	b, err := json.MarshalIndent(&c.idx, "", "  ")
	if err == nil {
		tmp := c.indexPath() + ".new"
		os.Remove(tmp) // WriteFile keeps an existing file's mode
		if err = os.WriteFile(tmp, b, 0o600); err == nil {
			err = os.Rename(tmp, c.indexPath())
		}
	}
	if err != nil {
		c.log.Warn("writing the image cache index failed", zap.Error(err))
	}
}

// Stats describe the cache.
type Stats struct {
	Images    int
	Bytes     int64
	Hits      int64 // fetches answered from the cache
	Downloads int64 // images downloaded
	Probes    int64 // images probed instead (Probe)
}

// Stats returns the number and total size of the cached images, and how
// many fetches the cache answered and how many images it downloaded.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Stats{Hits: c.hits, Downloads: c.fetched, Probes: c.probes}
	for _, o := range c.idx.Objects {
		s.Images++
		s.Bytes += o.Size
	}
	return s
}

func fail(kind machine.MediaErrorKind, image string, format string, args ...any) error {
	return &machine.MediaError{Kind: kind, Image: image, Err: fmt.Errorf(format, args...)}
}

// request reads an image request once for Fetch and Probe: the URI without
// its credentials and as logs and errors show it, the credentials
// to fetch it with, and for a local path the image itself (local true).
func (c *Cache) request(req machine.ImageRequest) (shown *url.URL, image, user, pass string, img machine.FetchedImage, local bool, err error) {
	u, err := url.Parse(req.Image)
	if err != nil {
		return nil, "", "", "", img, false, fail(machine.MediaForbidden, req.Image, "not a URI: %v", err)
	}
	s := *u
	s.User = nil
	shown, image = &s, s.String()
	switch u.Scheme {
	case "http", "https":
	case "", "file":
		img, err = c.local(u, image, req)
		return shown, image, "", "", img, true, err
	default:
		return nil, "", "", "", img, false, fail(machine.MediaForbidden, image,
			"transfer protocol %q is not supported; use http, https or an allowed local path", u.Scheme)
	}
	user, pass = req.UserName, req.Password
	if u.User != nil && user == "" {
		user = u.User.Username()
		pass, _ = u.User.Password()
	}
	return shown, image, user, pass, img, false, nil
}

// Fetch implements machine.ImageFetcher.
func (c *Cache) Fetch(ctx context.Context, req machine.ImageRequest) (machine.FetchedImage, func(), error) {
	nop := func() {}
	shown, image, user, pass, img, local, err := c.request(req)
	if err != nil || local {
		return img, nop, err
	}
	key := image + "\x00" + user
	if req.ISO && req.EFIArch != "" {
		// What this key's object is depends on the request: a UEFI
		// application is kept as the ISO that boots it.
		key += "\x00efi-" + req.EFIArch
	}
	defer c.lockKey(key)()
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Deadline)
	defer cancel()

	img, err = c.fetch(ctx, shown, key, user, pass, req)
	if me, ok := machine.IsMediaError(err); ok && req.Source.IsValid() && me.Kind == machine.MediaUnreachable && errors.Is(me.Err, errNoRoute) {
		me.Err = fmt.Errorf("%w from the BMC's address %s: its network does not reach it", me.Err, req.Source)
	}
	if err != nil {
		return machine.FetchedImage{}, nop, err
	}
	var once sync.Once
	return img, func() { once.Do(func() { c.unpin(img.SHA256) }) }, nil
}

// local checks a local image: inside the allowed directory, a regular file,
// an ISO when asked.
func (c *Cache) local(u *url.URL, image string, req machine.ImageRequest) (machine.FetchedImage, error) {
	if c.cfg.LocalDir == "" {
		return machine.FetchedImage{}, fail(machine.MediaForbidden, image,
			"local images are not allowed; the operator may allow a directory (vbmcd --media-local-dir)")
	}
	p := u.Path
	if u.Scheme == "" {
		p = image
	}
	if !filepath.IsAbs(p) {
		return machine.FetchedImage{}, fail(machine.MediaForbidden, image, "a local image needs an absolute path")
	}
	real, err := filepath.EvalSymlinks(filepath.Clean(p))
	if err != nil {
		return machine.FetchedImage{}, fail(machine.MediaNotFound, image, "%v", err)
	}
	rel, err := filepath.Rel(c.cfg.LocalDir, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return machine.FetchedImage{}, fail(machine.MediaForbidden, image, "%s is outside the allowed directory %s", real, c.cfg.LocalDir)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return machine.FetchedImage{}, fail(machine.MediaNotFound, image, "%v", err)
	}
	if !fi.Mode().IsRegular() {
		return machine.FetchedImage{}, fail(machine.MediaForbidden, image, "%s is not a regular file", real)
	}
	if req.MaxBytes > 0 && fi.Size() > req.MaxBytes {
		return machine.FetchedImage{}, fail(machine.MediaTooLarge, image, "the image is %d bytes, more than %d", fi.Size(), req.MaxBytes)
	}
	if err := checkImage(real, req); err != nil {
		return machine.FetchedImage{}, fail(machine.MediaNotImage, image, "%v", err)
	}
	return machine.FetchedImage{Path: real, Size: fi.Size()}, nil
}

// maxRedirects is how many redirects one fetch follows.
const maxRedirects = 5

// client builds the HTTP client for one request's trust settings. Images
// are fetched directly, never through a proxy, as a BMC does; every
// connection's address is checked against the policy; at most maxRedirects
// redirects are followed, each to http or https, and the image server's
// credentials go only to the host and port they were given for.
func (c *Cache) client(req machine.ImageRequest) (*http.Client, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: c.roots}
	if !req.VerifyCertificate || c.cfg.InsecureTLS {
		tc.InsecureSkipVerify = true
	} else if len(req.Certificates) > 0 {
		pool := x509.NewCertPool()
		for i, pem := range req.Certificates {
			if !pool.AppendCertsFromPEM([]byte(pem)) {
				return nil, fmt.Errorf("certificate %d of the member is not PEM", i+1)
			}
		}
		tc.RootCAs = pool
	}
	dialer := c.cfg.Policy.Dialer(10 * time.Second)
	if req.Source.IsValid() {
		// From the BMC's own address: its network's routes decide what
		// it reaches, as a real BMC's do.
		dialer.LocalAddr = &net.TCPAddr{IP: req.Source.AsSlice()}
	}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		TLSClientConfig:       tc,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
		DisableCompression:    true,
		ForceAttemptHTTP2:     true,
	}
	check := func(r *http.Request, via []*http.Request) error {
		if len(via) > maxRedirects {
			return errTooManyRedirects
		}
		if r.URL.Scheme != "http" && r.URL.Scheme != "https" {
			return errRedirectScheme
		}
		if hostPort(r.URL) != hostPort(via[0].URL) {
			r.Header.Del("Authorization")
		}
		return nil
	}
	return &http.Client{Transport: tr, CheckRedirect: check}, nil
}

var (
	errTooManyRedirects = fmt.Errorf("more than %d redirects", maxRedirects)
	errRedirectScheme   = errors.New("a redirect to a scheme other than http or https")
)

// hostPort is a URL's host and port, the port made explicit.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// Revalidation. A cached copy is reused only when the server proves it
// holds the same bytes, as a real BMC that fetches the image on every
// insert would get them:
//   - a strong ETag, sent back in If-None-Match (a 304, or a 200 that
//     carries the same ETag and length);
//   - without one, a HEAD (or a 200) whose Last-Modified and Content-Length
//     are exactly those of the cached copy.
// If-Modified-Since is never sent: servers answer 304 whenever the file is
// not newer, and a file replaced at the same URL can carry an older time
// (Ironic links images from its own cache into its HTTP root).

// strong reports whether the entry has a strong ETag.
func (e *entry) strong() bool { return e.ETag != "" && !strings.HasPrefix(e.ETag, "W/") }

// datable reports whether the entry's Last-Modified may stand for its
// bytes. A Last-Modified within a second of the fetch may hide a change
// made in the same second (the header has one-second resolution), so such
// an entry is never reused on its date.
func (e *entry) datable() bool {
	if e.LastModified == "" {
		return false
	}
	lm, err := http.ParseTime(e.LastModified)
	return err == nil && e.Fetched.Sub(lm) >= 2*time.Second
}

// same reports whether a fresh 200 (or HEAD) response describes the cached
// bytes.
func (e *entry) same(h http.Header, length int64) bool {
	if e.strong() {
		return h.Get("ETag") == e.ETag && (length < 0 || length == e.Length)
	}
	return e.datable() && length == e.Length && h.Get("Last-Modified") == e.LastModified
}

// unchanged asks the server with HEAD whether a cached entry without a
// strong ETag still describes the image: exact Last-Modified and length.
// Any failure or doubt is "no": the image is then fetched.
func (c *Cache) unchanged(ctx context.Context, hc *http.Client, u *url.URL, user, pass string, e *entry) bool {
	hr, err := http.NewRequestWithContext(ctx, http.MethodHead, u.String(), nil)
	if err != nil {
		return false
	}
	hr.Header.Set("User-Agent", "bmlab-vbmcd")
	if user != "" {
		hr.SetBasicAuth(user, pass)
	}
	resp, err := hc.Do(hr)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK && e.same(resp.Header, resp.ContentLength)
}

func (c *Cache) fetch(ctx context.Context, u *url.URL, key, user, pass string, req machine.ImageRequest) (machine.FetchedImage, error) {
	image := u.String()
	hc, err := c.client(req)
	if err != nil {
		return machine.FetchedImage{}, fail(machine.MediaTLS, image, "%v", err)
	}
	defer hc.CloseIdleConnections()

	c.mu.Lock()
	cached := c.idx.Entries[key]
	if cached != nil {
		cp := *cached
		cached = &cp
		c.pins[cached.SHA256]++ // keep it while we ask the server
	}
	c.mu.Unlock()
	unpinCached := func() {
		if cached != nil {
			c.unpin(cached.SHA256)
		}
	}

	// A stall watchdog: the request fails when nothing arrives for a while.
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stall := time.AfterFunc(c.cfg.StallTimeout, func() { cancel(errStalled) })
	defer stall.Stop()

	hr, err := http.NewRequestWithContext(rctx, http.MethodGet, u.String(), nil)
	if err != nil {
		unpinCached()
		return machine.FetchedImage{}, fail(machine.MediaForbidden, image, "%v", err)
	}
	hr.Header.Set("User-Agent", "bmlab-vbmcd")
	if user != "" {
		hr.SetBasicAuth(user, pass)
	}
	conditional := cached != nil && cached.strong()
	if conditional {
		hr.Header.Set("If-None-Match", cached.ETag)
	} else if cached != nil && cached.datable() && c.unchanged(rctx, hc, u, user, pass, cached) {
		if img, ok := c.hit(cached); ok {
			c.log.Debug("image cache hit", zap.String("image", image), zap.String("by", "HEAD"))
			return img, nil // stays pinned for the caller
		}
	}
	resp, err := hc.Do(hr)
	if err != nil {
		unpinCached()
		return machine.FetchedImage{}, c.classify(image, err, context.Cause(rctx))
	}
	defer resp.Body.Close()
	stall.Reset(c.cfg.StallTimeout)

	if cached != nil && ((conditional && resp.StatusCode == http.StatusNotModified) ||
		(resp.StatusCode == http.StatusOK && cached.same(resp.Header, resp.ContentLength))) {
		if img, ok := c.hit(cached); ok {
			c.log.Debug("image cache hit", zap.String("image", image), zap.Int("status", resp.StatusCode))
			return img, nil // stays pinned for the caller
		}
		unpinCached()
		if resp.StatusCode == http.StatusNotModified {
			// The file went away: ask again without validators.
			resp.Body.Close()
			c.mu.Lock()
			delete(c.idx.Entries, key)
			c.mu.Unlock()
			return c.fetch(ctx, u, key, user, pass, req)
		}
	} else {
		unpinCached()
	}
	switch {
	case resp.StatusCode == http.StatusOK:
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return machine.FetchedImage{}, fail(machine.MediaNotFound, image, "the server answered %s", resp.Status)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return machine.FetchedImage{}, fail(machine.MediaAuth, image, "the server answered %s", resp.Status)
	default:
		return machine.FetchedImage{}, fail(machine.MediaFailed, image, "the server answered %s", resp.Status)
	}
	return c.download(rctx, stall, resp, image, key, req)
}

var errStalled = errors.New("no data received")

// errNoRoute is a fetch the BMC's network does not route.
var errNoRoute = errors.New("no route to the image server")

// hit returns a cached object after checking its file; it stays pinned.
func (c *Cache) hit(e *entry) (machine.FetchedImage, bool) {
	p := c.objectPath(e.SHA256)
	fi, err := os.Stat(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	o := c.idx.Objects[e.SHA256]
	if err != nil || o == nil || fi.Size() != o.Size {
		delete(c.idx.Objects, e.SHA256)
		return machine.FetchedImage{}, false
	}
	o.LastUsed = c.nowFunc()
	c.hits++
	c.save()
	return machine.FetchedImage{Path: p, Size: o.Size, SHA256: e.SHA256}, true
}

func (c *Cache) unpin(sum string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pins[sum] <= 1 {
		delete(c.pins, sum)
		return
	}
	c.pins[sum]--
}

// classify turns a transport error into a MediaError that says which kind,
// in words that do not tell a closed port from a filtered one or from one
// that speaks something else (the details go to the operator's log).
func (c *Cache) classify(image string, err, cause error) error {
	var (
		certErr *tls.CertificateVerificationError
		unknown x509.UnknownAuthorityError
		hostErr x509.HostnameError
		invalid x509.CertificateInvalidError
		dnsErr  *net.DNSError
	)
	c.log.Info("image fetch failed", zap.String("image", image), zap.Error(err))
	switch {
	case errors.Is(cause, errStalled):
		return fail(machine.MediaFailed, image, "the transfer stalled")
	case errors.Is(err, netpolicy.ErrDenied):
		return &machine.MediaError{Kind: machine.MediaDenied, Image: image, Err: refusal(err)}
	case errors.Is(err, errTooManyRedirects):
		return fail(machine.MediaForbidden, image, "the image server sent %v", errTooManyRedirects)
	case errors.Is(err, errRedirectScheme):
		return fail(machine.MediaForbidden, image, "the image server sent %v", errRedirectScheme)
	case errors.As(err, &certErr), errors.As(err, &unknown), errors.As(err, &hostErr), errors.As(err, &invalid):
		return fail(machine.MediaTLS, image, "the image server's TLS certificate is not trusted (VerifyCertificate is on)")
	case errors.As(err, &dnsErr):
		return fail(machine.MediaUnreachable, image, "cannot resolve the image server's name")
	case errors.Is(cause, context.DeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		return fail(machine.MediaUnreachable, image, "the image server did not answer in time")
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH):
		// The BMC's own network has no route there: said, as a BMC's
		// own error would say it (a refused or filtered port is not).
		return &machine.MediaError{Kind: machine.MediaUnreachable, Image: image, Err: errNoRoute}
	}
	return fail(machine.MediaUnreachable, image, "cannot connect to the image server")
}

// progressReader counts bytes, reports them, and feeds the stall watchdog.
type progressReader struct {
	r     io.Reader
	n     int64
	total int64
	fn    func(done, total int64)
	stall *time.Timer
	d     time.Duration
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.n += int64(n)
		p.stall.Reset(p.d)
		if p.fn != nil {
			p.fn(p.n, p.total)
		}
	}
	return n, err
}

// download stores a response body as a new object, checked and hashed.
// Room is reserved under the cache's bound before the first byte is
// written (the whole length when the server says it, else a step at a
// time as the body grows), so concurrent downloads and downloads of
// unknown length stay within the bound together.
func (c *Cache) download(ctx context.Context, stall *time.Timer, resp *http.Response, image, key string, req machine.ImageRequest) (machine.FetchedImage, error) {
	length := resp.ContentLength
	if req.MaxBytes > 0 && length > req.MaxBytes {
		return machine.FetchedImage{}, fail(machine.MediaTooLarge, image, "the image is %d bytes, more than %d", length, req.MaxBytes)
	}
	if length > c.cfg.MaxBytes {
		return machine.FetchedImage{}, fail(machine.MediaNoSpace, image,
			"the image is %d bytes, more than the cache may hold (%d bytes)", length, c.cfg.MaxBytes)
	}
	limit := c.cfg.MaxBytes
	if req.MaxBytes > 0 {
		limit = min(limit, req.MaxBytes)
	}
	res := &reservation{c: c, inUse: req.InUse}
	defer res.release()
	first := length
	if first < 0 {
		first = min(growStep, c.cfg.MaxBytes)
	}
	if err := res.grow(first); err != nil {
		// An image of unknown length may still fit in less than a step:
		// it then takes room exactly as it is written (boundedWriter).
		if length >= 0 || res.grow(0) != nil {
			return machine.FetchedImage{}, &machine.MediaError{Kind: machine.MediaNoSpace, Image: image, Err: err}
		}
	}
	f, err := os.CreateTemp(c.tmp, "dl-*")
	if err != nil {
		return machine.FetchedImage{}, fail(machine.MediaFailed, image, "create a file in the cache: %v", err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	h := sha256.New()
	pr := &progressReader{r: resp.Body, total: length, fn: req.Progress, stall: stall, d: c.cfg.StallTimeout}
	if req.Progress != nil {
		req.Progress(0, length)
	}
	// One byte over the bound tells an oversized image of unknown length.
	n, err := io.Copy(io.MultiWriter(&boundedWriter{w: f, res: res}, h), io.LimitReader(pr, limit+1))
	var roomErr *noRoomError
	switch {
	case errors.As(err, &roomErr):
		return machine.FetchedImage{}, &machine.MediaError{Kind: machine.MediaNoSpace, Image: image, Err: fmt.Errorf("after %d bytes: %w", n, roomErr.err)}
	case err != nil && errors.Is(err, syscall.ENOSPC):
		return machine.FetchedImage{}, fail(machine.MediaNoSpace, image, "disk full in %s after %d bytes", c.cfg.Dir, n)
	case err != nil && errors.Is(context.Cause(ctx), errStalled):
		return machine.FetchedImage{}, fail(machine.MediaFailed, image, "the transfer stalled after %d bytes", n)
	case err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return machine.FetchedImage{}, fail(machine.MediaFailed, image, "the transfer took longer than %v and was stopped after %d bytes", c.cfg.Deadline, n)
	case err != nil && ctx.Err() != nil:
		return machine.FetchedImage{}, fail(machine.MediaFailed, image, "the transfer was cancelled after %d bytes", n)
	case err != nil:
		return machine.FetchedImage{}, fail(machine.MediaFailed, image, "the transfer was interrupted after %d of %s bytes", n, lengthText(length))
	case n > limit && limit < c.cfg.MaxBytes:
		return machine.FetchedImage{}, fail(machine.MediaTooLarge, image, "the image is larger than %d bytes", limit)
	case n > c.cfg.MaxBytes:
		return machine.FetchedImage{}, fail(machine.MediaNoSpace, image, "the image is larger than the cache may hold (%d bytes)", c.cfg.MaxBytes)
	case length >= 0 && n != length:
		return machine.FetchedImage{}, fail(machine.MediaFailed, image, "the transfer was interrupted after %d of %d bytes", n, length)
	}
	if err := f.Close(); err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			return machine.FetchedImage{}, fail(machine.MediaNoSpace, image, "disk full in %s", c.cfg.Dir)
		}
		return machine.FetchedImage{}, fail(machine.MediaFailed, image, "write the image: %v", err)
	}
	sum, size := hex.EncodeToString(h.Sum(nil)), n
	if req.ISO && req.EFIArch != "" && checkISO(tmp) != nil {
		// A UEFI application: the object is the ISO that boots it.
		wrapped, wsum, wsize, err := c.wrapEFI(tmp, n, image, req.EFIArch, res)
		if err != nil {
			return machine.FetchedImage{}, err
		}
		os.Remove(tmp)
		tmp, sum, size = wrapped, wsum, wsize
	}
	if err := checkImage(tmp, req); err != nil {
		return machine.FetchedImage{}, fail(machine.MediaNotImage, image, "%v", err)
	}
	if err := c.share(tmp, false); err != nil {
		return machine.FetchedImage{}, fail(machine.MediaFailed, image, "%v", err)
	}
	dst := c.objectPath(sum)

	c.mu.Lock()
	defer c.mu.Unlock()
	if _, have := c.idx.Objects[sum]; have {
		if fi, err := os.Stat(dst); err == nil && fi.Size() == size {
			os.Remove(tmp) // same content under another URL or validators: one copy
		} else if err := os.Rename(tmp, dst); err != nil {
			return machine.FetchedImage{}, fail(machine.MediaFailed, image, "%v", err)
		}
	} else if err := os.Rename(tmp, dst); err != nil {
		return machine.FetchedImage{}, fail(machine.MediaFailed, image, "%v", err)
	}
	ok = true
	now := c.nowFunc()
	// The reservation becomes the object in one step under the lock.
	c.reserved -= res.n
	res.n = 0
	c.idx.Objects[sum] = &object{Size: size, LastUsed: now}
	c.idx.Entries[key] = &entry{
		URL: image, ETag: resp.Header.Get("ETag"), LastModified: resp.Header.Get("Last-Modified"),
		Length: n, SHA256: sum, Fetched: now,
	}
	c.pins[sum]++
	c.fetched++
	c.save()
	c.log.Info("image downloaded", zap.String("image", image), zap.Int64("bytes", n), zap.String("sha256", sum))
	return machine.FetchedImage{Path: dst, Size: size, SHA256: sum}, nil
}

// wrapEFI makes the downloaded file at path (n bytes) a bootable ISO when
// it is a UEFI application for arch (efiboot.WriteISO), in a new file of
// the cache's tmp directory under the download's reservation. It returns
// the new file, its SHA-256 and size. Errors are *machine.MediaError.
func (c *Cache) wrapEFI(path string, n int64, image, arch string, res *reservation) (string, string, int64, error) {
	in, err := os.Open(path)
	if err != nil {
		return "", "", 0, &machine.MediaError{Kind: machine.MediaFailed, Image: image, Err: err}
	}
	defer in.Close()
	if err := efiboot.CheckApp(in, n, arch); err != nil {
		return "", "", 0, &machine.MediaError{Kind: machine.MediaNotImage, Image: image, Err: fmt.Errorf("not an ISO 9660 image (no volume descriptor at byte 32769), and %w", err)}
	}
	if n > efiboot.MaxApp {
		return "", "", 0, &machine.MediaError{Kind: machine.MediaTooLarge, Image: image, Err: fmt.Errorf("a UEFI application of %d bytes, more than the %d this BMC boots", n, efiboot.MaxApp)}
	}
	want, err := efiboot.ISOSize(n, arch)
	if err != nil {
		return "", "", 0, &machine.MediaError{Kind: machine.MediaTooLarge, Image: image, Err: err}
	}
	if err := res.grow(want); err != nil {
		return "", "", 0, &machine.MediaError{Kind: machine.MediaNoSpace, Image: image, Err: fmt.Errorf("no room for the bootable image of the UEFI application: %w", err)}
	}
	out, err := os.CreateTemp(c.tmp, "efi-*")
	if err != nil {
		return "", "", 0, &machine.MediaError{Kind: machine.MediaFailed, Image: image, Err: fmt.Errorf("create a file in the cache: %w", err)}
	}
	h := sha256.New()
	werr := efiboot.WriteISO(io.MultiWriter(out, h), in, n, arch)
	if cerr := out.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(out.Name())
		kind := machine.MediaFailed
		if errors.Is(werr, syscall.ENOSPC) {
			kind = machine.MediaNoSpace
		}
		return "", "", 0, &machine.MediaError{Kind: kind, Image: image, Err: fmt.Errorf("make the bootable image of the UEFI application: %w", werr)}
	}
	return out.Name(), hex.EncodeToString(h.Sum(nil)), want, nil
}

func lengthText(n int64) string {
	if n < 0 {
		return "unknown"
	}
	return fmt.Sprint(n)
}

// diskHeadroom is what a download leaves free on the cache's file system,
// for qemu, libvirt and the rest of the host.
const diskHeadroom = 64 << 20

// growStep is how much room a download of unknown length takes at a time.
const growStep = 64 << 20

// reservation is the room one download holds under the cache's bound.
type reservation struct {
	c     *Cache
	n     int64
	inUse func() []string
}

// grow reserves more bytes, evicting images nobody holds if need be.
func (r *reservation) grow(more int64) error {
	c := r.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.makeRoomLocked(more, r.inUse); err != nil {
		return err
	}
	c.reserved += more
	r.n += more
	return nil
}

func (r *reservation) release() {
	r.c.mu.Lock()
	r.c.reserved -= r.n
	r.n = 0
	r.c.mu.Unlock()
}

// noRoomError is a download that outgrew the room it could reserve.
type noRoomError struct{ err error }

func (e *noRoomError) Error() string { return e.err.Error() }

// boundedWriter writes no byte the reservation does not cover, growing it
// as the body grows.
type boundedWriter struct {
	w   io.Writer
	res *reservation
	n   int64
}

func (b *boundedWriter) Write(p []byte) (int, error) {
	if over := b.n + int64(len(p)) - b.res.n; over > 0 {
		// A step at a time; the exact need when a step no longer fits.
		if err := b.res.grow(max(over, growStep)); err != nil {
			if err := b.res.grow(over); err != nil {
				return 0, &noRoomError{err}
			}
		}
	}
	n, err := b.w.Write(p)
	b.n += int64(n)
	return n, err
}

// makeRoomLocked evicts least recently used images that nobody holds until
// need more bytes fit under the bound next to the objects and the other
// downloads' reservations, and checks the disk has them. Which images are
// held is asked now, under the cache's lock: an image a machine attached
// since the download started is held. Callers hold c.mu.
func (c *Cache) makeRoomLocked(need int64, inUse func() []string) error {
	var total int64
	for _, o := range c.idx.Objects {
		total += o.Size
	}
	if total+c.reserved+need > c.cfg.MaxBytes {
		total = c.evictLocked(total, c.cfg.MaxBytes-c.reserved-need, inUse)
		c.save()
		if total+c.reserved+need > c.cfg.MaxBytes {
			return fmt.Errorf("the cache's bound (%d bytes) cannot fit %d more bytes: %d bytes are images that machines hold and %d are promised to downloads in progress", c.cfg.MaxBytes, need, total, c.reserved)
		}
	}
	free, err := c.statfs(c.cfg.Dir)
	if err == nil && free < need+diskHeadroom {
		return fmt.Errorf("disk full: %s has %d bytes free; the image needs %d more, and %d are left free for the rest of the host (free space there, or choose another --media-dir)", c.cfg.Dir, free, need, diskHeadroom)
	}
	return nil
}

// evictLocked removes unused objects, oldest use first, until total is at
// most limit; it returns the new total. Callers hold c.mu.
func (c *Cache) evictLocked(total, limit int64, inUse func() []string) int64 {
	held := map[string]bool{}
	if inUse != nil {
		for _, p := range inUse() {
			held[filepath.Clean(p)] = true
		}
	}
	type cand struct {
		sum string
		o   *object
	}
	var cs []cand
	for sum, o := range c.idx.Objects {
		if c.pins[sum] > 0 || held[c.objectPath(sum)] {
			continue
		}
		cs = append(cs, cand{sum, o})
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].o.LastUsed.Before(cs[j].o.LastUsed) })
	for _, x := range cs {
		if total <= limit {
			break
		}
		if err := os.Remove(c.objectPath(x.sum)); err != nil && !errors.Is(err, os.ErrNotExist) {
			c.log.Warn("evicting an image failed", zap.String("sha256", x.sum), zap.Error(err))
			continue
		}
		total -= x.o.Size
		delete(c.idx.Objects, x.sum)
		for k, e := range c.idx.Entries {
			if e.SHA256 == x.sum {
				delete(c.idx.Entries, k)
			}
		}
		c.log.Info("image evicted", zap.String("sha256", x.sum), zap.Int64("bytes", x.o.Size))
	}
	return total
}

func freeBytes(path string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// checkImage checks that a file is an image a drive can hold: an ISO 9660
// or UDF image for the CD; for the removable member that, or a disk or
// floppy image with a boot sector signature (55 AA at byte 510: an MBR, a
// GPT's protective MBR, a FAT volume). Anything else (an HTML page, a
// service's answer) never reaches the machine. A raw request (a firmware
// image) takes any content: its user checks it.
func checkImage(path string, req machine.ImageRequest) error {
	if req.Raw {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return checkImageAt(f, req)
}

// checkImageAt is checkImage on an image's first bytes (or all of them).
func checkImageAt(r io.ReaderAt, req machine.ImageRequest) error {
	if req.Raw {
		return nil
	}
	errISO := checkISOAt(r)
	if req.ISO || errISO == nil {
		return errISO
	}
	b := make([]byte, 2)
	if _, err := r.ReadAt(b, 510); err == nil && b[0] == 0x55 && b[1] == 0xaa {
		return nil
	}
	return fmt.Errorf("not a disk image: neither an ISO 9660 volume descriptor at byte 32769 nor a boot sector signature (55 AA) at byte 510")
}

// checkISO looks for an ISO 9660 or UDF volume descriptor at sector 16
// (ECMA-119 §6.2.1, ECMA-167 2/9.1): "CD001" or "BEA01" at byte 32769.
func checkISO(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return checkISOAt(f)
}

func checkISOAt(r io.ReaderAt) error {
	b := make([]byte, 5)
	if _, err := r.ReadAt(b, 32769); err != nil {
		return fmt.Errorf("not an ISO 9660 image: too short (%v)", err)
	}
	if !bytes.Equal(b, []byte("CD001")) && !bytes.Equal(b, []byte("BEA01")) {
		return fmt.Errorf("not an ISO 9660 image: no volume descriptor (CD001) at byte 32769")
	}
	return nil
}

// keyLock serialises fetches of one URL and user; it is dropped when no
// fetch needs it, so the map holds only keys being fetched.
type keyLock struct {
	mu sync.Mutex
	n  int // fetches holding or waiting for mu
}

// lockKey takes the lock of key and returns its release.
func (c *Cache) lockKey(key string) func() {
	c.keyMu.Lock()
	l := c.keys[key]
	if l == nil {
		l = &keyLock{}
		c.keys[key] = l
	}
	l.n++
	c.keyMu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		c.keyMu.Lock()
		if l.n--; l.n == 0 {
			delete(c.keys, key)
		}
		c.keyMu.Unlock()
	}
}

// lookupGroup resolves Config.Group; -1 when it is empty and neither
// libvirt-qemu nor kvm exists.
func lookupGroup(name string) (int, error) {
	if name == "" {
		for _, n := range []string{"libvirt-qemu", "kvm"} {
			if g, err := user.LookupGroup(n); err == nil {
				return strconv.Atoi(g.Gid)
			}
		}
		return -1, nil
	}
	if id, err := strconv.Atoi(name); err == nil {
		return id, nil
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, fmt.Errorf("image cache group %q: %w (give the group qemu runs with, e.g. libvirt-qemu)", name, err)
	}
	return strconv.Atoi(g.Gid)
}

// share gives a cache directory or image the group qemu reads with and no
// access to others: 0750 and 0640, or 0700 and 0600 without a group.
func (c *Cache) share(path string, dir bool) error {
	mode := os.FileMode(0o600)
	if c.gid >= 0 {
		mode = 0o640
		if err := os.Chown(path, -1, c.gid); err != nil {
			return fmt.Errorf("give %s to group %d (qemu's): %w", path, c.gid, err)
		}
	}
	if dir {
		mode |= 0o100 | (mode&0o040)>>2
	}
	return os.Chmod(path, mode)
}
