package redfish

import (
	"context"

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
	p          *principal
}

// Can reports whether the caller holds every privilege of need.
func (c Caller) Can(need accounts.Privilege) bool { return c.Privileges&need == need }

// AllSystems reports whether the caller reaches every system (not an
// account bound to one, nor a machine's own user, nor anyone on a
// server's own BMC).
func (c Caller) AllSystems() bool { return c.p != nil && c.p.everywhere() }

// CanAccess reports whether the caller may reach machine m.
func (c Caller) CanAccess(m *machine.Machine) bool { return c.p != nil && c.p.canAccess(m) }

// SessionCaller returns the caller of a live session token, marking the
// session used as a request with X-Auth-Token would; false when the token is
// unknown, expired, made on another BMC than the one ctx (a request's
// context) came in through (AtBMC), or its account can no longer log in.
func (s *Server) SessionCaller(ctx context.Context, token string) (Caller, bool) {
	if token == "" || len(token) > maxAuthHeader {
		return Caller{}, false
	}
	sess := s.sessions.lookup(token, s.now(), s.ttl)
	if sess == nil || sess.bmc != bmcOf(ctx) {
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
	return Caller{User: who.user, Role: who.role, Privileges: who.priv, p: who}, true
}
