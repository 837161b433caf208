package redfish

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/accounts"
	"github.com/bmlab/bmlab/internal/admission"
	"github.com/bmlab/bmlab/internal/lograte"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/metrics"
	"github.com/bmlab/bmlab/internal/personality"
)

// Server is the Redfish service over a machine.Service. It is safe for
// concurrent use; make one with New and serve Handler.
type Server struct {
	svc *machine.Service
	log *zap.Logger
	id  identity
	now func() time.Time
	// epoch is what the request timings of the log and the metrics count
	// from (ServeHTTP).
	epoch time.Time

	admin       *principal         // the service-wide user; nil when none is set
	htpasswd    *accounts.Htpasswd // users of --htpasswd-file; nil: none
	adminUser   [32]byte           // SHA-256 of the service user name and password
	adminPass   [32]byte
	ttl         time.Duration
	maxSessions int
	maxPerUser  int           // live sessions one principal may hold
	insertWait  time.Duration // how long InsertMedia waits before answering 202

	accounts *accounts.Store    // nil: no stored accounts
	throttle *accounts.Throttle // nil: failed logins are not slowed
	metrics  *metrics.Registry  // nil: nothing counted

	cache    renderCache
	views    idViews // vendor ids at a BMC of its own (vendorids.go)
	basic    basicCache
	sessions sessionStore
	routes   []*route
	events   *events
	refusals *lograte.Log

	// persona and quirks are the personality and quirk switches of
	// machines that name none (persona.go).
	persona *personality.Personality
	quirks  map[personality.Quirk]bool

	quirkTimes  QuirkTimes
	quirkStates sync.Map // machine id → *quirkState (quirks.go)

	dell        dellJobs     // Dell's configuration jobs (oem_dell.go)
	screenshots screenLimits // screenshots a second, per machine (screen.go)

	// Where the BMC NICs' addresses come from (bmcnic.go).
	nicService string
	nicHost    machine.HostNet
}

// Option configures a Server.
type Option func(*Server)

// WithCredentials sets the service-wide user, which may reach every system.
// Without it only machines' own credentials (machine.Settings.Credentials)
// authenticate, each for its own system.
func WithCredentials(user, pass string) Option {
	return func(s *Server) {
		s.admin = &principal{all: true, user: user, priv: accounts.AllPrivileges, role: accounts.Administrator, id: "bootstrap/" + user}
		s.adminUser, s.adminPass = sum(user), sum(pass)
	}
}

// WithHtpasswd adds the users of an htpasswd file of bcrypt entries (vbmcd
// --htpasswd-file, sushy-tools' SUSHY_EMULATOR_AUTH_FILE): each is a
// service-wide Administrator, as the bootstrap user is.
func WithHtpasswd(h *accounts.Htpasswd) Option { return func(s *Server) { s.htpasswd = h } }

// WithAccounts serves the accounts of st (AccountService Accounts, which
// the IPMI face shares); without it only the bootstrap user and machines'
// own credentials exist.
func WithAccounts(st *accounts.Store) Option { return func(s *Server) { s.accounts = st } }

// WithThrottle slows failed logins per source (shared with the IPMI face
// when vbmcd passes both the same throttle).
func WithThrottle(t *accounts.Throttle) Option { return func(s *Server) { s.throttle = t } }

// WithMetrics counts requests by route, method and status, with latencies.
func WithMetrics(m *metrics.Registry) Option {
	return func(s *Server) {
		s.metrics = m
		m.Gauge("vbmcd_redfish_sessions", "Redfish sessions open.", func() float64 { return float64(s.sessions.count()) })
		m.Gauge("vbmcd_redfish_render_cache_bytes", "Bytes of rendered Redfish bodies kept for reuse (bounded).",
			func() float64 { _, b := s.cache.size(); return float64(b) })
	}
}

