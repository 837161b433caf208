package ipmi

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"net"
	"time"

	"github.com/bmlab/bmlab/internal/accounts"
	"github.com/bmlab/bmlab/internal/ipmi/wire"
)

// The user table a BMC shows (IPMI v2.0 §22.26-§22.30): user ID 1 is the
// anonymous user (null name, disabled); the daemon's or the machine's own
// users follow from ID 2 (fixed: they come from flags and settings); stored
// accounts that reach this machine sit at their slot (accounts.FirstSlot
// and up). IDs run to maxUsers.
const maxUsers = accounts.MaxSlot

// user is one entry of the table.
type user struct {
	name    string
	pass    string // fixed users only; stored accounts keep theirs sealed
	enabled bool
	limit   uint8
	acct    *accounts.Account // nil for fixed users
}

func (b *bmc) userByID(id byte) (user, bool) {
	b.mu.Lock()
	i := int(id) - 2
	if i >= 0 && i < len(b.users) {
		u := b.users[i]
		b.mu.Unlock()
		return user{name: u.Username, pass: u.Password, enabled: true, limit: privAdmin}, true
	}
	fixed := len(b.users)
	b.mu.Unlock()
	if b.cfg.accounts == nil || int(id) < 2+fixed {
		return user{}, false
	}
	a, ok := b.cfg.accounts.BySlot(b.id, id)
	if !ok {
		return user{}, false
	}
	return user{name: a.UserName, enabled: a.Enabled && !a.Locked, limit: a.Role.IPMILimit(), acct: &a}, true
}

// getUserAccess (IPMI v2.0 §22.27).
func (b *bmc) getUserAccess(s *sessRef, d []byte) (wire.CompletionCode, []byte) {
	uid := d[1] & 0x3f
	if !validChannel(d[0]) || uid == 0 || uid > maxUsers {
		return wire.CodeInvalidDataField, nil
	}
	bound := b.callerOf(s)
	enabledCount := 0
	for id := byte(2); id <= maxUsers; id++ {
		if u, ok := b.userFor(bound, id); ok && u.enabled {
			enabledCount++
		}
	}
	b.mu.Lock()
	fixed := len(b.users) + 1 // the anonymous user's null name is fixed too
	b.mu.Unlock()
	access := byte(0x0f) // no access
	status := byte(0x80) // disabled
	if u, ok := b.userFor(bound, uid); ok {
		access = u.limit
		if u.enabled {
			access |= 0x10 // IPMI messaging enabled
			status = 0x40
		}
	}
	return wire.CodeOK, []byte{maxUsers, status | byte(enabledCount), byte(fixed), access}
}

// getUserName (IPMI v2.0 §22.29). Passwords are never returned.
func (b *bmc) getUserName(s *sessRef, d []byte) (wire.CompletionCode, []byte) {
	uid := d[0] & 0x3f
	if uid == 0 || uid > maxUsers {
		return wire.CodeInvalidDataField, nil
	}
	name := make([]byte, 16)
	if u, ok := b.userFor(b.callerOf(s), uid); ok {
		copy(name, u.name)
	}
	return wire.CodeOK, name
}

// caller is who runs a user command, as the binding rules see it.
type caller struct {
	// system is the machine the caller is bound to: a stored account's
	// System, or this machine for the machine's own user (its BMC user,
	// Settings.Credentials: issue 46, it administered global accounts);
	// "" for the daemon's user and global accounts, which reach every
	// machine.
	system string
	fixed  bool // one of this BMC's fixed users (the daemon's or the machine's own)
	known  bool // false without a session or once its account is gone: it sees and changes nothing
}

// callerOf is the caller of session s. The system interface (the OS
// in-band) is bound to its own machine: it sees and changes that machine's
// stored accounts only, as an account bound to it does over LAN, and not
// the fixed users.
func (b *bmc) callerOf(s *sessRef) caller {
	switch {
	case s == nil:
		return caller{}
	case s.system:
		return caller{system: b.id, known: true}
	}
	b.mu.Lock()
	ss := b.sessions[s.id]
	own := b.ownUsers
	b.mu.Unlock()
	switch {
	case ss == nil:
		return caller{}
	case ss.acct == "":
		c := caller{fixed: true, known: true}
		if own {
			c.system = b.id
		}
		return c
	case b.cfg.accounts == nil:
		return caller{}
	}
	a, err := b.cfg.accounts.Get(ss.acct)
	if err != nil {
		return caller{}
	}
	return caller{system: a.System, known: true}
}

// sees reports whether c may see user u: one bound to a system sees that
// system's accounts, as over Redfish, and the fixed users only when it is
// one of them; the others see every user.
func (c caller) sees(u user) bool {
	switch {
	case !c.known:
		return false
	case c.system == "":
		return true
	case u.acct == nil:
		return c.fixed
	}
	return u.acct.System == c.system
}

