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
	// send its body; Read how long an authenticated one may; Write how
	// long a request may take to be answered. They are set on each
	// admitted request, so that the server itself needs no ReadTimeout or
	// WriteTimeout: HTTP/2 arms those as timers on every stream, refused
	// ones included, and a timer keeps its connection's buffers in memory
	// until it would have fired, long after the connection ended.
	AnonRead time.Duration
	Read     time.Duration
	Write    time.Duration

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
	idle  int // sources in src holding nothing (kept, up to keptIdle)
	total usage

	refused [5]atomic.Uint64 // by whys' index
	rlog    *lograte.Log

	// epoch makes now's readings: the deadlines need the monotonic
	// clock only.
	epoch time.Time

	swMu     sync.Mutex
	streams  map[*ticket]struct{}   // HTTP/2 requests whose deadlines sweep enforces
	conns    map[*connSlot]struct{} // HTTP/1 connections whose write deadlines sweep enforces (NewConn)
	sweeping bool
}

// keptIdle is how many sources holding nothing the gate keeps in its
// table, so that a source's next request finds its entry (a client with
// one request at a time would otherwise cost an allocation a request);
// past it, those that hold nothing go.
const keptIdle = 256

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
	return &Gate{b: b, log: log, refuse: refuse, src: map[netip.Addr]*usage{}, epoch: time.Now(),
		rlog: lograte.New(log, "requests refused: their budgets were full (503 with Retry-After)", 20, 10*time.Second)}
}

// now is the time from the monotonic clock alone: one clock reading where
// time.Now takes two (the wall clock's and the monotonic), 50–70 ns
// against 135 on this project's 2-core machine, twice a request. Its
// wall reading is the epoch's plus the monotonic time since, which is all
// a deadline needs (net's SetDeadline and the sweeper's comparisons use
// the monotonic reading).
func (g *Gate) now() time.Time { return g.epoch.Add(time.Since(g.epoch)) }

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

// connSlot is what the requests of one HTTP/1 connection share, one after
// the other (ConnContext, NewConn): the connection, whose deadlines they
// set, and the ticket each reuses in turn, so that admitting a request
// allocates nothing.
type connSlot struct {
	conn net.Conn
	src  netip.Addr // the connection's source, once its first request parsed it
	t    ticket
	// swept: the gate's sweeper enforces the requests' write deadlines
	// (NewConn), so that a request arms no timer; else they are the
	// connection's own (ConnContext).
	swept bool
}

// ConnContext is an http.Server's ConnContext hook: it gives each
// connection the slot its HTTP/1 requests use in turn (Wrap). HTTP/2
// streams, which run side by side on one connection, each take a ticket
// of their own, as do requests on a server without this hook.
func (g *Gate) ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, ticketKey{}, &connSlot{conn: c})
}

// Conn is a connection's slot, for a server that also tells the gate how
// the connection stands (State): then the write deadline of each of its
// HTTP/1 requests is kept by the gate's sweeper, as an HTTP/2 stream's is,
// and no request arms a timer (a write deadline set on the connection and
// cleared after every answer is two timer operations per request).
type Conn struct {
	g *Gate
	s *connSlot
}

// NewConn is ConnContext for a server whose ConnState hook calls the
// returned Conn's State for the connection.
func (g *Gate) NewConn(ctx context.Context, c net.Conn) (context.Context, *Conn) {
	s := &connSlot{conn: c, swept: true}
	g.swMu.Lock()
	if g.conns == nil {
		g.conns = map[*connSlot]struct{}{}
	}
	g.conns[s] = struct{}{}
	g.startSweep()
	g.swMu.Unlock()
	return context.WithValue(ctx, ticketKey{}, s), &Conn{g: g, s: s}
}

// State is the server's ConnState for the connection: idle, its last
// answer is flushed and its write deadline ends; hijacked (a websocket),
// the request's write deadline becomes the connection's own, which its
// new owner keeps from then on, and the gate lets it go, as it does a
// closed one.
func (c *Conn) State(st http.ConnState) {
	t := &c.s.t
	switch st {
	case http.StateIdle:
		t.mu.Lock()
		t.writeAt = time.Time{}
		t.mu.Unlock()
	case http.StateHijacked, http.StateClosed:
		c.g.swMu.Lock()
		delete(c.g.conns, c.s)
		c.g.swMu.Unlock()
		if st == http.StateHijacked {
			t.mu.Lock()
			at := t.writeAt
			t.writeAt = time.Time{}
			t.mu.Unlock()
			_ = c.s.conn.SetWriteDeadline(at)
		}
	}
}

