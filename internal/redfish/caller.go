package redfish

import (
	"time"

	"github.com/bmlab/bmlab/internal/accounts"
	"github.com/bmlab/bmlab/internal/machine"
)

// Caller is who a Redfish session token belongs to, for a face that shares
// the Redfish listener and its sessions (the web console, internal/webui):
// it checks the same token, privileges and system bindings as the API.
type Caller struct {
	User string
	// Role is the stored account's role, Administrator for the
	// service-wide user, "" for a machine's own user (who holds every
	// privilege on that machine).
	Role       accounts.Role
	Privileges accounts.Privilege
	// Expires is when the session ends if it is not used before.
	Expires time.Time
	p       *principal
}

// Key names who the caller is, for counting what each user holds: a
// stored account by its ID, the service user by name, a machine's user by
// name and password.
func (c Caller) Key() string {
	if c.p == nil {
		return ""
	}
	return c.p.id
}

// Can reports whether the caller holds every privilege of need.
func (c Caller) Can(need accounts.Privilege) bool { return c.Privileges&need == need }

// AllSystems reports whether the caller reaches every system (not an
// account bound to one, nor a machine's own user).
func (c Caller) AllSystems() bool { return c.p != nil && c.p.all }

// CanAccess reports whether the caller may reach machine m.
func (c Caller) CanAccess(m *machine.Machine) bool { return c.p != nil && c.p.canAccess(m) }

// SessionCaller returns the caller of a live session token, marking the
// session used as a request with X-Auth-Token would; false when the token is
// unknown, expired or its account can no longer log in.
func (s *Server) SessionCaller(token string) (Caller, bool) {
	return s.sessionCaller(token, true)
}

// SessionState is SessionCaller without marking the session used: what a
// long-lived stream asks when it checks its session again, so that the
// stream does not keep the session alive past its timeout.
func (s *Server) SessionState(token string) (Caller, bool) {
	return s.sessionCaller(token, false)
}

func (s *Server) sessionCaller(token string, use bool) (Caller, bool) {
	if token == "" || len(token) > maxAuthHeader {
		return Caller{}, false
	}
	now := s.now()
	sess := s.sessions.find(token, now, s.ttl, use)
	if sess == nil {
		return Caller{}, false
	}
	who := sess.who.Load()
	if s.stale(who) {
		if who = s.refresh(who); who == nil {
			s.sessions.remove(sess)
			return Caller{}, false
		}
		sess.who.Store(who)
	}
	return Caller{User: who.user, Role: who.role, Privileges: who.priv, p: who,
		Expires: time.Unix(0, sess.last.Load()).Add(s.ttl)}, true
}

// Changed returns channels closed at the next end of a session (logout,
// deletion, expiry noticed, its account refused) and at the next change of
// an account (deleted, disabled, its role changed; nil without an account
// store): a face that keeps a session's stream open checks it again then
// (SessionState), so that revocation reaches it at once.
func (s *Server) Changed() (sessions, accounts <-chan struct{}) {
	sessions = s.sessions.changed.Wait()
	if s.accounts != nil {
		accounts = s.accounts.Changed()
	}
	return sessions, accounts
}
