package redfish

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/accounts"
	"github.com/bmlab/bmlab/internal/lograte"
	"github.com/bmlab/bmlab/internal/machine"
)

// principal is who a request acts as: the service-wide user (all), or a
// user known by one or more machines' own credentials, who reaches those
// machines only.
type principal struct {
	all  bool
	user string
	pass string // kept to check machines' credentials, which are stored as given

	// priv is what the principal may do (a role's privileges); routes
	// check it with one AND.
	priv accounts.Privilege
	// acct is the ID of a stored account ("" for the bootstrap user and
	// machines' own users); system the machine such an account is bound
	// to; gen the store generation it was verified at.
	acct   string
	role   accounts.Role
	system string
	gen    uint64

	// only, when set, is the one system of the BMC the principal came in
	// through (a per-address listener, AtBMC): whatever else it may reach,
	// it reaches that system only, and sees that BMC's accounts, sessions,
	// subscriptions and tasks only. Its authority over service-wide
	// settings (all) is left as it was.
	only string

	// id names who the principal is, for matching sessions to their owner
	// and counting them: a stored account by its ID (a deleted and re-made
	// user of the same name is someone else), the bootstrap user by name,
	// a machine's user by name and password (two machines may each have an
	// "admin" with different passwords).
	id string
}

// fromAccount is the principal of a stored account.
func fromAccount(a accounts.Account, gen uint64) *principal {
	return &principal{all: a.System == "", user: a.UserName, priv: a.Role.Privileges(), acct: a.ID, role: a.Role, system: a.System, gen: gen,
		id: "account/" + a.ID}
}

// stale reports whether p came from the account store and the store has
// changed since (a password, role, lock or deletion may apply to it).
func (s *Server) stale(p *principal) bool {
	return p.acct != "" && s.accounts != nil && p.gen != s.accounts.Generation()
}

// canAccess reports whether p may reach machine m (its System, Manager,
// Chassis and their sub-resources).
func (p *principal) canAccess(m *machine.Machine) bool {
	if p.only != "" && m.ID != p.only {
		return false
	}
	if p.all {
		return true
	}
	if p.acct != "" {
		return p.system == m.ID
	}
	for _, c := range m.Settings.Credentials {
		okUser := equalConst(c.Username, p.user)
		okPass := equalConst(c.Password, p.pass) // compared even when the user differs
		if okUser && okPass {
			return true
		}
	}
	return false
}

// everywhere reports whether p sees every system: the service-wide user
// or an account bound to none, on the service's own listener.
func (p *principal) everywhere() bool { return p.all && p.only == "" }

// at narrows p to the system of the BMC a request came in through (c.bmc),
// as a server's own BMC knows that server only; nil when p may not reach it.
func (s *Server) at(c *call, p *principal) *principal {
	if c.bmc == "" || p.only == c.bmc {
		return p
	}
	q := *p
	q.only = c.bmc
	if p.all {
		// Reaches every system: no need to read this one (a request
		// for it that is gone finds no resource).
		return &q
	}
	m, err := s.svc.Get(c.bmc)
	if err != nil || m.ID != c.bmc || !q.canAccess(m) {
		return nil
	}
	return &q
}

// equalConst compares in time that depends on the lengths only.
func equalConst(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	var v byte
	for i := 0; i < len(a); i++ {
		v |= a[i] ^ b[i]
	}
	return v == 0
}

func sum(s string) [32]byte { return sha256.Sum256([]byte(s)) }

