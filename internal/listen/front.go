package listen

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"time"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/admission"
	"github.com/bmlab/bmlab/internal/metrics"
)

// Limits bound what one client of a Redfish listener may hold:
// Redfish requests are small JSON bodies (the service reads at most 1 MiB of
// one) and short headers; a client that sends them slower than this, or
// keeps an idle connection longer, is holding a connection it does not use.
type Limits struct {
	ReadHeader time.Duration // request line and headers
	Read       time.Duration // headers and body
	AnonRead   time.Duration // the same, for a request not yet authenticated
	Write      time.Duration // from the end of the headers to the end of the response
	Idle       time.Duration // between requests on a kept-alive connection
	MaxHeader  int           // bytes of request line and headers
}

// DefaultLimits are the limits of vbmcd's listeners.
var DefaultLimits = Limits{
	ReadHeader: 10 * time.Second,
	Read:       30 * time.Second,
	AnonRead:   5 * time.Second,
	Write:      60 * time.Second,
	Idle:       60 * time.Second,
	MaxHeader:  32 << 10,
}

// HTTP/2 settings of the Redfish listeners. A BMC's clients (Ironic's
// sushy, gofish, redfishtool, a browser on the web console) keep a few
// requests in flight per connection; Go's default of 250 streams made one
// connection 250 requests held at once (issue 32). Frames and receive
// windows are HTTP/2's smallest, so what a connection buffers before its
// handlers read is 64 KiB, not Go's default 1 MiB.
const (
	h2Streams      = 16
	h2FrameSize    = 16 << 10
	h2ConnWindow   = 64 << 10
	h2StreamWindow = 64 << 10
	h2WriteStall   = 20 * time.Second // a connection whose peer reads nothing for this long is closed
)

// Request budgets (internal/admission), for every Redfish listener of the
// daemon together; docs/security.md gives the worst-case memory they allow.
const (
	inFlightTotal     = 2048     // requests in flight, all sources
	anonPerSource     = 16       // of a source's, not yet authenticated
	anonTotal         = 1024     // of all, not yet authenticated
	bodyPerSource     = 16 << 20 // request bodies held (and their decoding), one source
	bodyTotal         = 64 << 20 // the same, all sources
	refusedRetryAfter = time.Second
)

// NewServer is a server with limits l (the metrics listener's; the
// Redfish listeners are built by a Front).
func NewServer(h http.Handler, log *zap.Logger, l Limits) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeader,
		ReadTimeout:       l.Read,
		WriteTimeout:      l.Write,
		IdleTimeout:       l.Idle,
		MaxHeaderBytes:    l.MaxHeader,
		ErrorLog:          zap.NewStdLog(log.Named("http")),
	}
}

// Front is what every Redfish listener of the daemon is built from and
// shares: the limits of one connection and one request, the HTTP/2
// settings, and the budgets of each source and of all sources together
// (connections, requests in flight, requests not yet authenticated,
// request bodies). Listeners made from one Front (Serve) count against the
// same budgets, so several listeners (one per machine, say) do not
// multiply them.
type Front struct {
	limits Limits
	conns  *connLimiter
	gate   *admission.Gate
	log    *zap.Logger
}

// Conns bounds the connections a Front's listeners hold: one source's
// (--redfish-max-conns-per-source, also its requests in flight) and all
// sources' together (--redfish-max-conns); 0 is no bound.
type Conns struct {
	PerSource, Total int
}

// NewFront builds the front of a daemon whose connections c bounds; refuse answers
// a request refused for room (a Redfish error body); reg, when not nil,
// gets the front's counters. Until ctx ends it gives memory back to the
// system after a burst (relieve).
func NewFront(ctx context.Context, c Conns, log *zap.Logger, refuse admission.Refuser, reg *metrics.Registry) *Front {
	l := DefaultLimits
	f := &Front{
		limits: l,
		conns:  newConnLimiter(c.PerSource, c.Total, l.Idle, log),
		gate: admission.New(admission.Budgets{
			PerSource: c.PerSource, Total: inFlightTotal,
			AnonPerSource: anonPerSource, AnonTotal: anonTotal,
			AnonRead: l.AnonRead, Read: l.Read, Write: l.Write,
			BodyPerSource: bodyPerSource, BodyTotal: bodyTotal,
			RetryAfter: refusedRetryAfter,
		}, log, refuse),
		log: log,
	}
	reg.Counter("vbmcd_redfish_connections_refused_total", "Redfish connections closed at accept: their source held as many as it may (--redfish-max-conns-per-source), or all sources together (--redfish-max-conns).",
		func() float64 { return float64(f.conns.refused.Load()) })
	reg.Counter("vbmcd_redfish_connections_evicted_total", "Idle Redfish keep-alive connections closed to admit a new one.",
		func() float64 { return float64(f.conns.evicted.Load()) })
	reg.Counter("vbmcd_redfish_connections_taken_total", "Redfish connections in use closed, at the total, to admit one from a source holding fewer.",
		func() float64 { return float64(f.conns.taken.Load()) })
	reg.CounterBy("vbmcd_redfish_requests_refused_total", "Requests answered 503 with Retry-After because a budget was full, by budget: "+
		"source (its source's requests in flight, --redfish-max-conns-per-source), total (all requests in flight), "+
		"anon-source and anon-total (requests not yet authenticated), body (request body bytes held).",
		"budget", admission.Whys(), func(why string) float64 { return float64(f.gate.Refused(why)) })
	reg.Gauge("vbmcd_redfish_connections", "Connections held on the Redfish listeners.",
		func() float64 { return float64(f.conns.held()) })
	reg.Gauge("vbmcd_redfish_requests_in_flight", "Requests (HTTP/1 requests and HTTP/2 streams) being served on the Redfish listeners.",
		func() float64 { n, _, _ := f.gate.InFlight(); return float64(n) })
	reg.Gauge("vbmcd_redfish_request_body_bytes", "Request body bytes held in memory, and their decoding, as charged to the budget.",
		func() float64 { _, _, b := f.gate.InFlight(); return float64(b) })
	go f.relieve(ctx)
	return f
}