// WithSessionTimeout sets how long an idle session lives (default 30 min).
func WithSessionTimeout(d time.Duration) Option {
	return func(s *Server) {
		if d > 0 {
			s.ttl = d
		}
	}
}

// WithServiceUUID sets the service root's UUID, which Managers show as
// ServiceEntryPointUUID. Keep it stable across restarts (vbmcd keeps it in
// its state directory); the default is derived from the host name.
func WithServiceUUID(uuid string) Option {
	return func(s *Server) {
		if uuid != "" {
			s.id.ServiceUUID = strings.ToLower(uuid)
		}
	}
}

// WithVendor sets the Manufacturer and Model systems report.
func WithVendor(manufacturer, model string) Option {
	return func(s *Server) {
		if manufacturer != "" {
			s.id.Manufacturer = manufacturer
		}
		if model != "" {
			s.id.Model = model
		}
	}
}

// WithFirmwareVersion sets the BIOS and BMC firmware version shown.
func WithFirmwareVersion(v string) Option {
	return func(s *Server) {
		if v != "" {
			s.id.Firmware = v
		}
	}
}

// WithGraphicalConsole says in each Manager's GraphicalConsole that the
// web console serves the machine's screen (KVM over IP), to at most max
// sessions at once; without it the Manager says it has none.
func WithGraphicalConsole(max int) Option { return func(s *Server) { s.id.KVM = max } }

// WithMaxSessions caps the number of live sessions (default 1024).
func WithMaxSessions(n int) Option {
	return func(s *Server) {
		if n > 0 {
			s.maxSessions = n
		}
	}
}

// WithMaxUserSessions caps the live sessions of one user (default 64), so
// that no user can take every session (WithMaxSessions) from the others.
func WithMaxUserSessions(n int) Option {
	return func(s *Server) {
		if n > 0 {
			s.maxPerUser = n
		}
	}
}

// WithClock replaces time.Now, for tests of session expiry.
func WithClock(now func() time.Time) Option { return func(s *Server) { s.now = now } }

// New returns a Server over svc. log may be nil.
func New(svc *machine.Service, log *zap.Logger, opts ...Option) *Server {
	if log == nil {
		log = zap.NewNop()
	}
	host, _ := os.Hostname()
	s := &Server{
		svc:   svc,
		log:   log,
		now:   time.Now,
		epoch: time.Now(),
		id: identity{
			ServiceUUID:  nameUUID("service/" + host),
			Manufacturer: "bmlab",
			Model:        "bmlab virtual server",
			Firmware:     "1.0.0",
		},
		ttl:         30 * time.Minute,
		maxSessions: 1024,
		maxPerUser:  64,
		insertWait:  time.Second,
		events:      newEvents(log.Named("events")),
		persona:     personality.Default(),
		quirkTimes:  DefaultQuirkTimes,
		screenshots: screenLimits{rate: DefaultScreenshotRate, burst: DefaultScreenshotBurst},
	}
	s.id.Screen = svc.HasScreen()
	for _, o := range opts {
		o(s)
	}
	s.events.stamp = s.eventTime
	// Each refused login is a line until 20 came within 10 s; then a line
	// per 10 s counts them by source and user.
	s.refusals = lograte.New(s.log, "logins refused (more than the log shows one by one)", 20, 10*time.Second)
	s.id.SessionTTL = int(s.ttl / time.Second)
	s.cache.init(defaultRenderCacheBytes)
	s.basic.init()
	s.sessions.byToken = map[string]*session{}
	s.sessions.byID = map[string]*session{}
	s.routes = s.table()
	return s
}

// Handler returns the HTTP handler of the service (every path under
// /redfish).
func (s *Server) Handler() http.Handler { return s }

type bmcKey struct{}

// AtBMC marks ctx (an http.Server's ConnContext) as a connection to system
// id's own BMC, as a real server's BMC has an address of its own. Requests
// under it see that system only: /redfish/v1/Systems lists it alone (and so
// the Managers and Chassis), other systems are not found, any credentials
// that reach it work and others do not (401), and its sessions, accounts,
// event subscriptions, tasks and firmware inventory are that BMC's. An
// UpdateService.SimpleUpdate without Targets updates it, whoever calls.
func AtBMC(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, bmcKey{}, id)
}

