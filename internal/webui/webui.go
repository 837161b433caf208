package webui

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"net"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/accounts"
	"github.com/bmlab/bmlab/internal/admission"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/redfish"
)

//go:embed assets
var assetFS embed.FS

// XtermVersion is the version of @xterm/xterm vendored under
// assets/vendor/xterm (with @xterm/addon-fit FitVersion), from the npm
// registry; docs/webui.md says how to replace them.
const (
	XtermVersion = "6.0.0"
	FitVersion   = "0.11.0"
)

// NoVNCVersion is the version of @novnc/novnc vendored under
// assets/vendor/novnc (its core/ and the pako it imports, unchanged, with
// their licences), from the npm registry.
const NoVNCVersion = "1.7.0"

// pageMax is the most rows of one /ui/api/systems answer.
const pageMax = 200

// csp is the Content-Security-Policy of every answer of the console: only
// this origin's scripts, styles, images and connections (the websocket is
// the same origin, which 'self' covers in current browsers), no inline
// script, no plugins, no framing. Styles allow 'unsafe-inline' because
// xterm.js sets its renderer's geometry and colours in <style> elements it
// makes at run time; scripts do not.
const csp = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// UI is the web console. Make one with New, run its event watcher with Run,
// and serve Wrap(the Redfish handler) on the Redfish listener.
type UI struct {
	rf     *redfish.Server
	svc    *machine.Service
	log    *zap.Logger
	static *static
	now    func() time.Time

	hub   hub
	taps  taps
	slots slots         // live streams and consoles (slots.go)
	done  chan struct{} // closed by Shutdown
	once  sync.Once

	// beforeEnd, when set (tests), is waited for before a console whose
	// session ended or lost the right is closed, so that a test can type
	// into it meanwhile: what stops that input is the check of every
	// message (input), not the close.
	beforeEnd chan struct{}
}

// New returns the console over svc, authenticating with rf's sessions.
func New(rf *redfish.Server, svc *machine.Service, log *zap.Logger) *UI {
	if log == nil {
		log = zap.NewNop()
	}
	u := &UI{
		rf: rf, svc: svc, log: log, now: time.Now,
		static: newStatic(),
		done:   make(chan struct{}),
	}
	u.hub.init()
	return u
}

// Shutdown ends every live stream and console (http.Server.Shutdown does
// not wait for them: register it with RegisterOnShutdown).
func (u *UI) Shutdown() { u.once.Do(func() { close(u.done) }) }

// Wrap returns the handler of the whole listener: the service's paths
// (under /redfish, and an iLO's /ribcl: redfish.APIPath) go to api
// untouched, the rest to the console.
func (u *UI) Wrap(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if redfish.APIPath(r.URL.Path) {
			api.ServeHTTP(w, r)
			return
		}
		u.ServeHTTP(w, r)
	})
}

// ServeHTTP serves the console's page, assets, API and consoles.
func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	p := r.URL.Path
	switch {
	case p == "/" || p == "/ui" || p == "/ui/":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			methodNotAllowed(w)
			return
		}
		h.Set("Cache-Control", "no-cache")
		u.static.serve(w, r, "index.html")
	case strings.HasPrefix(p, "/ui/assets/"):
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			methodNotAllowed(w)
			return
		}
		h.Set("Cache-Control", "no-cache")
		u.static.serve(w, r, strings.TrimPrefix(p, "/ui/assets/"))
	case strings.HasPrefix(p, "/ui/api/"):
		u.serveAPI(w, r, strings.TrimPrefix(p, "/ui/api/"))
	case strings.HasPrefix(p, "/ui/console/"):
		u.serveConsole(w, r, strings.TrimPrefix(p, "/ui/console/"))
	case strings.HasPrefix(p, "/ui/display/"):
		u.serveDisplay(w, r, strings.TrimPrefix(p, "/ui/display/"))
	default:
		apiError(w, http.StatusNotFound, "no such page")
	}
}

// caller authenticates a console API request: the Redfish session token in
// X-Auth-Token. A cookie is never read, so a cross-site request carries no
// credentials and needs no CSRF token.
func (u *UI) caller(w http.ResponseWriter, r *http.Request) (redfish.Caller, bool) {
	tok := r.Header.Get("X-Auth-Token")
	c, ok := u.rf.SessionCaller(r.Context(), tok)
	if !ok {
		u.refused(r, "no valid session token")
		apiError(w, http.StatusUnauthorized, "no valid session: log in again")
		return c, false
	}
	admission.Authenticated(r)
	return c, true
}