// userFor is user id as caller c sees it; an empty slot when c may not
// see it.
func (b *bmc) userFor(c caller, id byte) (user, bool) {
	u, ok := b.userByID(id)
	if !ok || !c.sees(u) {
		return user{}, false
	}
	return u, true
}

// mayChange reports whether c may change stored account a: an account or
// user bound to one system may not change global accounts, nor another
// system's.
func (c caller) mayChange(a *accounts.Account) bool {
	return c.known && (c.system == "" || a != nil && a.System == c.system)
}

// storeCode turns an account store error into a completion code.
func storeCode(err error) wire.CompletionCode {
	switch {
	case err == nil:
		return wire.CodeOK
	case errors.Is(err, accounts.ErrInvalid), errors.Is(err, accounts.ErrExists):
		return wire.CodeInvalidDataField
	case errors.Is(err, accounts.ErrNotFound):
		return wire.CodeNotPresent
	case errors.Is(err, accounts.ErrFull):
		return wire.CodeOutOfSpace
	}
	return wire.CodeUnspecified
}

// slotFor checks that uid can hold a stored account on this BMC: not the
// anonymous user, not a fixed user. The store must be there.
func (b *bmc) slotFor(uid byte) (user, bool, wire.CompletionCode) {
	if uid == 0 || uid > maxUsers {
		return user{}, false, wire.CodeInvalidDataField
	}
	if b.cfg.accounts == nil || uid < accounts.FirstSlot {
		return user{}, false, wire.CodeNotInPresentState // fixed by the daemon's configuration
	}
	u, ok := b.userByID(uid)
	if ok && u.acct == nil {
		return user{}, false, wire.CodeNotInPresentState
	}
	return u, ok, wire.CodeOK
}

// setUserName (IPMI v2.0 §22.28): names an empty user ID, which makes a
// disabled account of this machine without a password (ReadOnly, as an
// IPMI USER); renames an account; an all-NUL name deletes it.
func (b *bmc) setUserName(s *sessRef, d []byte) (wire.CompletionCode, []byte) {
	u, exists, cc := b.slotFor(d[0] & 0x3f)
	if cc != wire.CodeOK {
		return cc, nil
	}
	name := string(bytes.TrimRight(d[1:], "\x00"))
	st := b.cfg.accounts
	switch {
	case exists && !b.callerOf(s).mayChange(u.acct):
		return wire.CodeInsufficientPriv, nil
	case exists && name == "":
		return storeCode(st.Delete(u.acct.ID)), nil
	case exists:
		_, err := st.Update(u.acct.ID, accounts.Change{UserName: &name})
		return storeCode(err), nil
	case name == "":
		return wire.CodeOK, nil
	}
	_, err := st.Create(accounts.New{UserName: name, Role: accounts.ReadOnly, System: b.id, Slot: d[0] & 0x3f, NoPassword: true})
	return storeCode(err), nil
}

// setUserPassword (IPMI v2.0 §22.30): disable, enable, set or test.
func (b *bmc) setUserPassword(s *sessRef, d []byte) (wire.CompletionCode, []byte) {
	uid, op := d[0]&0x3f, d[1]&0x03
	size := 16
	if d[0]&0x80 != 0 {
		size = 20
	}
	if op >= 2 && len(d) != 2+size {
		return wire.CodeDataLengthInvalid, nil
	}
	if op < 2 && len(d) != 2 && len(d) != 18 && len(d) != 22 {
		// ipmitool sends the (unused) password field with enable/disable too.
		return wire.CodeDataLengthInvalid, nil
	}
	pass := string(bytes.TrimRight(d[2:], "\x00"))
	if op == 3 {
		return b.testPassword(s, uid, pass)
	}
	u, exists, cc := b.slotFor(uid)
	if cc != wire.CodeOK {
		return cc, nil
	}
	if !exists {
		return wire.CodeInvalidDataField, nil // no user at this ID: set its name first
	}
	if !b.callerOf(s).mayChange(u.acct) {
		return wire.CodeInsufficientPriv, nil
	}
	var ch accounts.Change
	switch op {
	case 0, 1:
		on := op == 1
		ch.Enabled = &on
	case 2:
		if accounts.CheckPassword(pass) != nil {
			return wire.CodeInvalidDataField, nil
		}
		ch.Password = &pass
	}
	_, err := b.cfg.accounts.Update(u.acct.ID, ch)
	return storeCode(err), nil
}

