package listen

import (
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/admission"
)

// DefaultMaxConnsPerSource is --redfish-max-conns-per-source's default. One
// client may talk to many BMCs through one vbmcd (Ironic's conductor holds
// a connection or two per node), so idle keep-alives give way to new
// connections; what the cap bounds is connections in use or not yet sending
// a request: 5,000 half-open ones from one source took 29 MB and slowed
// every other client's answer to 943 ms (issue 25).
const DefaultMaxConnsPerSource = 128

// DefaultMaxConns is --redfish-max-conns's default: the connections of
// every source together. 40 sources at their cap held 5,120 (issue 32),
// bounded only by the file descriptor limit.
const DefaultMaxConns = 1024

// connLimiter caps the connections one source holds open on the daemon's
// Redfish listeners, and all sources together. A source is an address, an
// IPv6 one's /64 (what one host is usually given).
//
// When a source is at its cap, a new connection closes the source's
// longest idle keep-alive (a client reconnects at its next request, as
// after the idle timeout); when none is idle, the new connection is closed
// at accept, before a byte of it is read. When all sources together are at
// the total, the source holding the most connections gives one up (its
// longest idle, else its oldest) to a source that holds fewer, so a source
// that comes late is never shut out by a few that came first; a source
// among the biggest holders gives up one of its own idle ones, or is
// refused.
type connLimiter struct {
	max, maxTotal int
	// idleFor closes a connection idle (between requests, or an HTTP/2
	// connection without streams) this long; 0 leaves it to the server.
	// A sweep once a second does it, instead of the server's timer per
	// connection, which Go's runtime keeps (with the connection's
	// buffers) until it would have fired even after the connection
	// ended: 90 MB a minute after an attack (issue 32).
	idleFor time.Duration
	log     *zap.Logger

	mu       sync.Mutex
	bySource map[netip.Addr]map[*limitedConn]struct{}
	total    int
	seq      uint64 // orders connections by accept
	lastLog  time.Time
	sweeping bool

	// epoch is what idleAt counts from: time.Since reads the monotonic
	// clock alone, time.Now the wall clock too (half the cost, on every
	// request's end).
	epoch time.Time

	idleSeq atomic.Uint64 // orders idle connections, oldest first
	refused atomic.Uint64
	evicted atomic.Uint64 // idle keep-alives closed for a new connection
	taken   atomic.Uint64 // connections in use closed for another source's
}

func newConnLimiter(max, maxTotal int, idleFor time.Duration, log *zap.Logger) *connLimiter {
	return &connLimiter{max: max, maxTotal: maxTotal, idleFor: idleFor, log: log, epoch: time.Now(), bySource: map[netip.Addr]map[*limitedConn]struct{}{}}
}

// limitedConn is an accepted connection counted against its source.
type limitedConn struct {
	net.Conn
	l        *connLimiter
	src      netip.Addr
	accepted uint64
	idle     atomic.Uint64 // 0 while in use or before its first request; else its place among idle ones
	idleAt   atomic.Int64  // when it went idle, nanoseconds since its limiter's epoch (at least 1); 0 while in use
	once     sync.Once
	gate     *admission.Conn // its admission slot (the front's connContext)
}

func (c *limitedConn) Close() error {
	c.once.Do(func() { c.l.release(c) })
	return c.Conn.Close()
}

// CloseWrite half-closes a TCP connection (net/http does it before the
// last Close when a client's body was left unread, so the client reads the
// answer rather than a reset) and gives its place back: the server closes
// it within half a second whatever the client does.
func (c *limitedConn) CloseWrite() error {
	c.once.Do(func() { c.l.release(c) })
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// limitedListener admits connections through a connLimiter.
type limitedListener struct {
	net.Listener
	l *connLimiter
}

func (ll limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if lc := ll.l.admit(c); lc != nil {
			return lc, nil
		}
	}
}

// wrap returns ln limited; with no cap and no idle bound, ln itself.
func (l *connLimiter) wrap(ln net.Listener) net.Listener {
	if !l.on() {
		return ln
	}
	return limitedListener{Listener: ln, l: l}
}

// on reports whether the limiter counts connections at all.
func (l *connLimiter) on() bool { return l.max > 0 || l.maxTotal > 0 || l.idleFor > 0 }

// sweepIdle closes the connections idle for idleFor, once a second, until
// no connection is left; admit starts it again. l.mu is held when it is
// started.
func (l *connLimiter) sweepIdle() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var idle []*limitedConn
	for range tick.C {
		idle = idle[:0]
		now := int64(time.Since(l.epoch))
		l.mu.Lock()
		if l.total == 0 {
			l.sweeping = false
			l.mu.Unlock()
			return
		}
		for _, set := range l.bySource {
			for lc := range set {
				if at := lc.idleAt.Load(); at != 0 && time.Duration(now-at) > l.idleFor {
					idle = append(idle, lc)
				}
			}
		}
		l.mu.Unlock()
		for _, lc := range idle {
			lc.Close()
		}
	}
}