// refused logs a request or console refused for want of a valid session,
// in the Redfish service's rate-limited log of refused logins.
func (u *UI) refused(r *http.Request, why string) {
	host := r.RemoteAddr
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	u.rf.Refusals().Refused(host+" (web console)", "web console refused",
		zap.String("path", r.URL.Path), zap.String("remote", r.RemoteAddr), zap.String("why", why))
}

func (u *UI) serveAPI(w http.ResponseWriter, r *http.Request, rest string) {
	if r.Method != http.MethodGet {
		methodNotAllowed(w)
		return
	}
	c, ok := u.caller(w, r)
	if !ok {
		return
	}
	switch {
	case rest == "whoami":
		_, hasConsole := u.svc.Backend().(ConsoleOpener)
		_, hasDisplay := u.svc.Backend().(machine.DisplayOpener)
		writeJSON(w, whoami{
			User: c.User, Role: string(c.Role),
			Operate: c.Can(accounts.ConfigureComponents), ManageUsers: c.Can(accounts.ConfigureUsers),
			XtermVersion: XtermVersion,
			Console:      hasConsole,
			Display:      hasDisplay,
			NoVNCVersion: NoVNCVersion,
		})
	case rest == "systems":
		u.serveSystems(w, r, c)
	case rest == "live":
		u.serveLive(w, r, c)
	case strings.HasPrefix(rest, "systems/"):
		id, what, _ := strings.Cut(strings.TrimPrefix(rest, "systems/"), "/")
		m, err := u.svc.Get(id)
		if err != nil || !c.CanAccess(m) {
			apiError(w, http.StatusNotFound, "no such system")
			return
		}
		switch what {
		case "":
			writeJSON(w, u.row(m))
		case "events":
			writeJSON(w, u.hub.log(m.ID))
		default:
			apiError(w, http.StatusNotFound, "no such resource")
		}
	default:
		apiError(w, http.StatusNotFound, "no such resource")
	}
}

type whoami struct {
	User         string
	Role         string
	Operate      bool // power, boot, media, BIOS, console
	ManageUsers  bool
	Console      bool // the backend's machines have a serial console
	Display      bool // and a screen (the graphical console)
	XtermVersion string
	NoVNCVersion string
}

// Run keeps the event log and feeds the live views until ctx ends.
func (u *UI) Run(ctx context.Context) {
	ch, cancel := u.svc.Backend().Subscribe()
	go func() {
		defer cancel()
		for {
			select {
			case <-ctx.Done():
				u.Shutdown()
				return
			case ev, ok := <-ch:
				if !ok {
					return
				}
				u.hub.event(ev, u.now())
			}
		}
	}()
}

// static serves the embedded assets, each with an ETag (its SHA-256), so a
// browser revalidates them with a 304 instead of fetching xterm.js again;
// directories are not listed.
// static serves the embedded assets straight from the binary's embedded
// data: only their names and ETags are kept in memory. (Copies of them,
// 1.1 MB, would double the live heap of an idle vbmcd, and with it how
// often the garbage collector runs under load: the Go runtime's smallest
// heap goal is 4 MB.)
type static struct {
	files map[string]asset
}

type asset struct {
	path string // in assetFS
	etag string
}

func newStatic() *static {
	st := &static{files: map[string]asset{}}
	_ = fs.WalkDir(assetFS, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assetFS.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		st.files[strings.TrimPrefix(p, "assets/")] = asset{path: p, etag: `"` + hex.EncodeToString(sum[:16]) + `"`}
		return nil
	})
	return st
}

func (st *static) serve(w http.ResponseWriter, r *http.Request, name string) {
	a, ok := st.files[name]
	if !ok {
		apiError(w, http.StatusNotFound, "no such file")
		return
	}
	f, err := assetFS.Open(a.path)
	if err != nil {
		apiError(w, http.StatusInternalServerError, err.Error())
		return
	}
	defer f.Close()
	rs, ok := f.(io.ReadSeeker) // embed's files seek
	if !ok {
		apiError(w, http.StatusInternalServerError, "embedded file without Seek")
		return
	}
	w.Header().Set("ETag", a.etag)
	http.ServeContent(w, r, path.Base(name), time.Time{}, rs)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}

func apiError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

func methodNotAllowed(w http.ResponseWriter) {
	w.Header().Set("Allow", "GET, HEAD")
	apiError(w, http.StatusMethodNotAllowed, "method not allowed")
}