// verify checks a user name and password from remote (the client's
// address), at the BMC of system bmc ("" for the service's listener: user
// names are per BMC, and a name several BMCs' accounts hold is unknown
// there), against the service credentials, the htpasswd file's users, the
// stored accounts and every machine's own; nil when none knows them, with why when a stored account
// refused them (disabled; a *accounts.LockedError when the name is locked
// for remote).
func (s *Server) verify(bmc, user, pass, remote string) (*principal, error) {
	if s.admin != nil {
		u, p := sum(user), sum(pass)
		okU := subtle.ConstantTimeCompare(u[:], s.adminUser[:])
		okP := subtle.ConstantTimeCompare(p[:], s.adminPass[:])
		if okU&okP == 1 {
			return s.admin, nil
		}
	}
	if s.htpasswd != nil && s.htpasswd.Verify(user, pass) {
		return &principal{all: true, user: user, priv: accounts.AllPrivileges, role: accounts.Administrator, id: "htpasswd/" + user}, nil
	}
	var locked error
	if s.accounts != nil {
		gen := s.accounts.Generation()
		a, found, err := s.accounts.Verify(bmc, user, pass, remote)
		if found {
			if err != nil {
				return nil, err
			}
			return fromAccount(a, gen), nil
		}
		if errors.Is(err, accounts.ErrLocked) {
			// An unknown name locks as an account's does: a machine's
			// own user may still match below.
			locked = err
		}
	}
	ps := sum(pass)
	cand := &principal{user: user, pass: pass, priv: accounts.AllPrivileges,
		id: "machine/" + hex.EncodeToString(ps[:8]) + "/" + user}
	for _, m := range s.svc.List() {
		if cand.canAccess(m) {
			return cand, nil
		}
	}
	return nil, locked
}

// refusal is the 401 of a refused login: a name locked for the client's
// address says so and until when (the client's own failures locked it,
// and unknown names lock alike, so this tells nothing of which names
// exist); anything else is "not accepted".
func refusal(why error) *apiError {
	var le *accounts.LockedError
	if errors.As(why, &le) {
		return unauthorized(fmt.Sprintf("The account is locked for logins from this address after repeated failures, until %s; wait, or ask an administrator to unlock it.",
			le.Until.UTC().Format(time.RFC3339)))
	}
	return unauthorized("The credentials were not accepted.")
}

// slowed refuses to check credentials from a source that failed too often
// lately: 429 with the wait in Retry-After.
func (s *Server) slowed(c *call) *apiError {
	d := s.throttle.Wait(c.r.RemoteAddr)
	if d <= 0 {
		return nil
	}
	secs := strconv.Itoa(int((d + time.Second - 1) / time.Second))
	host := hostOf(c.r.RemoteAddr)
	s.refusals.Refused(host+" (throttled)", "login refused: too many failed logins from this address (429)",
		zap.String("remote", c.r.RemoteAddr), zap.Duration("wait", d))
	return newError(http.StatusTooManyRequests, MsgServiceTemporarilyUnavailable, secs).
		with("Too many failed logins from this address.").withHeader("Retry-After", secs)
}

// refused logs a refused login at the edge and counts it against its source.
func (s *Server) refused(c *call, user string, why error) {
	s.throttle.Failed(c.r.RemoteAddr)
	s.metrics.LoginFailed("redfish")
	fs := []zap.Field{zap.String("user", accounts.LogName(user)), zap.String("remote", c.r.RemoteAddr)}
	if why != nil {
		fs = append(fs, zap.Error(why))
	}
	s.refusals.Refused(hostOf(c.r.RemoteAddr)+" "+accounts.LogName(user), "login refused", fs...)
}

// hostOf is the address of a remote "host:port".
func hostOf(remote string) string {
	if h, _, err := net.SplitHostPort(remote); err == nil {
		return h
	}
	return remote
}

// Refusals is the service's rate-limited log of refused logins, which the
// web console, sharing its sessions, logs its own refusals to.
func (s *Server) Refusals() *lograte.Log { return s.refusals }

// basicCache remembers who verified Basic credentials belong to, so a
// request with known credentials costs no bcrypt and, in the usual
// spelling, one map lookup.
//
// Entries are keyed on the decoded user name and a salted SHA-256 of the
// password (byCred), so padding or re-spelling a header makes no new entry
// and keeps no password. A second index (byHeader) maps the canonical
// spelling of verified credentials ("Basic " and the standard base64 of
// user:password, see canonicalBasic) to the same principal: the hot path
// (a GET is about 300 ns) cannot afford decoding and hashing (about
// 100 ns) on every request. Only verified credentials are kept, keys are at
// most maxAuthHeader bytes and each index holds at most basicCacheSize
// entries (an arbitrary one goes when full), so the cache holds at most
// about 1 MiB whatever clients send. Entries of stored accounts are checked
// against the store's generation on use (Server.stale).
type basicCache struct {
	mu       sync.RWMutex
	byHeader map[headerKey]*principal
	byCred   map[credKey]*principal
	salt     [32]byte

	// verifies counts Basic requests that needed a full check of their
	// credentials (tests read it).
	verifies atomic.Int64

	// flights are the checks under way, by credentials: requests with
	// the same credentials wait for the one check (a bcrypt comparison,
	// 100 ms or more) instead of making their own. 750 HTTP/2 streams
	// with new credentials made 750 comparisons and stalled the daemon
	// for a minute (issue 32).
	fmu     sync.Mutex
	flights map[flightKey]*flight
}

