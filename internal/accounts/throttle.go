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
// host out.
//
// Sources are IP addresses, IPv6 by /64 (one host commonly holds a whole
// /64). One network often holds a whole /48, so once rollupAt /64s of one
// /48 have failed, every further failure from that /48 is charged to the
// /48 as well, and a source waits for whichever of its /64 and its /48
// waits longer: spreading guesses over a /52's 4,096 /64s buys a /48's
// budget, not 4,096 of them.
//
// At most maxSources buckets are kept. A full table forgets, in this order,
// sources whose budget is whole again, then the one that failed longest ago
// among those not blocked now, and only when every source is blocked the
// one whose wait ends first: filling the table with fresh sources cannot
// wipe out the budget of a source under attack (issue 25: it was forgotten
// after 4,200 other sources).
type Throttle struct {
	Burst int
	Every time.Duration

	mu  sync.Mutex
	src map[netip.Prefix]*bucket
	// wide counts the /64 buckets kept in each /48 (rollupAt or more: its
	// failures are charged to the /48 too).
	wide map[netip.Prefix]int
	now  func() time.Time
}

type bucket struct {
	tokens float64
	at     time.Time // tokens counted up to here
	failed time.Time // the last failure
}

const (
	maxSources = 4096
	// rollupAt is how many failing /64s of one /48 make failures count
	// against the whole /48.
	rollupAt = 4
)

// NewThrottle returns a throttle allowing burst failures per source, then
// one per every.
func NewThrottle(burst int, every time.Duration) *Throttle {
	return &Throttle{Burst: burst, Every: every, src: map[netip.Prefix]*bucket{}, wide: map[netip.Prefix]int{}, now: time.Now}
}

// sourceOf names a source: the IP of addr ("ip:port" or "ip"), IPv6 cut
// to its /64, and for IPv6 the /48 that holds it (invalid for IPv4).
func sourceOf(addr string) (key, wide netip.Prefix, ok bool) {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Prefix{}, netip.Prefix{}, false
	}
	ip = ip.Unmap()
	if !ip.Is6() {
		key, _ = ip.Prefix(32)
		return key, netip.Prefix{}, true
	}
	key, _ = ip.Prefix(64)
	wide, _ = ip.Prefix(48)
	return key, wide, true
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

// waitLocked is how long b's source must wait; zero for no bucket.
func (t *Throttle) waitLocked(b *bucket, now time.Time) time.Duration {
	if b == nil {
		return 0
	}
	t.refill(b, now)
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration((1 - b.tokens) * float64(t.Every))
}

// Wait says how long the source at addr must wait before its next login
// may be checked; zero when it may go ahead. A nil throttle never waits.
func (t *Throttle) Wait(addr string) time.Duration {
	if t == nil {
		return 0
	}
	key, wide, ok := sourceOf(addr)
	if !ok {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	w := t.waitLocked(t.src[key], now)
	if wide.IsValid() {
		w = max(w, t.waitLocked(t.src[wide], now))
	}
	return w
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

// update runs fn on addr's bucket, brought up to now, and on its /48's
// when that one is rolled up; a source not tracked yet is added when add
// is true and left alone otherwise.
func (t *Throttle) update(addr string, add bool, fn func(*bucket, time.Time)) {
	if t == nil {
		return
	}
	key, wide, ok := sourceOf(addr)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if b := t.bucketLocked(key, add, now); b != nil {
		t.refill(b, now)
		fn(b, now)
	}
	if wide.IsValid() && t.wide[wide] >= rollupAt {
		if b := t.bucketLocked(wide, add, now); b != nil {
			t.refill(b, now)
			fn(b, now)
		}
	}
}

// bucketLocked returns k's bucket, making it (room first) when add is set.
func (t *Throttle) bucketLocked(k netip.Prefix, add bool, now time.Time) *bucket {
	if b := t.src[k]; b != nil || !add {
		return b
	}
	if len(t.src) >= maxSources {
		t.forgetLocked(now)
	}
	b := &bucket{tokens: float64(t.Burst), at: now}
	t.src[k] = b
	if k.Addr().Is6() && k.Bits() == 64 {
		w, _ := k.Addr().Prefix(48)
		t.wide[w]++
	}
	return b
}

// deleteLocked forgets k's bucket.
func (t *Throttle) deleteLocked(k netip.Prefix) {
	delete(t.src, k)
	if k.Addr().Is6() && k.Bits() == 64 {
		w, _ := k.Addr().Prefix(48)
		if t.wide[w]--; t.wide[w] <= 0 {
			delete(t.wide, w)
		}
	}
}

// forgetLocked makes room in a full table: sources whose budget is whole
// again go first; if none is, the one that failed longest ago among those
// not blocked now; if every source is blocked, the one whose wait ends
// first. A source under attack is the last thing forgotten.
func (t *Throttle) forgetLocked(now time.Time) {
	var idle, blocked netip.Prefix
	var idleAt time.Time
	var soonest time.Duration
	for k, b := range t.src {
		w := t.waitLocked(b, now)
		switch {
		case b.tokens >= float64(t.Burst):
			t.deleteLocked(k)
		case w == 0:
			if !idle.IsValid() || b.failed.Before(idleAt) {
				idle, idleAt = k, b.failed
			}
		default:
			if !blocked.IsValid() || w < soonest {
				blocked, soonest = k, w
			}
		}
	}
	if len(t.src) < maxSources {
		return
	}
	if idle.IsValid() {
		t.deleteLocked(idle)
	} else {
		t.deleteLocked(blocked)
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
