package admission

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/lograte"
)

// Budgets are what the callers of one daemon's listeners may hold at once.
// A request takes a place in its source's and in the total budget of
// requests in flight (an HTTP/1 request and an HTTP/2 stream alike); until
// its credentials are verified it also takes one in the smaller budgets of
// requests without credentials and must send its body within AnonRead. The
// bytes of request bodies held in memory are budgeted per source and in
// total, charged as they arrive.
type Budgets struct {
	PerSource     int // requests in flight from one source
	Total         int // requests in flight from all sources
	AnonPerSource int // of a source's, those not authenticated
	AnonTotal     int // of all, those not authenticated

	// AnonRead is how long a request not yet authenticated may take to
	// send its body; Read how long an authenticated one may (the
	// listener's ReadTimeout, restored when a request is authenticated).
	AnonRead time.Duration
	Read     time.Duration

	BodyPerSource int64 // request body bytes held for one source
	BodyTotal     int64 // request body bytes held for all

	// RetryAfter is what a refused request is told to wait.
	RetryAfter time.Duration
}

// Why a request was refused; the metric's label.
const (
	WhySource     = "source"      // its source's requests in flight
	WhyTotal      = "total"       // all requests in flight
	WhyAnonSource = "anon-source" // its source's requests without credentials
	WhyAnonTotal  = "anon-total"  // all requests without credentials
	WhyBody       = "body"        // request body bytes held
)

var whys = []string{WhySource, WhyTotal, WhyAnonSource, WhyAnonTotal, WhyBody}

// Refuser answers a request refused for why, telling it to retry after
// retryAfter seconds (a 503 with Retry-After; the face's error body).
type Refuser func(w http.ResponseWriter, r *http.Request, retryAfter int, why string)

// Gate admits requests within Budgets. It is safe for concurrent use; one
// Gate serves every listener of a daemon, so several listeners share its
// budgets.
type Gate struct {
	b      Budgets
	log    *zap.Logger
	refuse Refuser

	mu    sync.Mutex
	src   map[netip.Addr]*usage
	total usage

	refused [5]atomic.Uint64 // by whys' index
	rlog    *lograte.Log
}

// usage is what a source (or all) holds.
type usage struct {
	reqs, anon int
	body       int64
}

// New returns a gate with budgets b; refuse writes the answer to a
// refused request.
func New(b Budgets, log *zap.Logger, refuse Refuser) *Gate {
	if log == nil {
		log = zap.NewNop()
	}
	return &Gate{b: b, log: log, refuse: refuse, src: map[netip.Addr]*usage{},
		rlog: lograte.New(log, "requests refused: their budgets were full (503 with Retry-After)", 20, 10*time.Second)}
}

// Budgets returns the gate's budgets.
func (g *Gate) Budgets() Budgets { return g.b }

// Refused returns how many requests were refused for why.
func (g *Gate) Refused(why string) uint64 {
	for i, w := range whys {
		if w == why {
			return g.refused[i].Load()
		}
	}
	return 0
}

// Whys lists the reasons a request is refused for.
func Whys() []string { return append([]string(nil), whys...) }

// InFlight returns the requests in flight and those of them not
// authenticated, and the request body bytes held.
func (g *Gate) InFlight() (reqs, anon int, body int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.total.reqs, g.total.anon, g.total.body
}

type ticketKey struct{}

// ticket is one admitted request's share of the budgets.
type ticket struct {
	g     *Gate
	src   netip.Addr
	w     http.ResponseWriter
	start time.Time

	mu   sync.Mutex
	anon bool
	body int64
}

// Wrap admits every request within the budgets before h serves it. A
// request that carries no credentials (neither Authorization nor
// X-Auth-Token) starts as not authenticated, with the short deadline for
// its body; one that does starts as authenticated, and a face that serves
// it without checking them first (a login reads the body it would check)
// calls Anonymous.
func (g *Gate) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		src := SourceOf(r.RemoteAddr)
		anon := len(r.Header["Authorization"]) == 0 && len(r.Header["X-Auth-Token"]) == 0
		if why := g.admit(src, anon); why != "" {
			g.refuseRequest(w, r, src, why)
			return
		}
		t := &ticket{g: g, src: src, w: w, anon: anon, start: time.Now()}
		defer t.done()
		if anon && g.b.AnonRead > 0 {
			_ = http.NewResponseController(w).SetReadDeadline(t.start.Add(g.b.AnonRead))
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ticketKey{}, t)))
	})
}

// admit takes places for a request from src; the reason when a budget
// is full.
func (g *Gate) admit(src netip.Addr, anon bool) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	u := g.src[src]
	if u == nil {
		u = &usage{}
	}
	switch {
	case g.b.PerSource > 0 && u.reqs >= g.b.PerSource:
		return WhySource
	case g.b.Total > 0 && g.total.reqs >= g.b.Total:
		return WhyTotal
	case anon && g.b.AnonPerSource > 0 && u.anon >= g.b.AnonPerSource:
		return WhyAnonSource
	case anon && g.b.AnonTotal > 0 && g.total.anon >= g.b.AnonTotal:
		return WhyAnonTotal
	}
	g.src[src] = u
	u.reqs++
	g.total.reqs++
	if anon {
		u.anon++
		g.total.anon++
	}
	return ""
}

// done gives back everything t holds.
func (t *ticket) done() {
	t.mu.Lock()
	anon, body := t.anon, t.body
	t.anon, t.body = false, 0
	t.mu.Unlock()
	g := t.g
	g.mu.Lock()
	defer g.mu.Unlock()
	u := g.src[t.src]
	if u == nil {
		return
	}
	u.reqs--
	g.total.reqs--
	if anon {
		u.anon--
		g.total.anon--
	}
	u.body -= body
	g.total.body -= body
	if u.reqs <= 0 {
		delete(g.src, t.src)
	}
}

