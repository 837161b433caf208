package ipmi

import (
	"bytes"
	"crypto/subtle"
	"errors"

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
	if len(d) != 2 {
		return wire.CodeDataLengthInvalid, nil
	}
	uid := d[1] & 0x3f
	if !validChannel(d[0]) || uid == 0 || uid > maxUsers {
		return wire.CodeInvalidDataField, nil
	}
	bound := b.boundTo(s)
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
	if len(d) != 1 {
		return wire.CodeDataLengthInvalid, nil
	}
	uid := d[0] & 0x3f
	if uid == 0 || uid > maxUsers {
		return wire.CodeInvalidDataField, nil
	}
	name := make([]byte, 16)
	if u, ok := b.userFor(b.boundTo(s), uid); ok {
		copy(name, u.name)
	}
	return wire.CodeOK, name
}

// boundTo returns the system the session's account is bound to; "" for
// the daemon's user, a machine's own user and global accounts. The system
// interface is bound to its own machine: the OS sees and changes that
// machine's accounts only, as an account bound to it does over LAN.
func (b *bmc) boundTo(s *sessRef) string {
	if s != nil && s.system {
		return b.id
	}
	if s == nil || b.cfg.accounts == nil {
		return ""
	}
	b.mu.Lock()
	name := ""
	if ss := b.sessions[s.id]; ss != nil {
		name = ss.user
	}
	b.mu.Unlock()
	if me, stored := b.cfg.accounts.ByName(name); stored {
		return me.System
	}
	return ""
}

// userFor is user id as a session bound to system sees it: an account bound
// to one system sees only the accounts of that system, as over Redfish; the
// fixed users and global accounts are empty slots to it.
func (b *bmc) userFor(system string, id byte) (user, bool) {
	u, ok := b.userByID(id)
	if ok && system != "" && (u.acct == nil || u.acct.System != system) {
		return user{}, false
	}
	return u, ok
}

// mayChange reports whether the session s may change account a: an account
// bound to one system may not change global accounts.
func (b *bmc) mayChange(s *sessRef, a *accounts.Account) bool {
	if s == nil {
		return false
	}
	system := b.boundTo(s)
	return system == "" || a == nil || a.System == system
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
	if len(d) != 17 {
		return wire.CodeDataLengthInvalid, nil
	}
	u, exists, cc := b.slotFor(d[0] & 0x3f)
	if cc != wire.CodeOK {
		return cc, nil
	}
	name := string(bytes.TrimRight(d[1:], "\x00"))
	st := b.cfg.accounts
	switch {
	case exists && !b.mayChange(s, u.acct):
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
	if len(d) < 2 {
		return wire.CodeDataLengthInvalid, nil
	}
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
	if op == 3 { // test password
		// Only the users the caller sees: else a session bound to one
		// machine, or the OS in-band, could guess the daemon's
		// password here.
		u, ok := b.userFor(b.boundTo(s), uid)
		if !ok {
			return wire.CodeInvalidDataField, nil
		}
		want := u.pass
		if u.acct != nil {
			key, _, _, err := b.cfg.accounts.Key(b.id, u.name, "")
			if err != nil {
				return 0x80, nil // password test failed
			}
			want = string(key)
		}
		if subtle.ConstantTimeCompare([]byte(want), []byte(pass)) != 1 {
			return 0x80, nil // password test failed: wrong password
		}
		return wire.CodeOK, nil
	}
	u, exists, cc := b.slotFor(uid)
	if cc != wire.CodeOK {
		return cc, nil
	}
	if !exists {
		return wire.CodeInvalidDataField, nil // no user at this ID: set its name first
	}
	if !b.mayChange(s, u.acct) {
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
	if len(d) != 3 && len(d) != 4 {
		return wire.CodeDataLengthInvalid, nil
	}
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
	if !b.mayChange(s, u.acct) {
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