// ticket is one admitted request's share of the budgets, and its
// deadlines.
type ticket struct {
	g     *Gate
	src   netip.Addr
	conn  net.Conn                 // HTTP/1 through a connection's slot: its deadlines are the request's
	slot  *connSlot                // that slot
	rc    *http.ResponseController // otherwise (HTTP/2: the sweeper's)
	h2    bool
	start time.Time

	mu     sync.Mutex
	active bool // admitted and not done: a slot's ticket between requests is not
	anon   bool
	body   int64
	// An HTTP/2 stream's deadlines, and the write deadline of an HTTP/1
	// request on a swept connection (NewConn: until the connection is idle
	// again, its answer flushed), are kept here and enforced by the gate's
	// sweeper, not by timers (Budgets); gone: the HTTP/2 stream's handler
	// returned.
	readAt, writeAt time.Time
	gone            bool
}

// Which deadline setDeadline sets.
const (
	readDeadline  = true
	writeDeadline = false
)

// setDeadline sets the request's read or write deadline (zero: none):
// HTTP/1's on the connection, HTTP/2's for the gate's sweeper, and the
// write deadline of an HTTP/1 request on a connection the sweeper keeps
// (NewConn) for the sweeper too.
func (t *ticket) setDeadline(read bool, at time.Time) {
	swept := t.h2 || (!read && t.slot != nil && t.slot.swept)
	if !swept {
		switch {
		case t.conn != nil && read:
			_ = t.conn.SetReadDeadline(at)
		case t.conn != nil:
			_ = t.conn.SetWriteDeadline(at)
		case read:
			_ = t.rc.SetReadDeadline(at)
		default:
			_ = t.rc.SetWriteDeadline(at)
		}
		return
	}
	t.mu.Lock()
	if read {
		t.readAt = at
	} else {
		t.writeAt = at
	}
	t.mu.Unlock()
}

// Wrap admits every request within the budgets before h serves it. A
// request that carries no credentials (neither Authorization nor
// X-Auth-Token) starts as not authenticated, with the short deadline for
// its body; one that does starts as authenticated, and a face that serves
// it without checking them first (a login reads the body it would check)
// calls Anonymous.
//
// An HTTP/1 request with no body (http.NoBody: nothing is left to read
// once its headers are, which the server's ReadHeaderTimeout bounds) gets
// no read deadline; every request gets its write deadline. On a server
// with the gate's ConnContext (or NewConn) an HTTP/1 request costs no
// allocation: it uses its connection's slot; with NewConn its write
// deadline arms no timer either.
func (g *Gate) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		slot, _ := r.Context().Value(ticketKey{}).(*connSlot)
		if r.ProtoMajor != 1 {
			slot = nil // HTTP/2 streams run side by side: a ticket each
		}
		var src netip.Addr
		if slot != nil && slot.src.IsValid() {
			src = slot.src // a connection's source does not change
		} else if src = SourceOf(r.RemoteAddr); slot != nil {
			slot.src = src
		}
		anon := len(r.Header["Authorization"]) == 0 && len(r.Header["X-Auth-Token"]) == 0
		if why := g.admit(src, anon); why != "" {
			g.refuseRequest(w, r, src, why)
			return
		}
		var t *ticket
		if slot != nil {
			t = &slot.t
			t.g, t.src, t.conn, t.slot, t.rc, t.h2, t.start = g, src, slot.conn, slot, nil, false, g.now()
			t.mu.Lock()
			t.active, t.anon, t.body, t.readAt, t.writeAt = true, anon, 0, time.Time{}, time.Time{}
			t.mu.Unlock()
		} else {
			t = &ticket{g: g, src: src, rc: http.NewResponseController(w), h2: r.ProtoMajor >= 2, active: true, anon: anon, start: g.now()}
			r = r.WithContext(context.WithValue(r.Context(), ticketKey{}, t))
		}
		defer t.done()
		if t.h2 {
			g.track(t)
			defer g.untrack(t)
		}
		if t.h2 || r.Body != http.NoBody {
			if read := g.b.Read; anon && g.b.AnonRead > 0 {
				t.setDeadline(readDeadline, t.start.Add(g.b.AnonRead))
			} else if read > 0 {
				t.setDeadline(readDeadline, t.start.Add(read))
			}
		}
		if g.b.Write > 0 {
			t.setDeadline(writeDeadline, t.start.Add(g.b.Write))
			if !t.h2 {
				// The deadline holds after the handler, renewed, for the
				// answer's last flush (net/http flushes it after the
				// handler returns): the connection's own, or on a swept
				// connection the sweeper's until the connection is idle.
				defer func() { t.setDeadline(writeDeadline, t.start.Add(time.Since(t.start)+g.b.Write)) }()
			}
		}
		h.ServeHTTP(w, r)
	})
}

