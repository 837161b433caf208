// Package admission bounds what the callers of vbmcd's HTTP listeners hold
// at once, so that memory grows with what honest clients need, never with
// what an attacker announces or leaves open: requests in flight (HTTP/1
// requests and HTTP/2 streams alike) per source address (an IPv6 one's
// /64) and in total; of those, the ones not yet authenticated, in smaller
// budgets and with a short deadline to send their body; and the bytes of
// request bodies held in memory, charged as they arrive. Past a budget a
// request is answered at once with 503 and Retry-After (the face's error
// body, through a Refuser), counted, and logged at most every 10 s with
// the sources refused most.
//
// A Gate wraps a listener's handler (vbmcd builds every Redfish listener
// with one Gate, so several listeners share the budgets). The faces tell
// it what only they know: Authenticated when a request's credentials are
// verified, Anonymous when a request that carries credentials is served
// without them (a login reads its body first), Reserve before a body
// buffer grows. Without a Gate those calls do nothing, so the faces run
// the same under a test's bare handler.
//
// Each admitted request gets its deadlines: to send its body (short
// without credentials; none without a body) and to be answered. An HTTP/2
// stream's are kept by the gate's sweeper (every 250 ms), not by timers.
// A server that gives the gate its connections (ConnContext, or NewConn
// with Conn.State in its ConnState hook, as vbmcd's listeners do) lets an
// HTTP/1 connection's requests take turns in one slot, so that admitting
// one allocates nothing, and with NewConn their write deadlines are the
// sweeper's too, so that a request arms no timer.
//
// It does not limit connections (vbmcd's listener does, per source and in
// total) or the HTTP/2 streams of one connection (the server's
// MaxConcurrentStreams).
package admission