// After a burst (many requests or connections held, or some refused) the
// Go runtime keeps the memory it grew to: nothing allocates once the
// burst is over, so no collection runs and nothing is given back for
// minutes (issue 32: 223 MB two minutes after an attack that peaked at
// 206 MB). relieve watches once a second and, when a burst has passed,
// collects and gives the free memory back to the system at once. (What
// the server would otherwise keep reachable for a minute after a burst,
// its timers per HTTP/2 stream and per connection, it no longer arms: the
// gate and the connection limiter keep those deadlines.)
const (
	reliefBusyRequests = 256 // requests in flight that make a burst
	reliefBusyConns    = 256 // connections held that make a burst
	reliefEvery        = time.Second
)

func (f *Front) relieve(ctx context.Context) {
	tick := time.NewTicker(reliefEvery)
	defer tick.Stop()
	var burst bool
	var refused uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		reqs, _, _ := f.gate.InFlight()
		conns := f.conns.held()
		r := f.conns.refused.Load()
		for _, why := range admission.Whys() {
			r += f.gate.Refused(why)
		}
		switch {
		case reqs >= reliefBusyRequests || conns >= reliefBusyConns || r != refused:
			burst, refused = true, r
		case burst && reqs < reliefBusyRequests/4 && conns < reliefBusyConns/4:
			burst = false
			f.giveBack(reqs, conns)
		}
	}
}

// giveBack collects and returns the free memory to the system.
func (f *Front) giveBack(reqs, conns int) {
	// Two collections: the first moves what sync.Pools hold (net/http's
	// and HTTP/2's buffers, thousands after a burst) to their victim
	// caches, the second frees them; FreeOSMemory's own collection then
	// gives it back.
	runtime.GC()
	debug.FreeOSMemory()
	f.log.Info("a burst of requests is over: memory given back to the system", zap.Int("in flight", reqs), zap.Int("connections", conns))
}

// Server returns the http.Server of one Redfish listener serving h over
// TLS config tc (nil: plain HTTP, which has no HTTP/2).
func (f *Front) Server(h http.Handler, tc *tls.Config) *http.Server {
	srv := NewServer(f.gate.Wrap(h), f.log, f.limits)
	// The gate sets each admitted request's read and write deadlines;
	// the server's own would arm two timers on every HTTP/2 stream, the
	// refused ones too, each keeping its connection's buffers in memory
	// until it fires (internal/admission, Budgets).
	srv.ReadTimeout, srv.WriteTimeout = 0, 0
	// The limiter closes idle connections (connlimit.go): the server's
	// idle timer per connection would keep each ended one in memory
	// until it fired.
	srv.IdleTimeout = 0
	srv.TLSConfig = tc
	// Each connection's HTTP/1 requests share one admission slot (no
	// allocation per request for the gate), whose write deadlines the
	// gate's sweeper keeps (no timer per request): internal/admission.
	srv.ConnContext = f.connContext
	srv.ConnState = f.connState
	srv.HTTP2 = &http.HTTP2Config{
		MaxConcurrentStreams:          h2Streams,
		MaxReadFrameSize:              h2FrameSize,
		MaxReceiveBufferPerConnection: h2ConnWindow,
		MaxReceiveBufferPerStream:     h2StreamWindow,
		WriteByteTimeout:              h2WriteStall,
	}
	return srv
}

// connContext gives a connection its admission slot; one the limiter
// counts (all of them, unless the limiter is off) keeps its slot's handle,
// for connState.
func (f *Front) connContext(ctx context.Context, c net.Conn) context.Context {
	lc := limitedOf(c)
	if lc == nil {
		return f.gate.ConnContext(ctx, c)
	}
	ctx, lc.gate = f.gate.NewConn(ctx, c)
	return ctx
}

// connState tells the limiter and the gate how a connection stands.
func (f *Front) connState(c net.Conn, st http.ConnState) {
	lc := limitedOf(c)
	if lc == nil {
		return
	}
	f.conns.mark(lc, st)
	if lc.gate != nil {
		lc.gate.State(st)
	}
}

// Serve serves srv on ln, counting ln's connections against the front's
// budgets, until srv is shut down; overTLS says whether srv was built
// with a TLS config. (Not read from srv: net/http gives a server that
// serves plain HTTP with HTTP/2 settings a TLSConfig of its own, so a
// second listener of the same server, a machine's own BMC, would take it
// for a TLS server.)
func (f *Front) Serve(srv *http.Server, ln net.Listener, overTLS bool) error {
	ln = f.conns.wrap(ln)
	if overTLS {
		return srv.ServeTLS(ln, "", "")
	}
	return srv.Serve(ln)
}