// flightKey names a check: the credentials and the client's address (a
// lock holds for one source only).
type flightKey struct {
	credKey
	src string
}

// flight is one check of credentials, shared by the requests that came
// while it ran.
type flight struct {
	done chan struct{}
	p    *principal
	why  error
}

// once runs check for k, or waits for the one running; first is false
// for a request that waited.
func (b *basicCache) once(ck credKey, remote string, check func() (*principal, error)) (p *principal, why error, first bool) {
	k := flightKey{ck, remote}
	if host, _, err := net.SplitHostPort(remote); err == nil {
		k.src = host
	}
	b.fmu.Lock()
	if f := b.flights[k]; f != nil {
		b.fmu.Unlock()
		<-f.done
		return f.p, f.why, false
	}
	if b.flights == nil {
		b.flights = map[flightKey]*flight{}
	}
	f := &flight{done: make(chan struct{})}
	b.flights[k] = f
	b.fmu.Unlock()
	defer func() {
		b.fmu.Lock()
		delete(b.flights, k)
		b.fmu.Unlock()
		close(f.done)
	}()
	f.p, f.why = check()
	return f.p, f.why, true
}

// credKey names one pair of credentials without the password, at the BMC
// of system bmc ("" for the service's listener): user names are per BMC,
// so the same credentials may be two accounts at two BMCs.
type credKey struct {
	bmc  string
	user string
	pass [32]byte // SHA-256 of salt and password
}

// headerKey is an Authorization header as one BMC got it.
type headerKey struct {
	bmc string
	h   string
}

const (
	basicCacheSize = 1024
	// maxAuthHeader bounds an Authorization header; longer ones are refused
	// before they are decoded. Stored accounts' names and passwords take at
	// most 16 and 20 bytes (IPMI's limits).
	maxAuthHeader = 512
)

func (b *basicCache) init() {
	b.byHeader, b.byCred = map[headerKey]*principal{}, map[credKey]*principal{}
	if _, err := rand.Read(b.salt[:]); err != nil {
		panic("redfish: no randomness: " + err.Error())
	}
}

func (b *basicCache) key(bmc, user, pass string) credKey {
	h := sha256.New()
	h.Write(b.salt[:])
	h.Write([]byte(pass))
	k := credKey{bmc: bmc, user: user}
	h.Sum(k.pass[:0])
	return k
}

// get is the hot path: a canonical header seen before at the BMC of
// system bmc.
func (b *basicCache) get(bmc, h string) *principal {
	b.mu.RLock()
	p := b.byHeader[headerKey{bmc, h}]
	b.mu.RUnlock()
	return p
}

func (b *basicCache) getCred(k credKey) *principal {
	b.mu.RLock()
	p := b.byCred[k]
	b.mu.RUnlock()
	return p
}

// put records p for k and, when h is the canonical spelling, for h.
func (b *basicCache) put(k credKey, h string, canonical bool, p *principal) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.byCred[k]; !ok && len(b.byCred) >= basicCacheSize {
		for old := range b.byCred {
			delete(b.byCred, old)
			break
		}
	}
	b.byCred[k] = p
	if !canonical {
		return
	}
	hk := headerKey{k.bmc, h}
	if _, ok := b.byHeader[hk]; !ok && len(b.byHeader) >= basicCacheSize {
		for old := range b.byHeader {
			delete(b.byHeader, old)
			break
		}
	}
	b.byHeader[hk] = p
}

// size reports how many entries each index holds.
func (b *basicCache) size() (headers, creds int) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return len(b.byHeader), len(b.byCred)
}