func bmcOf(ctx context.Context) string {
	id, _ := ctx.Value(bmcKey{}).(string)
	return id
}

// Common header values, shared read-only by every response.
var (
	hdrJSON      = []string{"application/json; charset=utf-8"}
	hdrXML       = []string{"application/xml; charset=utf-8"}
	hdrOData     = []string{"4.0"}
	hdrNoStore   = []string{"no-store"}
	hdrNosniff   = []string{"nosniff"}
	hdrChallenge = `Basic realm="bmlab Redfish", charset="UTF-8"`
)

// ServeHTTP implements http.Handler. It is the edge where requests are
// logged: at debug level each request, at info level each change, at error
// level each failure of the service itself.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ce := s.log.Check(zap.DebugLevel, "request")
	if ce == nil && s.metrics == nil {
		s.serve(&call{w: w, r: r})
		return
	}
	// The monotonic clock alone, read twice: time.Now reads the wall
	// clock too (135 ns against 50–70 on this project's machine).
	start := time.Since(s.epoch)
	c := &call{r: r, rec: statusRecorder{ResponseWriter: w, status: http.StatusOK}}
	c.w = &c.rec
	rec := &c.rec
	s.serve(c)
	took := time.Since(s.epoch) - start
	if ce != nil {
		ce.Write(zap.String("method", r.Method), zap.String("path", r.URL.Path),
			zap.Int("status", rec.status), zap.Duration("took", took),
			zap.String("remote", r.RemoteAddr))
	}
	if s.metrics == nil {
		return
	}
	mi := methodIndex(r.Method)
	if c.rt == nil || c.rt.series == nil || mi < 0 {
		// No route, or a method of its own: bounded labels whatever
		// paths and methods come in.
		route, method := "other", "other"
		if c.rt != nil {
			route = c.rt.name
		}
		if mi >= 0 {
			method = r.Method
		}
		s.metrics.Redfish(route, method, rec.status, took)
		return
	}
	last := &c.rt.series[mi]
	rs := last.Load()
	if rs == nil || rs.code != rec.status {
		rs = &routeSeries{code: rec.status, s: s.metrics.RedfishSeries(c.rt.name, r.Method, rec.status)}
		last.Store(rs)
	}
	rs.s.Observe(took)
}

// knownMethodList are the methods counted by name in the metrics; others
// are counted as "other".
var knownMethodList = [...]string{"GET", "HEAD", "POST", "PATCH", "PUT", "DELETE"}