// source is what a connection is counted against.
func source(a net.Addr) netip.Addr {
	if _, ok := a.(*net.TCPAddr); !ok {
		return netip.Addr{}
	}
	return admission.SourceOf(a.String())
}

// oldest returns the longest idle connection of set, else (any) its
// oldest; nil when set is empty, or has no idle one and !any.
func oldest(set map[*limitedConn]struct{}, any bool) *limitedConn {
	var idle, old *limitedConn
	var idleSeq uint64
	for lc := range set {
		if seq := lc.idle.Load(); seq != 0 && (idle == nil || seq < idleSeq) {
			idle, idleSeq = lc, seq
		}
		if old == nil || lc.accepted < old.accepted {
			old = lc
		}
	}
	if idle != nil || !any {
		return idle
	}
	return old
}

// admit counts c against its source, or closes it (nil) when the source
// is at its cap, or all are at the total, with no connection to give way.
func (l *connLimiter) admit(c net.Conn) *limitedConn {
	src := source(c.RemoteAddr())
	l.mu.Lock()
	set := l.bySource[src]
	var victim *limitedConn
	why := ""
	switch {
	case l.max > 0 && len(set) >= l.max:
		if victim = oldest(set, false); victim == nil {
			why = "its source holds as many as it may (--redfish-max-conns-per-source)"
		}
	case l.maxTotal > 0 && l.total >= l.maxTotal:
		var big map[*limitedConn]struct{}
		for _, s := range l.bySource {
			if len(s) > len(big) {
				big = s
			}
		}
		if len(big) > len(set)+1 {
			victim = oldest(big, true)
		} else if victim = oldest(set, false); victim == nil {
			why = "every source together holds as many as they may (--redfish-max-conns), and this one as many as any"
		}
	}
	if why != "" {
		logNow := time.Since(l.lastLog) > 10*time.Second
		if logNow {
			l.lastLog = time.Now()
		}
		l.mu.Unlock()
		n := l.refused.Add(1)
		c.Close()
		if logNow {
			l.log.Warn("Redfish connection refused: "+why,
				zap.String("source", src.String()), zap.Int("per source", l.max), zap.Int("total", l.maxTotal), zap.Uint64("refused so far", n))
		}
		return nil
	}
	busy := false
	if victim != nil {
		busy = victim.idle.Load() == 0
		l.forgetLocked(victim)
		victim.once.Do(func() {}) // released here, under the lock
	}
	set = l.bySource[src]
	if set == nil {
		set = map[*limitedConn]struct{}{}
		l.bySource[src] = set
	}
	l.seq++
	lc := &limitedConn{Conn: c, l: l, src: src, accepted: l.seq}
	set[lc] = struct{}{}
	l.total++
	if l.idleFor > 0 && !l.sweeping {
		l.sweeping = true
		go l.sweepIdle()
	}
	l.mu.Unlock()
	if victim != nil {
		if busy {
			l.taken.Add(1)
		} else {
			l.evicted.Add(1)
		}
		victim.Conn.Close()
	}
	return lc
}

// held is how many connections all sources hold.
func (l *connLimiter) held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

// forgetLocked removes c from the counts; l.mu is held.
func (l *connLimiter) forgetLocked(c *limitedConn) {
	if set := l.bySource[c.src]; set != nil {
		if _, ok := set[c]; ok {
			delete(set, c)
			l.total--
		}
		if len(set) == 0 {
			delete(l.bySource, c.src)
		}
	}
}

func (l *connLimiter) release(c *limitedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.forgetLocked(c)
}

// limitedOf is the limiter's connection under c (a TLS connection's
// through NetConn); nil when the limiter does not count c.
func limitedOf(c net.Conn) *limitedConn {
	if nc, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = nc.NetConn()
	}
	lc, _ := c.(*limitedConn)
	return lc
}

// connState is a server's ConnState hook for the limiter alone (the
// front's also tells the gate: Front.connState).
func (l *connLimiter) connState(c net.Conn, st http.ConnState) {
	if lc := limitedOf(c); lc != nil {
		l.mark(lc, st)
	}
}

// mark marks a connection idle between requests, in use during one.
func (l *connLimiter) mark(lc *limitedConn, st http.ConnState) {
	switch st {
	case http.StateIdle:
		lc.idle.Store(l.idleSeq.Add(1))
		lc.idleAt.Store(max(int64(time.Since(l.epoch)), 1))
	case http.StateActive:
		lc.idle.Store(0)
		lc.idleAt.Store(0)
	}
}