// canonicalBasic reports whether h is the one spelling of its credentials
// the cache keys on: "Basic " then the padded standard base64 of
// user:password, nothing else (RFC 7617 §2).
func canonicalBasic(h, user, pass string) bool {
	const prefix = "Basic "
	n := len(user) + 1 + len(pass)
	if len(h) != len(prefix)+base64.StdEncoding.EncodedLen(n) || h[:len(prefix)] != prefix {
		return false
	}
	return base64.StdEncoding.EncodeToString([]byte(user+":"+pass)) == h[len(prefix):]
}

func unauthorized(detail string) *apiError {
	return newError(http.StatusUnauthorized, MsgNoValidSession).with(detail).
		withHeader("WWW-Authenticate", hdrChallenge)
}

// authenticate sets c.who from an X-Auth-Token or Basic credentials.
func (s *Server) authenticate(c *call) *apiError {
	h := c.r.Header
	if tok := h["X-Auth-Token"]; len(tok) > 0 {
		sess := s.sessions.lookup(tok[0], s.now(), s.ttl)
		if sess == nil || sess.bmc != c.bmc {
			// A session belongs to the BMC it was made on: another
			// server's BMC has never heard of its token.
			return unauthorized("The session token is unknown or expired.")
		}
		who := sess.who.Load()
		if s.stale(who) {
			if who = s.refresh(who); who == nil {
				s.sessions.remove(sess)
				return unauthorized("The session's account was disabled or deleted.")
			}
			sess.who.Store(who)
		}
		c.who, c.session = who, sess
		return nil
	}
	auth := h["Authorization"]
	if len(auth) == 0 {
		return unauthorized("Credentials are required.")
	}
	if len(auth[0]) > maxAuthHeader {
		return unauthorized("The Authorization header is too long.")
	}
	if p := s.basic.get(c.bmc, auth[0]); p != nil && !s.stale(p) {
		if err := s.lockedOut(p, c); err != nil {
			return refusal(err)
		}
		return s.admit(c, p)
	}
	user, pass, ok := parseBasic(auth[0])
	if !ok {
		return unauthorized("Only Basic authentication and sessions are supported.")
	}
	k := s.basic.key(c.bmc, user, pass)
	canonical := canonicalBasic(auth[0], user, pass)
	if p := s.basic.getCred(k); p != nil && !s.stale(p) {
		if err := s.lockedOut(p, c); err != nil {
			return refusal(err)
		}
		if canonical {
			s.basic.put(k, auth[0], true, p)
		}
		return s.admit(c, p)
	}
	if err := s.slowed(c); err != nil {
		return err
	}
	p, why, first := s.basic.once(k, c.r.RemoteAddr, func() (*principal, error) {
		s.basic.verifies.Add(1)
		return s.verify(c.bmc, user, pass, c.r.RemoteAddr)
	})
	if p == nil {
		if first {
			s.refused(c, user, why)
		}
		return refusal(why)
	}
	s.basic.put(k, auth[0], canonical, p)
	return s.admit(c, p)
}

// admit sets c.who to p as the BMC the request came in through sees it.
// Credentials another server's BMC knows are not valid on this one.
func (s *Server) admit(c *call, p *principal) *apiError {
	if c.who = s.at(c, p); c.who == nil {
		return unauthorized("The credentials are not valid for this BMC.")
	}
	return nil
}

// lockedOut returns the lock that holds a stored account's name for the
// client's address: it holds for cached credentials too, or a guesser's
// right guess would pass through the cache that the account's owner
// filled.
func (s *Server) lockedOut(p *principal, c *call) error {
	if p.acct == "" || s.accounts == nil {
		return nil
	}
	return s.accounts.LockedFor(p.system, p.user, c.r.RemoteAddr)
}

func parseBasic(h string) (user, pass string, ok bool) {
	const prefix = "Basic "
	if len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", "", false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(h[len(prefix):]))
	if err != nil {
		return "", "", false
	}
	user, pass, ok = strings.Cut(string(raw), ":")
	return user, pass, ok
}

// session is a Redfish login session. Its token is a secret: it appears in
// the X-Auth-Token header of the login response only, never in a URI or a
// log.
type session struct {
	id      string
	token   string
	bmc     string // the system of the per-address BMC it was made on; "" for the service listener
	who     atomic.Pointer[principal]
	created time.Time
	last    atomic.Int64 // unix nanoseconds of the last use
}

