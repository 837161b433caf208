package vbmcd

import (
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// defaultMaxConnsPerSource is --redfish-max-conns-per-source's default. One
// client may talk to many BMCs through one vbmcd (Ironic's conductor holds
// a connection or two per node), so idle keep-alives give way to new
// connections; what the cap bounds is connections in use or not yet sending
// a request: 5,000 half-open ones from one source took 29 MB and slowed
// every other client's answer to 943 ms (issue 25).
const defaultMaxConnsPerSource = 128

// connLimiter caps the connections one source holds open on a listener. A
// source is an address, an IPv6 one's /64 (what one host is usually given).
// When a source is at the cap, a new connection closes the source's
// longest idle keep-alive (a client reconnects at its next request, as
// after the idle timeout); when none is idle, the new connection is closed
// at accept, before a byte of it is read.
type connLimiter struct {
	max int
	log *zap.Logger

	mu       sync.Mutex
	bySource map[netip.Addr]map[*limitedConn]struct{}
	lastLog  time.Time

	idleSeq atomic.Uint64 // orders idle connections, oldest first
	refused atomic.Uint64
	evicted atomic.Uint64
}

func newConnLimiter(max int, log *zap.Logger) *connLimiter {
	return &connLimiter{max: max, log: log, bySource: map[netip.Addr]map[*limitedConn]struct{}{}}
}

// limitedConn is an accepted connection counted against its source.
type limitedConn struct {
	net.Conn
	l    *connLimiter
	src  netip.Addr
	idle atomic.Uint64 // 0 while in use or before its first request; else its place among idle ones
	once sync.Once
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

// wrap returns ln limited; with no cap, ln itself.
func (l *connLimiter) wrap(ln net.Listener) net.Listener {
	if l.max <= 0 {
		return ln
	}
	return limitedListener{Listener: ln, l: l}
}

// source is what a connection is counted against.
func source(a net.Addr) netip.Addr {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}
	}
	ip := ta.AddrPort().Addr().Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.Addr()
	}
	return ip
}

// admit counts c against its source, or closes it (nil) when the source is
// at the cap with no idle connection to give way.
func (l *connLimiter) admit(c net.Conn) *limitedConn {
	src := source(c.RemoteAddr())
	l.mu.Lock()
	set := l.bySource[src]
	var victim *limitedConn
	if len(set) >= l.max {
		var oldest uint64
		for lc := range set {
			if seq := lc.idle.Load(); seq != 0 && (victim == nil || seq < oldest) {
				victim, oldest = lc, seq
			}
		}
		if victim == nil {
			logNow := time.Since(l.lastLog) > 10*time.Second
			if logNow {
				l.lastLog = time.Now()
			}
			l.mu.Unlock()
			n := l.refused.Add(1)
			c.Close()
			if logNow {
				l.log.Warn("Redfish connection refused: its source holds as many as it may (--redfish-max-conns-per-source)",
					zap.String("source", src.String()), zap.Int("limit", l.max), zap.Uint64("refused so far", n))
			}
			return nil
		}
		delete(set, victim)
		victim.once.Do(func() {}) // released here, under the lock
	}
	if set == nil {
		set = map[*limitedConn]struct{}{}
		l.bySource[src] = set
	}
	lc := &limitedConn{Conn: c, l: l, src: src}
	set[lc] = struct{}{}
	l.mu.Unlock()
	if victim != nil {
		l.evicted.Add(1)
		victim.Conn.Close()
	}
	return lc
}

func (l *connLimiter) release(c *limitedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if set := l.bySource[c.src]; set != nil {
		delete(set, c)
		if len(set) == 0 {
			delete(l.bySource, c.src)
		}
	}
}

// connState is the server's ConnState hook: it marks connections idle
// between requests. A TLS connection is found through NetConn.
func (l *connLimiter) connState(c net.Conn, st http.ConnState) {
	if nc, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = nc.NetConn()
	}
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	switch st {
	case http.StateIdle:
		lc.idle.Store(l.idleSeq.Add(1))
	case http.StateActive:
		lc.idle.Store(0)
	}
}