// admit takes places for a request from src; the reason when a budget
// is full.
func (g *Gate) admit(src netip.Addr, anon bool) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	u, kept := g.src[src]
	if !kept {
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
	switch {
	case !kept:
		g.src[src] = u
	case u.reqs == 0:
		g.idle--
	}
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
	t.anon, t.body, t.active = false, 0, false
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
		if g.idle++; g.idle > keptIdle {
			for k, v := range g.src {
				if v.reqs <= 0 {
					delete(g.src, k)
				}
			}
			g.idle = 0
		}
	}
}

// ticketOf returns the ticket of a request the gate admitted and is
// serving; nil for a request no gate admitted.
func ticketOf(r *http.Request) *ticket {
	switch v := r.Context().Value(ticketKey{}).(type) {
	case *ticket:
		return v
	case *connSlot:
		v.t.mu.Lock()
		active := v.t.active
		v.t.mu.Unlock()
		if active {
			return &v.t
		}
	}
	return nil
}

// Authenticated records that r's credentials are verified: r leaves the
// budgets of requests without credentials and gets the whole read
// timeout. Without a gate (a test's bare handler) it does nothing.
func Authenticated(r *http.Request) {
	t := ticketOf(r)
	if t == nil || !t.leaveAnon() {
		return
	}
	if g := t.g; g.b.Read > 0 && (t.h2 || r.Body != http.NoBody) {
		t.setDeadline(readDeadline, t.start.Add(g.b.Read))
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
	if g.b.AnonRead > 0 && (t.h2 || r.Body != http.NoBody) {
		t.setDeadline(readDeadline, time.Now().Add(g.b.AnonRead))
	}
	return true
}

// Unbounded lifts r's read and write deadlines: a long-lived stream (the
// web console's live view). Without a gate it does nothing; the handler
// clears the server's own deadlines itself.
func Unbounded(r *http.Request) {
	if t := ticketOf(r); t != nil {
		t.setDeadline(readDeadline, time.Time{})
		t.setDeadline(writeDeadline, time.Time{})
	}
}

// sweepEvery is how often the deadlines the sweeper keeps (HTTP/2
// streams', swept HTTP/1 connections' writes) are checked: they are
// enforced up to this late.
const sweepEvery = 250 * time.Millisecond

// track adds an HTTP/2 request to those the sweeper watches, starting it
// when it is not running.
func (g *Gate) track(t *ticket) {
	g.swMu.Lock()
	defer g.swMu.Unlock()
	if g.streams == nil {
		g.streams = map[*ticket]struct{}{}
	}
	g.streams[t] = struct{}{}
	g.startSweep()
}

// startSweep starts the sweeper unless it runs; g.swMu is held.
func (g *Gate) startSweep() {
	if !g.sweeping {
		g.sweeping = true
		go g.sweep()
	}
}

// untrack removes a request whose handler is returning; after it the
// sweeper no longer touches its (soon invalid) response writer.
func (g *Gate) untrack(t *ticket) {
	t.mu.Lock()
	t.gone = true
	t.mu.Unlock()
	g.swMu.Lock()
	delete(g.streams, t)
	g.swMu.Unlock()
}

// sweep ends the HTTP/2 streams past their deadline, and the writes of
// swept HTTP/1 connections past theirs (a deadline in the past fails them
// at once), until nothing is left to watch.
func (g *Gate) sweep() {
	tick := time.NewTicker(sweepEvery)
	defer tick.Stop()
	var due []*ticket
	var conns []*connSlot
	for range tick.C {
		now := time.Now()
		due, conns = due[:0], conns[:0]
		g.swMu.Lock()
		if len(g.streams) == 0 && len(g.conns) == 0 {
			g.sweeping = false
			g.swMu.Unlock()
			return
		}
		for t := range g.streams {
			due = append(due, t)
		}
		for s := range g.conns {
			conns = append(conns, s)
		}
		g.swMu.Unlock()
		past := now.Add(-time.Second)
		for _, t := range due {
			t.mu.Lock()
			if !t.gone {
				if !t.readAt.IsZero() && now.After(t.readAt) {
					t.readAt = time.Time{}
					_ = t.rc.SetReadDeadline(past)
				}
				if !t.writeAt.IsZero() && now.After(t.writeAt) {
					t.writeAt = time.Time{}
					_ = t.rc.SetWriteDeadline(past)
				}
			}
			t.mu.Unlock()
		}
		for _, s := range conns {
			t := &s.t
			t.mu.Lock()
			if !t.writeAt.IsZero() && now.After(t.writeAt) {
				t.writeAt = time.Time{}
				_ = s.conn.SetWriteDeadline(past)
			}
			t.mu.Unlock()
		}
	}
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
	if r.ProtoMajor == 1 && g.b.Write > 0 {
		// HTTP/1: a deadline on the connection, no timer. (HTTP/2: the
		// connection's own write stall bounds the short answer.)
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(g.b.Write))
	}
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