type sessionStore struct {
	mu      sync.RWMutex
	byToken map[string]*session
	byID    map[string]*session
	changed accounts.Signal // fired when a session ends
}

// count is how many sessions there are (expired ones not yet swept included).
func (st *sessionStore) count() int {
	st.mu.RLock()
	defer st.mu.RUnlock()
	return len(st.byID)
}

// lookup returns the live session of a token and marks it used; an expired
// session is removed.
func (st *sessionStore) lookup(token string, now time.Time, ttl time.Duration) *session {
	return st.find(token, now, ttl, true)
}

// find returns the live session of a token, marked used when use is set;
// an expired session is removed.
func (st *sessionStore) find(token string, now time.Time, ttl time.Duration, use bool) *session {
	st.mu.RLock()
	sess := st.byToken[token]
	st.mu.RUnlock()
	if sess == nil {
		return nil
	}
	if now.Sub(time.Unix(0, sess.last.Load())) > ttl {
		st.remove(sess)
		return nil
	}
	if use {
		sess.last.Store(now.UnixNano())
	}
	return sess
}

// remove ends a session, and tells those watching (Server.Changed).
func (st *sessionStore) remove(sess *session) {
	st.mu.Lock()
	_, ok := st.byID[sess.id]
	delete(st.byToken, sess.token)
	delete(st.byID, sess.id)
	st.mu.Unlock()
	if ok {
		st.changed.Fire()
	}
}

// create opens a session, after dropping expired ones; nil when max live
// sessions exist, or perUser of who's own.
func (st *sessionStore) create(who *principal, bmc string, now time.Time, ttl time.Duration, max, perUser int) *session {
	st.mu.Lock()
	defer st.mu.Unlock()
	own, expired := 0, false
	defer func() {
		if expired {
			st.changed.Fire()
		}
	}()
	for _, sess := range st.byID {
		if now.Sub(time.Unix(0, sess.last.Load())) > ttl {
			delete(st.byToken, sess.token)
			delete(st.byID, sess.id)
			expired = true
			continue
		}
		if sess.who.Load().id == who.id {
			own++
		}
	}
	if len(st.byID) >= max || own >= perUser {
		return nil
	}
	sess := &session{id: randomHex(8), token: randomHex(24), bmc: bmc, created: now}
	sess.who.Store(who)
	sess.last.Store(now.UnixNano())
	st.byToken[sess.token] = sess
	st.byID[sess.id] = sess
	return sess
}

// visible lists the sessions of one BMC (bmc, "" for the service
// listener) who may see: all of them for the service user, else the ones
// of the same user.
func (st *sessionStore) visible(who *principal, bmc string) []*session {
	st.mu.RLock()
	defer st.mu.RUnlock()
	var out []*session
	for _, sess := range st.byID {
		if sess.bmc == bmc && who.sees(sess.who.Load()) {
			out = append(out, sess)
		}
	}
	return out
}

func (st *sessionStore) get(id string) *session {
	st.mu.RLock()
	defer st.mu.RUnlock()
	return st.byID[id]
}

// sees reports whether p may see (list, read, delete) other's sessions:
// its own, and every session for a user who manages accounts everywhere.
func (p *principal) sees(other *principal) bool {
	if p.all && p.priv&accounts.ConfigureUsers != 0 {
		return true
	}
	return other.id == p.id
}

// refresh re-reads a stored account's principal after the store changed;
// nil when it can no longer log in.
func (s *Server) refresh(p *principal) *principal {
	gen := s.accounts.Generation()
	a, err := s.accounts.Get(p.acct)
	if err != nil || !a.Enabled || !a.HasPassword {
		// A lock refuses new logins (from the sources it holds for),
		// not what is logged in.
		return nil
	}
	q := fromAccount(a, gen)
	if p.only != "" {
		// Still the BMC's own: an account rebound to another system
		// no longer reaches it.
		if a.System != "" && a.System != p.only {
			return nil
		}
		q.only = p.only
	}
	return q
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("redfish: no randomness: " + err.Error())
	}
	return hex.EncodeToString(b)
}