func ticketOf(r *http.Request) *ticket {
	t, _ := r.Context().Value(ticketKey{}).(*ticket)
	return t
}

// Authenticated records that r's credentials are verified: r leaves the
// budgets of requests without credentials and gets the whole read
// timeout. Without a gate (a test's bare handler) it does nothing.
func Authenticated(r *http.Request) {
	t := ticketOf(r)
	if t == nil || !t.leaveAnon() {
		return
	}
	if g := t.g; g.b.Read > 0 {
		// A hijacked connection (a websocket) keeps its own deadlines.
		_ = http.NewResponseController(t.w).SetReadDeadline(t.start.Add(g.b.Read))
	}
}

// AuthenticatedConn is Authenticated for a request whose connection was
// hijacked (a websocket): it leaves the budgets of requests without
// credentials and touches no deadline, which the connection's new owner
// keeps.
func AuthenticatedConn(r *http.Request) {
	if t := ticketOf(r); t != nil {
		t.leaveAnon()
	}
}

// leaveAnon moves t out of the budgets of requests without credentials;
// false when it was not in them.
func (t *ticket) leaveAnon() bool {
	t.mu.Lock()
	was := t.anon
	t.anon = false
	t.mu.Unlock()
	if !was {
		return false
	}
	g := t.g
	g.mu.Lock()
	if u := g.src[t.src]; u != nil {
		u.anon--
		g.total.anon--
	}
	g.mu.Unlock()
	return true
}

// Anonymous puts r, which carries credentials its handler will not check
// before it reads the body (a login), among the requests without
// credentials: their budgets and their short deadline. False when those
// budgets are full: answer 503 (Refuse). Without a gate it does nothing.
func Anonymous(w http.ResponseWriter, r *http.Request) bool {
	t := ticketOf(r)
	if t == nil {
		return true
	}
	t.mu.Lock()
	already := t.anon
	t.mu.Unlock()
	if already {
		return true
	}
	g := t.g
	g.mu.Lock()
	u := g.src[t.src]
	why := ""
	switch {
	case u == nil:
	case g.b.AnonPerSource > 0 && u.anon >= g.b.AnonPerSource:
		why = WhyAnonSource
	case g.b.AnonTotal > 0 && g.total.anon >= g.b.AnonTotal:
		why = WhyAnonTotal
	default:
		u.anon++
		g.total.anon++
	}
	g.mu.Unlock()
	if why != "" {
		g.refuseRequest(w, r, t.src, why)
		return false
	}
	t.mu.Lock()
	t.anon = true
	t.mu.Unlock()
	if g.b.AnonRead > 0 {
		_ = http.NewResponseController(t.w).SetReadDeadline(time.Now().Add(g.b.AnonRead))
	}
	return true
}

// Reserve charges n more bytes of r's body against the budgets; false
// when they would be exceeded (nothing charged): answer 503 (Refuse).
// The bytes are given back when the request ends. Without a gate it
// always succeeds.
func Reserve(r *http.Request, n int64) bool {
	t := ticketOf(r)
	if t == nil || n <= 0 {
		return true
	}
	g := t.g
	g.mu.Lock()
	u := g.src[t.src]
	ok := u != nil &&
		(g.b.BodyPerSource <= 0 || u.body+n <= g.b.BodyPerSource) &&
		(g.b.BodyTotal <= 0 || g.total.body+n <= g.b.BodyTotal)
	if ok {
		u.body += n
		g.total.body += n
	}
	g.mu.Unlock()
	if !ok {
		g.count(t.src, WhyBody)
		return false
	}
	t.mu.Lock()
	t.body += n
	t.mu.Unlock()
	return true
}

// RetryAfter is the wait, in whole seconds, a face tells a request it
// refuses for want of room (Reserve, Anonymous); 1 without a gate.
func RetryAfter(r *http.Request) int {
	if t := ticketOf(r); t != nil {
		return t.g.retryAfter()
	}
	return 1
}

func (g *Gate) retryAfter() int {
	return max(1, int((g.b.RetryAfter+time.Second-1)/time.Second))
}

// refuseRequest answers a refused request and counts it.
func (g *Gate) refuseRequest(w http.ResponseWriter, r *http.Request, src netip.Addr, why string) {
	g.count(src, why)
	if g.refuse != nil {
		g.refuse(w, r, g.retryAfter(), why)
		return
	}
	w.Header().Set("Retry-After", strconv.Itoa(g.retryAfter()))
	http.Error(w, "busy: retry later", http.StatusServiceUnavailable)
}

// count counts a refusal and logs it (rate-limited).
func (g *Gate) count(src netip.Addr, why string) {
	for i, w := range whys {
		if w == why {
			g.refused[i].Add(1)
		}
	}
	g.rlog.Refused(src.String()+" "+why, "request refused: a budget is full (503 with Retry-After)",
		zap.String("source", src.String()), zap.String("budget", why))
}

// SourceOf is what a remote address ("host:port", or a net.Addr's
// String) is counted against: its IP address, an IPv6 one's /64 (what
// one host is usually given).
func SourceOf(remote string) netip.Addr {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		host, _, err := net.SplitHostPort(remote)
		if err != nil {
			host = remote
		}
		ip, err := netip.ParseAddr(host)
		if err != nil {
			return netip.Addr{}
		}
		return prefix(ip)
	}
	return prefix(ap.Addr())
}

func prefix(ip netip.Addr) netip.Addr {
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.Addr()
	}
	return ip
}
