package accounts

import (
	"net/netip"
	"slices"
	"time"
)

// The lockout (AccountService's AccountLockoutThreshold and
// AccountLockoutDuration), per source.
//
// A lock that held an account for everyone let anyone who can reach the
// BMC keep about 60 accounts locked from one address at its throttled rate
// (issue 32), and ended their sessions. So failures are counted per user
// name and source (an address, an IPv6 one's /64): Threshold failures from
// one source lock the name for that source only, for Duration; other
// sources log in as before. Once lockGlobalSources sources hold a lock on
// one name at the same time (a guesser spread over addresses), the name is
// locked for every source until fewer do. A lock refuses logins, never
// what is already logged in (sessions, verified credentials).
//
// Unknown names are counted the same way, so a lock says nothing of
// whether a name exists. The table is bounded: at most lockNames names,
// lockSourcesPerName sources each, the least recently failed going first
// (a name or source not locked before one that is).

const (
	lockNames          = 4096
	lockSourcesPerName = 16
	lockGlobalSources  = 4
	lockNameBytes      = 64 // names longer than this are counted by their first 64 bytes (lockName)
)

type lockout struct {
	names map[string]*nameLocks
}

type nameLocks struct {
	used time.Time
	src  map[netip.Prefix]*srcLock
}

type srcLock struct {
	failures int
	until    time.Time
	used     time.Time
}

// lockKey bounds a key of the table: a name cut by lockName, after the
// system it belongs to.
func lockKey(name string) string {
	if len(name) > 2*lockNameBytes {
		return name[:2*lockNameBytes]
	}
	return name
}

// until returns when name stops being locked for src; zero when it is not.
func (l *lockout) until(name, src string, now time.Time) time.Time {
	n := l.names[lockKey(name)]
	if n == nil {
		return time.Time{}
	}
	var out time.Time
	if key, _, ok := sourceOf(src); ok {
		if s := n.src[key]; s != nil && now.Before(s.until) {
			out = s.until
		}
	}
	if g := n.global(now); g.After(out) {
		out = g
	}
	return out
}

// global returns when the name stops being locked for every source: the
// lockGlobalSources-th latest end among the sources locked now.
func (n *nameLocks) global(now time.Time) time.Time {
	var ends []time.Time
	for _, s := range n.src {
		if now.Before(s.until) {
			ends = append(ends, s.until)
		}
	}
	if len(ends) < lockGlobalSources {
		return time.Time{}
	}
	slices.SortFunc(ends, func(a, b time.Time) int { return b.Compare(a) })
	return ends[lockGlobalSources-1]
}

// any reports whether name is locked for some source.
func (l *lockout) any(name string, now time.Time) bool {
	n := l.names[lockKey(name)]
	if n == nil {
		return false
	}
	for _, s := range n.src {
		if now.Before(s.until) {
			return true
		}
	}
	return false
}

// fail counts a failure of name from src under policy p; true when it
// locked the name for src.
func (l *lockout) fail(name, src string, p Policy, now time.Time) bool {
	if p.Threshold <= 0 || p.Duration <= 0 {
		return false
	}
	key, _, ok := sourceOf(src)
	if !ok {
		return false
	}
	if l.names == nil {
		l.names = map[string]*nameLocks{}
	}
	k := lockKey(name)
	n := l.names[k]
	if n == nil {
		if len(l.names) >= lockNames {
			l.evictName(now)
		}
		n = &nameLocks{src: map[netip.Prefix]*srcLock{}}
		l.names[k] = n
	}
	n.used = now
	s := n.src[key]
	if s == nil {
		if len(n.src) >= lockSourcesPerName {
			n.evictSource(now)
		}
		s = &srcLock{}
		n.src[key] = s
	}
	s.used = now
	if now.Before(s.until) {
		return false // locked already: nothing more to count
	}
	s.failures++
	if s.failures < p.Threshold {
		return false
	}
	s.failures, s.until = 0, now.Add(p.Duration)
	return true
}

// succeed forgets the failures of name from src (a login that worked).
func (l *lockout) succeed(name, src string) {
	n := l.names[lockKey(name)]
	if n == nil {
		return
	}
	if key, _, ok := sourceOf(src); ok {
		if s := n.src[key]; s != nil && s.until.IsZero() {
			delete(n.src, key)
		}
	}
	if len(n.src) == 0 {
		delete(l.names, lockKey(name))
	}
}

// clear unlocks name for every source.
func (l *lockout) clear(name string) { delete(l.names, lockKey(name)) }

// evictName forgets the least recently failed name, one not locked first.
func (l *lockout) evictName(now time.Time) {
	var victim string
	var vn *nameLocks
	for k, n := range l.names {
		if vn == nil || better(l.any(k, now), n.used, l.any(victim, now), vn.used) {
			victim, vn = k, n
		}
	}
	delete(l.names, victim)
}

// evictSource forgets the least recently failed source, one not locked
// first.
func (n *nameLocks) evictSource(now time.Time) {
	var victim netip.Prefix
	var vs *srcLock
	for k, s := range n.src {
		if vs == nil || better(now.Before(s.until), s.used, now.Before(vs.until), vs.used) {
			victim, vs = k, s
		}
	}
	delete(n.src, victim)
}

// better reports whether a candidate (locked, used) is a better victim
// than the current one: not locked before locked, then older.
func better(locked bool, used time.Time, curLocked bool, curUsed time.Time) bool {
	if locked != curLocked {
		return !locked
	}
	return used.Before(curUsed)
}
