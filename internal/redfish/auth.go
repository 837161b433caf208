package redfish

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bmlab/bmlab/internal/machine"
)

// principal is who a request acts as: the service-wide user (all), or a
// user known by one or more machines' own credentials, who reaches those
// machines only.
type principal struct {
	all  bool
	user string
	pass string // kept to check machines' credentials, which are stored as given
}

// canAccess reports whether p may reach machine m (its System, Manager,
// Chassis and their sub-resources).
func (p *principal) canAccess(m *machine.Machine) bool {
	if p.all {
		return true
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

// verify checks a user name and password against the service credentials
// and every machine's own; nil when neither knows them.
func (s *Server) verify(user, pass string) *principal {
	if s.admin != nil {
		u, p := sum(user), sum(pass)
		okU := subtle.ConstantTimeCompare(u[:], s.adminUser[:])
		okP := subtle.ConstantTimeCompare(p[:], s.adminPass[:])
		if okU&okP == 1 {
			return s.admin
		}
	}
	cand := &principal{user: user, pass: pass}
	for _, m := range s.svc.List() {
		if cand.canAccess(m) {
			return cand
		}
	}
	return nil
}

// basicCache maps a raw Authorization header value to the principal it was
// verified as, so a request with known credentials costs one map lookup and
// no decoding or hashing. Only verified values are kept, and at most
// basicCacheSize of them.
type basicCache struct {
	mu sync.RWMutex
	m  map[string]*principal
}

const basicCacheSize = 4096

func (b *basicCache) get(h string) *principal {
	b.mu.RLock()
	p := b.m[h]
	b.mu.RUnlock()
	return p
}

func (b *basicCache) put(h string, p *principal) {
	b.mu.Lock()
	if len(b.m) >= basicCacheSize {
		clear(b.m)
	}
	b.m[h] = p
	b.mu.Unlock()
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
		if sess == nil {
			return unauthorized("The session token is unknown or expired.")
		}
		c.who, c.session = sess.who, sess
		return nil
	}
	auth := h["Authorization"]
	if len(auth) == 0 {
		return unauthorized("Credentials are required.")
	}
	if p := s.basic.get(auth[0]); p != nil {
		c.who = p
		return nil
	}
	user, pass, ok := parseBasic(auth[0])
	if !ok {
		return unauthorized("Only Basic authentication and sessions are supported.")
	}
	p := s.verify(user, pass)
	if p == nil {
		return unauthorized("The credentials were not accepted.")
	}
	s.basic.put(auth[0], p)
	c.who = p
	return nil
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
	who     *principal
	created time.Time
	last    atomic.Int64 // unix nanoseconds of the last use
}

type sessionStore struct {
	mu      sync.RWMutex
	byToken map[string]*session
	byID    map[string]*session
}

// lookup returns the live session of a token and marks it used; an expired
// session is removed.
func (st *sessionStore) lookup(token string, now time.Time, ttl time.Duration) *session {
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
	sess.last.Store(now.UnixNano())
	return sess
}

func (st *sessionStore) remove(sess *session) {
	st.mu.Lock()
	delete(st.byToken, sess.token)
	delete(st.byID, sess.id)
	st.mu.Unlock()
}

// create opens a session, after dropping expired ones; nil when max live
// sessions exist.
func (st *sessionStore) create(who *principal, now time.Time, ttl time.Duration, max int) *session {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, sess := range st.byID {
		if now.Sub(time.Unix(0, sess.last.Load())) > ttl {
			delete(st.byToken, sess.token)
			delete(st.byID, sess.id)
		}
	}
	if len(st.byID) >= max {
		return nil
	}
	sess := &session{id: randomHex(8), token: randomHex(24), who: who, created: now}
	sess.last.Store(now.UnixNano())
	st.byToken[sess.token] = sess
	st.byID[sess.id] = sess
	return sess
}

// visible lists the sessions who may see: all of them for the service user,
// else the ones of the same user.
func (st *sessionStore) visible(who *principal) []*session {
	st.mu.RLock()
	defer st.mu.RUnlock()
	var out []*session
	for _, sess := range st.byID {
		if who.all || (!sess.who.all && sess.who.user == who.user) {
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

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("redfish: no randomness: " + err.Error())
	}
	return hex.EncodeToString(b)
}