// methodIndex is method's place in knownMethodList, -1 when it has none.
func methodIndex(method string) int {
	for i, m := range knownMethodList {
		if m == method {
			return i
		}
	}
	return -1
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection (Flush).
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (s *Server) serve(c *call) {
	w, r := c.w, c.r
	c.bmc = bmcOf(r.Context())
	h := w.Header()
	h["Odata-Version"] = hdrOData
	// Answers hold accounts, sessions and tokens: never stored by a
	// cache (no-cache only asks a cache to revalidate), never sniffed.
	h["Cache-Control"] = hdrNoStore
	h["X-Content-Type-Options"] = hdrNosniff
	p := r.URL.Path
	if len(p) > 1 && p[len(p)-1] == '/' && p != rootURI+"/" {
		p = p[:len(p)-1]
	}
	if p == rootURI {
		p = rootURI + "/"
	}
	if v := s.viewOf(c); v != nil {
		p = v.mapIn(p)
		vw := &idWriter{ResponseWriter: w, c: c, v: v}
		c.view, c.w, w = v, vw, vw
		defer vw.finish()
	}
	c.path = p
	if s.serveRIBCL(c) {
		return
	}
	// DSP0266 §8.2 (request headers): this service speaks OData 4.0 only;
	// a request that asks for another version is refused, not answered in
	// a version the client did not ask for.
	if v := r.Header["Odata-Version"]; len(v) > 0 && v[0] != "4.0" {
		s.fail(c, newError(http.StatusPreconditionFailed, MsgHeaderInvalid, "OData-Version: "+truncate(v[0], 16)).
			with("This service supports OData-Version 4.0 only."))
		return
	}
	// DSP0266 §7.3 (query parameters): a $-parameter the service does not
	// implement is answered 501; others are ignored.
	if r.URL.RawQuery != "" {
		if q := unsupportedQuery(r.URL.RawQuery, s.expands(c)); q != "" {
			s.fail(c, newError(http.StatusNotImplemented, MsgQueryParameterUnsupported, truncate(q, 32)))
			return
		}
	}
	// DSP0266 §7.9 (POST, create): a POST to a collection's Members
	// property is a POST to the collection.
	if r.Method == http.MethodPost {
		if parent, ok := strings.CutSuffix(p, "/Members"); ok && parent != rootURI {
			c.path = parent
			if rt := s.match(c); rt == nil || rt.post == nil {
				c.path = p
			}
			c.rt = nil
		}
	}
	switch r.Method {
	case http.MethodPost, http.MethodPatch, http.MethodPut:
		// A body is read only up to maxBody, whoever sends it; the writer
		// makes the server close the connection after the answer. A refused
		// body is discarded after the answer (fail), up to maxDiscard.
		if r.ContentLength > maxBody {
			s.fail(c, newError(http.StatusRequestEntityTooLarge, MsgPayloadTooLarge).
				with(fmt.Sprintf("At most %d bytes.", maxBody)))
			return
		}
		r.Body = &cappedBody{ReadCloser: http.MaxBytesReader(w, r.Body, maxBody), raw: r.Body}
	}
	rt := s.match(c)
	method := r.Method
	if method == http.MethodHead {
		method = http.MethodGet
	}
	public := rt != nil && strings.Contains(rt.public, method)
	if !public {
		if err := s.authenticate(c); err != nil {
			s.fail(c, err)
			return
		}
		admission.Authenticated(r)
	} else if method != http.MethodGet && !admission.Anonymous(w, r) {
		// A public route that reads a body (a login) is served without
		// checking the credentials the request may carry: it waits for
		// its body as any request without credentials does.
		return
	}
	if rt == nil {
		s.fail(c, newError(http.StatusNotFound, MsgResourceNotFound, "Resource", r.URL.Path))
		return
	}
	hf := rt.handler(method)
	if hf == nil {
		s.fail(c, newError(http.StatusMethodNotAllowed, MsgOperationNotAllowed).
			withHeader("Allow", rt.allow))
		return
	}
	if !public {
		if need := rt.need(method); c.who.priv&need != need {
			s.fail(c, newError(http.StatusForbidden, MsgInsufficientPrivilege).
				with("The account's role does not hold the privilege this operation needs."))
			return
		}
	}
	if method == http.MethodPost || method == http.MethodPatch {
		// Before any redirect: a browser's cross-site form or fetch can
		// only send the simple types, and is refused here.
		if err := checkContentType(r); err != nil {
			s.fail(c, err)
			return
		}
	}
	if rt.scope != scopeNone {
		if err := s.resolve(c, rt); err != nil {
			s.fail(c, err)
			return
		}
		if in := s.svc.RedfishFault(c.m.ID); in != (machine.Injected{}) {
			if err := s.inject(c, in); err != nil {
				s.fail(c, err)
				return
			}
		}
		if c.m.ID != c.params[0] && method != http.MethodGet {
			// A change addressed by name acts where it is, with no
			// redirect for a client to replay.
			c.params[0] = c.m.ID
		}
		if c.m.ID != c.params[0] {
			// A name or a differently cased UUID: send the client to the
			// canonical URI (308).
			u := rt.uriFor(c.m.ID, c.params[1:c.np])
			if r.URL.RawQuery != "" {
				u += "?" + r.URL.RawQuery
			}
			h.Set("Location", u)
			w.WriteHeader(http.StatusPermanentRedirect)
			return
		}
	}
	h["Allow"] = rt.allowHdr
	if err := hf(s, c); err != nil {
		s.fail(c, err)
	}
}

// supportedQueries are the $-query parameters the service implements
// (ProtocolFeaturesSupported in the service root says the same).
var supportedQueries = map[string]bool{"$top": true, "$skip": true}

// expands reports whether the route of c.path takes $expand (a vendor's
// collection that its clients expand: Dell's job queue).
func (s *Server) expands(c *call) bool {
	probe := &call{path: c.path}
	rt := s.match(probe)
	return rt != nil && rt.expand
}

// unsupportedQuery returns the first $-parameter of a raw query string the
// service does not implement, or "" ($expand is taken where expand says).
func unsupportedQuery(raw string, expand bool) string {
	for raw != "" {
		var kv string
		kv, raw, _ = strings.Cut(raw, "&")
		k, _, _ := strings.Cut(kv, "=")
		if uk, err := url.QueryUnescape(k); err == nil {
			k = uk
		}
		if strings.HasPrefix(k, "$") && !supportedQueries[k] && !(expand && k == "$expand") {
			return k
		}
	}
	return ""
}

// inject carries out the faults set for the machine of a request (vbmcd
// fault): a delay, a BMC that answers nothing (the connection is closed
// unanswered), or an error status instead of the answer.
func (s *Server) inject(c *call, in machine.Injected) *apiError {
	if in.Delay > 0 {
		select {
		case <-time.After(in.Delay):
		case <-c.r.Context().Done():
		}
	}
	switch {
	case in.Down:
		panic(http.ErrAbortHandler) // net/http closes the connection, unanswered
	case in.Status == http.StatusConflict:
		return newError(http.StatusConflict, MsgResourceInUse).with("An injected fault (vbmcd fault): the BMC is busy.")
	case in.Status != 0:
		return newError(http.StatusServiceUnavailable, MsgServiceTemporarilyUnavailable, "1").
			with("An injected fault (vbmcd fault): the BMC is unavailable.").withHeader("Retry-After", "1")
	}
	return nil
}

// maxDiscard is how much of a refused body (413) is read and thrown away
// before the answer. A client such as python3-requests sends its whole body
// before it reads an answer: had the server closed the connection with the
// body unread, the client would see a connection reset instead of the 413.
// Answering first would not do either: net/http then reads 256 KiB of the
// body itself and closes the connection after a half-close and half a
// second's wait, a goroutine and its stack held per request. The bytes go
// nowhere (no memory is kept); a longer body still gets the connection
// closed, and ReadTimeout bounds how long a slow one is read.
const maxDiscard = 32 << 20

// discardBody reads the rest of a refused HTTP/1 body, up to maxDiscard,
// so that the connection can carry the answer and the next request. A
// client that asked "Expect: 100-continue" has sent nothing yet: it is
// answered without a 100 Continue, and the connection closes. HTTP/2
// needs none of this: the answer ends the stream, not the connection (and
// its server hides Expect, which reading would answer with 100 Continue).
func discardBody(c *call) {
	body := c.r.Body
	if cb, ok := body.(*cappedBody); ok {
		body = cb.raw
	}
	if body == nil || body == http.NoBody || c.r.ProtoMajor != 1 || strings.EqualFold(c.r.Header.Get("Expect"), "100-continue") {
		return
	}
	_, _ = io.CopyN(io.Discard, body, maxDiscard)
}

// cappedBody is a request body read through http.MaxBytesReader; raw is
// the body as the server gave it, which discardBody reads on.
type cappedBody struct {
	io.ReadCloser
	raw io.ReadCloser
}
