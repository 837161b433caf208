package accounts

import (
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Throttle slows password guessing per source address, on both faces: each
// source may fail Burst logins at once, and earns one more try every Every
// after that. A source over its budget is told to wait (Redfish 429 with
// Retry-After, IPMI packets unanswered) before its credentials are even
// checked, so guessing costs the guesser time, not the daemon CPU.
//
// Only failures count: a client that logs in is never slowed. Failures are
// counted where the source is proven (a TCP peer, an IPMI RAKP Message 3
// answering our Message 2), so a spoofed UDP source cannot lock another
// host out. Sources are IP addresses (IPv6 by /64); at most maxSources are
// tracked, and a full table forgets the sources whose budget is whole first.
type Throttle struct {
	Burst int
	Every time.Duration

	mu  sync.Mutex
	src map[netip.Prefix]*bucket
	now func() time.Time
}

type bucket struct {
	tokens float64
	at     time.Time // tokens counted up to here
	failed time.Time // the last failure
}

const maxSources = 4096

// NewThrottle returns a throttle allowing burst failures per source, then
// one per every.
func NewThrottle(burst int, every time.Duration) *Throttle {
	return &Throttle{Burst: burst, Every: every, src: map[netip.Prefix]*bucket{}, now: time.Now}
}

// sourceOf names a source: the IP of addr ("ip:port" or "ip"), IPv6 cut
// to its /64 (one host commonly holds a whole /64).
func sourceOf(addr string) (netip.Prefix, bool) {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Prefix{}, false
	}
	ip = ip.Unmap()
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits)
	return p, true
}

// refill brings b's tokens up to now. Callers hold t.mu.
func (t *Throttle) refill(b *bucket, now time.Time) {
	if t.Every > 0 {
		b.tokens += float64(now.Sub(b.at)) / float64(t.Every)
	}
	if b.tokens > float64(t.Burst) {
		b.tokens = float64(t.Burst)
	}
	b.at = now
}

// Wait says how long the source at addr must wait before its next login
// may be checked; zero when it may go ahead. A nil throttle never waits.
func (t *Throttle) Wait(addr string) time.Duration {
	if t == nil {
		return 0
	}
	key, ok := sourceOf(addr)
	if !ok {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.src[key]
	if b == nil {
		return 0
	}
	now := t.now()
	t.refill(b, now)
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration((1 - b.tokens) * float64(t.Every))
}

// Failed counts a failed login from addr.
func (t *Throttle) Failed(addr string) {
	t.update(addr, true, func(b *bucket, now time.Time) {
		b.failed = now
		b.tokens = max(b.tokens-1, 0)
	})
}

// Refund gives back one failure of addr: a login that was charged when it
// began (IPMI's RAKP Message 1) and then succeeded.
func (t *Throttle) Refund(addr string) {
	t.update(addr, false, func(b *bucket, _ time.Time) {
		b.tokens = min(b.tokens+1, float64(t.Burst))
	})
}

// update runs fn on addr's bucket, brought up to now; a source not tracked
// yet is added when add is true and left alone otherwise.
func (t *Throttle) update(addr string, add bool, fn func(*bucket, time.Time)) {
	if t == nil {
		return
	}
	key, ok := sourceOf(addr)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	b := t.src[key]
	if b == nil {
		if !add {
			return
		}
		if len(t.src) >= maxSources {
			t.forgetLocked(now)
		}
		b = &bucket{tokens: float64(t.Burst), at: now}
		t.src[key] = b
	}
	t.refill(b, now)
	fn(b, now)
}

// forgetLocked makes room in a full table: sources whose budget is whole
// again go first, then, if none is, the one that failed longest ago.
func (t *Throttle) forgetLocked(now time.Time) {
	var oldest netip.Prefix
	var at time.Time
	for k, b := range t.src {
		t.refill(b, now)
		if b.tokens >= float64(t.Burst) {
			delete(t.src, k)
			continue
		}
		if at.IsZero() || b.failed.Before(at) {
			oldest, at = k, b.failed
		}
	}
	if len(t.src) >= maxSources {
		delete(t.src, oldest)
	}
}

// maxLogName is how much of a refused user name a log line carries.
const maxLogName = 64

// LogName is a user name as logs show it: cut to maxLogName bytes, so that
// a refused login costs a log line of bounded size on either face.
func LogName(user string) string {
	if len(user) <= maxLogName {
		return user
	}
	return strings.ToValidUTF8(user[:maxLogName], "") + "…"
}

// Sources is how many sources the throttle tracks (tests read it).
func (t *Throttle) Sources() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.src)
}