// setUserAccess (IPMI v2.0 §22.26): the privilege limit becomes the
// account's role (ADMINISTRATOR → Administrator, OPERATOR → Operator,
// USER → ReadOnly); NO ACCESS (Fh) disables it. Callback and OEM levels
// have no role: invalid data field.
func (b *bmc) setUserAccess(s *sessRef, d []byte) (wire.CompletionCode, []byte) {
	if !validChannel(d[0] & 0x0f) {
		return wire.CodeInvalidDataField, nil
	}
	uid, level := d[1]&0x3f, d[2]&0x0f
	role, known := accounts.RoleForIPMI(level)
	if !known && level != 0x0f {
		return wire.CodeInvalidDataField, nil
	}
	if u, ok := b.userByID(uid); ok && u.acct == nil {
		// A fixed user is an administrator; asking for that changes nothing.
		if level == privAdmin {
			return wire.CodeOK, nil
		}
		return wire.CodeNotInPresentState, nil
	}
	u, exists, cc := b.slotFor(uid)
	if cc != wire.CodeOK {
		return cc, nil
	}
	if !exists {
		return wire.CodeInvalidDataField, nil
	}
	if !b.callerOf(s).mayChange(u.acct) {
		return wire.CodeInsufficientPriv, nil
	}
	var ch accounts.Change
	if level == 0x0f {
		off := false
		ch.Enabled = &off
	} else {
		ch.Role = &role
	}
	_, err := b.cfg.accounts.Update(u.acct.ID, ch)
	return storeCode(err), nil
}

// codePasswordTestFailed is Set User Password's answer to a test of a
// wrong password (IPMI v2.0 §22.30, completion code 80h).
const codePasswordTestFailed wire.CompletionCode = 0x80

// testPassword answers Set User Password's test (operation 3) as a login is
// answered (issue 46: it was an oracle, 1,150 guesses a second at any
// slot, counted nowhere): only a user the caller may see is tested (any
// other is an empty slot, invalid data field); a source over its login
// budget is told to wait (C0h, node busy) before anything is compared;
// each wrong password counts against the session's source as a failed
// login does (the throttle, the name's lock for that source, the metric)
// and is logged, rate-limited; a name locked for that source fails
// whatever the password.
func (b *bmc) testPassword(s *sessRef, uid byte, pass string) (wire.CompletionCode, []byte) {
	u, ok := b.userFor(b.callerOf(s), uid)
	if !ok {
		return wire.CodeInvalidDataField, nil
	}
	if s.system {
		return b.testPasswordInband(u, pass)
	}
	b.mu.Lock()
	var from net.Addr = &net.UDPAddr{}
	if ss := b.sessions[s.id]; ss != nil && ss.addr != nil {
		from = ss.addr
	}
	b.mu.Unlock()
	src := from.String()
	if d := b.cfg.throttle.Wait(src); d > 0 {
		b.refused(u.name, from, "password test refused: too many failed logins from this address")
		return wire.CodeNodeBusy, nil
	}
	want, known := u.pass, true
	if u.acct != nil {
		key, _, _, err := b.cfg.accounts.Key(b.id, u.name, src)
		want, known = string(key), err == nil
	}
	if subtle.ConstantTimeCompare([]byte(want), []byte(pass)) != 1 || !known {
		b.cfg.throttle.Failed(src)
		b.authFailed(u.name, src)
		b.cfg.metrics.LoginFailed("ipmi")
		b.refused(u.name, from, "password test failed")
		return codePasswordTestFailed, nil
	}
	if u.acct != nil {
		b.cfg.accounts.Succeeded(b.id, u.name, src)
	}
	return wire.CodeOK, nil
}

// The OS's password tests in-band have no address for the throttle or the
// name's lock to charge, and the KCS carries 200 requests a second: the
// machine's BMC allows inbandGuessBurst wrong ones, then one per
// inbandGuessEvery, and answers C0h (node busy) before comparing anything
// over that (issue 44: the host may not read accounts' passwords).
const (
	inbandGuessBurst = 5
	inbandGuessEvery = time.Minute
)

// testPasswordInband is the password test of the system interface: u is
// one of its machine's accounts (callerOf).
func (b *bmc) testPasswordInband(u user, pass string) (wire.CompletionCode, []byte) {
	from := &net.UnixAddr{Net: "unix", Name: "in-band"}
	now := time.Now()
	b.mu.Lock()
	spent := max(0, b.guesses-now.Sub(b.guessed).Seconds()/inbandGuessEvery.Seconds())
	b.guesses, b.guessed = spent, now
	busy := spent+1 > inbandGuessBurst
	b.mu.Unlock()
	if busy {
		b.refused(u.name, from, "in-band password test refused: too many wrong ones")
		return wire.CodeNodeBusy, nil
	}
	want, known := u.pass, true
	if u.acct != nil {
		key, _, _, err := b.cfg.accounts.Key(b.id, u.name, "")
		want, known = string(key), err == nil
	}
	if subtle.ConstantTimeCompare([]byte(want), []byte(pass)) != 1 || !known {
		b.mu.Lock()
		b.guesses++
		b.mu.Unlock()
		b.cfg.metrics.LoginFailed("ipmi")
		b.refused(u.name, from, "in-band password test failed")
		return codePasswordTestFailed, nil
	}
	return wire.CodeOK, nil
}
