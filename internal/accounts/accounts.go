package accounts

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// Role is a Redfish predefined role (DSP0266 §13.2.3).
type Role string

// The predefined roles.
const (
	Administrator Role = "Administrator"
	Operator      Role = "Operator"
	ReadOnly      Role = "ReadOnly"
)

// Roles lists the roles in decreasing power.
var Roles = []Role{Administrator, Operator, ReadOnly}

// Privilege is a set of Redfish privileges (DSP0266 §13.2.2), one bit each.
type Privilege uint8

// Redfish privileges.
const (
	Login Privilege = 1 << iota
	ConfigureSelf
	ConfigureComponents
	ConfigureManager
	ConfigureUsers
)

var privNames = []struct {
	p    Privilege
	name string
}{
	{Login, "Login"}, {ConfigureManager, "ConfigureManager"}, {ConfigureUsers, "ConfigureUsers"},
	{ConfigureComponents, "ConfigureComponents"}, {ConfigureSelf, "ConfigureSelf"},
}

// AllPrivileges is what an administrator holds.
const AllPrivileges = Login | ConfigureSelf | ConfigureComponents | ConfigureManager | ConfigureUsers

// Valid reports whether r is one of the predefined roles.
func (r Role) Valid() bool { return slices.Contains(Roles, r) }

// Privileges returns the role's privileges (the Redfish Privilege Registry's
// assignments for the predefined roles).
func (r Role) Privileges() Privilege {
	switch r {
	case Administrator:
		return AllPrivileges
	case Operator:
		return Login | ConfigureSelf | ConfigureComponents
	case ReadOnly:
		return Login | ConfigureSelf
	}
	return 0
}

// AssignedPrivileges names the role's privileges as Redfish's Role resource
// lists them.
func (r Role) AssignedPrivileges() []string {
	var out []string
	for _, n := range privNames {
		if r.Privileges()&n.p != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

// IPMI privilege levels (IPMI v2.0 §6.8).
const (
	IPMIUser     = 2
	IPMIOperator = 3
	IPMIAdmin    = 4
)

// IPMILimit is the role's IPMI privilege limit.
func (r Role) IPMILimit() uint8 {
	switch r {
	case Administrator:
		return IPMIAdmin
	case Operator:
		return IPMIOperator
	}
	return IPMIUser
}

// RoleForIPMI maps an IPMI privilege limit to a role; false for callback,
// OEM and reserved levels, which have no role here.
func RoleForIPMI(level uint8) (Role, bool) {
	switch level {
	case IPMIAdmin:
		return Administrator, true
	case IPMIOperator:
		return Operator, true
	case IPMIUser:
		return ReadOnly, true
	}
	return "", false
}

// Limits on names and passwords: IPMI's user name field is 16 bytes
// (§22.28), its longest password 20 (§22.30).
const (
	MaxNameLength     = 16
	MinPasswordLength = 8
	MaxPasswordLength = 20
)

// FirstSlot and MaxSlot bound IPMI user IDs of stored accounts: ID 1 is the
// anonymous user, ID 2 the bootstrap administrator.
const (
	FirstSlot = 3
	MaxSlot   = 16
)

// Sentinel errors; callers branch on them with errors.Is.
var (
	ErrNotFound    = errors.New("no such account")
	ErrExists      = errors.New("user name already taken")
	ErrInvalid     = errors.New("invalid account value")
	ErrFull        = errors.New("no free IPMI user ID")
	ErrCredentials = errors.New("credentials not accepted")
	ErrLocked      = errors.New("account locked")
)

// Account is the public view of a stored account.
type Account struct {
	ID       string `json:"id"`
	UserName string `json:"user"`
	Role     Role   `json:"role"`
	Enabled  bool   `json:"enabled"`
	// System is the machine ID the account is bound to; empty for a
	// global account.
	System string `json:"system,omitempty"`
	// Slot is the IPMI user ID.
	Slot uint8 `json:"slot"`
	// Locked: the name is locked for logins from some source (see
	// lockout.go); LockedUntil is when the lock of the source asked
	// about ends (Store.Verify's and Key's callers).
	Locked bool `json:"-"`
	// HasPassword is false for a user made over IPMI whose password is not
	// set yet; it cannot log in.
	HasPassword bool `json:"-"`
}

// Reaches reports whether the account reaches machine id.
func (a Account) Reaches(id string) bool { return a.System == "" || a.System == id }

type record struct {
	Account
	Hash   []byte `json:"hash,omitempty"`
	Secret []byte `json:"secret,omitempty"`
}

// Policy is the lockout policy (AccountService AccountLockoutThreshold and
// AccountLockoutDuration). A zero threshold never locks.
type Policy struct {
	Threshold int           `json:"threshold"`
	Duration  time.Duration `json:"duration"`
}

// DefaultPolicy locks after 5 failures for 5 minutes.
var DefaultPolicy = Policy{Threshold: 5, Duration: 5 * time.Minute}

type file struct {
	Next     int       `json:"next"`
	Policy   Policy    `json:"policy"`
	Accounts []*record `json:"accounts"`
}

// Store is the account store. It is safe for concurrent use.
type Store struct {
	dir      string
	aead     cipher.AEAD
	reserved []string // names no account may take (the bootstrap user)
	now      func() time.Time
	cost     int

	// dummy is a hash of a random password at cost, compared against when
	// no password hash is (unknown name, disabled or locked account), so
	// that a refusal takes as long whether the name exists or not.
	dummyOnce sync.Once
	dummy     []byte

	mu     sync.Mutex
	recs   map[string]*record // by ID
	next   int
	policy Policy
	locks  lockout

	gen     atomic.Uint64
	changed Signal // fired whenever gen changes

	// lockEnd is the latest end of any lock (unix nanoseconds): before
	// it, a cached login must ask LockedFor; after it, none is locked.
	lockEnd atomic.Int64
}

// Option configures a Store.
type Option func(*Store)

// WithReserved keeps names (the bootstrap administrator's) from accounts.
func WithReserved(names ...string) Option {
	return func(s *Store) { s.reserved = append(s.reserved, names...) }
}

// WithClock replaces time.Now, for lockout tests.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// WithCost sets the bcrypt cost (default bcrypt.DefaultCost).
func WithCost(c int) Option { return func(s *Store) { s.cost = c } }

const (
	dataFile = "accounts.json"
	keyFile  = "accounts.key"
)

// Open loads the store kept in dir, creating dir, the key and an empty store
// when missing.
func Open(dir string, opts ...Option) (*Store, error) {
	s := &Store{dir: dir, now: time.Now, cost: bcrypt.DefaultCost, recs: map[string]*record{}, next: 1, policy: DefaultPolicy}
	for _, o := range opts {
		o(s)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("accounts: state dir %s: %w", dir, err)
	}
	key, err := loadKey(filepath.Join(dir, keyFile))
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("accounts: key %s: %w", filepath.Join(dir, keyFile), err)
	}
	if s.aead, err = cipher.NewGCM(block); err != nil {
		return nil, fmt.Errorf("accounts: key: %w", err)
	}
	path := filepath.Join(dir, dataFile)
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("accounts: %w", err)
	}
	var f file
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("accounts: %s: %w (move it away to start with no accounts)", path, err)
	}
	s.next, s.policy = max(f.Next, 1), f.Policy
	for _, r := range f.Accounts {
		if !r.Role.Valid() || r.ID == "" {
			return nil, fmt.Errorf("accounts: %s: account %q has role %q: want one of %v", path, r.UserName, r.Role, Roles)
		}
		r.HasPassword = len(r.Hash) > 0
		s.recs[r.ID] = r
	}
	return s, nil
}

func loadKey(path string) ([]byte, error) {
	key, err := os.ReadFile(path)
	if err == nil {
		if len(key) != 32 {
			return nil, fmt.Errorf("accounts: key %s: want 32 bytes, got %d", path, len(key))
		}
		return key, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("accounts: key: %w", err)
	}
	key = make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("accounts: key: %w", err)
	}
	if err := os.WriteFile(path, key, 0o600); err != nil {
		return nil, fmt.Errorf("accounts: key %s: %w", path, err)
	}
	return key, nil
}

// saveLocked writes the store atomically. Callers hold s.mu.
func (s *Store) saveLocked() error {
	f := file{Next: s.next, Policy: s.policy}
	for _, r := range s.recs {
		f.Accounts = append(f.Accounts, r)
	}
	sort.Slice(f.Accounts, func(i, j int) bool { return idLess(f.Accounts[i].ID, f.Accounts[j].ID) })
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("accounts: encode: %w", err)
	}
	path := filepath.Join(s.dir, dataFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("accounts: save %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("accounts: save %s: %w", path, err)
	}
	return nil
}

func idLess(a, b string) bool {
	x, _ := strconv.Atoi(a)
	y, _ := strconv.Atoi(b)
	return x < y
}

// Generation changes whenever an account changes, so that callers caching
// verified credentials know when to check again. A lock is no change: it
// refuses logins, not what is logged in.
func (s *Store) Generation() uint64 { return s.gen.Load() }

// Changed returns a channel closed at the next change of an account
// (created, changed, deleted): a face holding sessions or streams of an
// account checks them again then.
func (s *Store) Changed() <-chan struct{} { return s.changed.Wait() }

// bump marks a change: a new generation, and Changed's channel closed.
func (s *Store) bump() {
	s.gen.Add(1)
	s.changed.Fire()
}

// Policy returns the lockout policy.
func (s *Store) Policy() Policy {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.policy
}

// SetPolicy changes the lockout policy.
func (s *Store) SetPolicy(p Policy) error {
	if p.Threshold < 0 || p.Duration < 0 {
		return fmt.Errorf("lockout policy %+v: %w: threshold and duration must not be negative", p, ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.policy
	s.policy = p
	if err := s.saveLocked(); err != nil {
		s.policy = old
		return err
	}
	return nil
}

func (s *Store) viewLocked(r *record) Account {
	a := r.Account
	a.Locked = s.locks.any(lockName(r.System, r.UserName), s.now())
	a.HasPassword = len(r.Hash) > 0
	return a
}

// List returns the accounts in ID order; with system set, only those that
// reach it (global ones and its own).
func (s *Store) List(system string) []Account {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Account, 0, len(s.recs))
	for _, r := range s.recs {
		if system == "" || r.Reaches(system) {
			out = append(out, s.viewLocked(r))
		}
	}
	sort.Slice(out, func(i, j int) bool { return idLess(out[i].ID, out[j].ID) })
	return out
}

// Get returns account id.
func (s *Store) Get(id string) (Account, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.recs[id]
	if r == nil {
		return Account{}, fmt.Errorf("account %q: %w", id, ErrNotFound)
	}
	return s.viewLocked(r), nil
}

// BySlot returns the account with IPMI user ID slot that reaches system.
func (s *Store) BySlot(system string, slot uint8) (Account, bool) {
	return s.lookup(func() *record { return s.bySlotLocked(system, slot) })
}

// lookup is the view of the record find returns under the store's lock;
// false when it finds none.
func (s *Store) lookup(find func() *record) (Account, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := find()
	if r == nil {
		return Account{}, false
	}
	return s.viewLocked(r), true
}

func (s *Store) bySlotLocked(system string, slot uint8) *record {
	for _, r := range s.recs {
		if r.Slot == slot && r.Reaches(system) {
			return r
		}
	}
	return nil
}

// slotFreeLocked: no account that shares a BMC with an account of system
// (global: every system) uses slot.
func (s *Store) slotFreeLocked(system string, slot uint8) bool {
	for _, r := range s.recs {
		if r.Slot == slot && (system == "" || r.System == "" || r.System == system) {
			return false
		}
	}
	return true
}

// InvalidError is a value an account may not take (errors.Is ErrInvalid):
// which field, and why.
type InvalidError struct {
	Field string // FieldName, FieldPassword, FieldRole or FieldSlot
	// TooLong is set when the value is longer than Max bytes.
	TooLong bool
	Max     int
	err     error
}

// The fields of an InvalidError.
const (
	FieldName     = "name"
	FieldPassword = "password"
	FieldRole     = "role"
	FieldSlot     = "slot"
)

func (e *InvalidError) Error() string { return e.err.Error() }

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Unwrap() error { return e.err }

func invalid(field string, format string, args ...any) *InvalidError {
	return &InvalidError{Field: field, err: fmt.Errorf(format, args...)}
}

func checkName(name string) error {
	if name == "" || len(name) > MaxNameLength {
		e := invalid(FieldName, "user name %q: %w: want 1 to %d bytes", name, ErrInvalid, MaxNameLength)
		e.TooLong, e.Max = len(name) > MaxNameLength, MaxNameLength
		return e
	}
	for _, c := range []byte(name) {
		if c <= ' ' || c >= 0x7f || c == ':' {
			return invalid(FieldName, "user name %q: %w: printable ASCII without spaces or ':'", name, ErrInvalid)
		}
	}
	return nil
}

// CheckPassword says what is wrong with a password, or nil.
func CheckPassword(p string) error {
	if len(p) < MinPasswordLength || len(p) > MaxPasswordLength {
		e := invalid(FieldPassword, "password: %w: want %d to %d bytes (IPMI takes at most %d)", ErrInvalid, MinPasswordLength, MaxPasswordLength, MaxPasswordLength)
		e.TooLong, e.Max = len(p) > MaxPasswordLength, MaxPasswordLength
		return e
	}
	return nil
}

// nameTakenLocked: name is reserved, or held by another account (not
// except) that shares a BMC with an account of system: names are per BMC,
// as a rack's BMCs each keep their own users (issue 46: a 409 at one BMC
// told which names another BMC's accounts had). A global account (system
// "") is a user of every BMC, so its name clashes with any.
func (s *Store) nameTakenLocked(name, system, except string) bool {
	if slices.Contains(s.reserved, name) {
		return true
	}
	for _, r := range s.recs {
		if r.UserName == name && r.ID != except && (system == "" || r.System == "" || r.System == system) {
			return true
		}
	}
	return false
}

// setPasswordLocked hashes and seals p into r.
func (s *Store) setPasswordLocked(r *record, p string) error {
	h, err := bcrypt.GenerateFromPassword([]byte(p), s.cost)
	if err != nil {
		return fmt.Errorf("account %q: hash password: %w", r.UserName, err)
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return fmt.Errorf("account %q: seal password: %w", r.UserName, err)
	}
	r.Hash = h
	r.Secret = s.aead.Seal(nonce, nonce, []byte(p), []byte(r.ID))
	return nil
}

func (s *Store) openSecretLocked(r *record) ([]byte, bool) {
	n := s.aead.NonceSize()
	if len(r.Secret) < n {
		return nil, false
	}
	p, err := s.aead.Open(nil, r.Secret[:n], r.Secret[n:], []byte(r.ID))
	return p, err == nil
}

// New is what Create takes.
type New struct {
	UserName string
	Password string // empty only with NoPassword
	Role     Role
	Enabled  bool
	System   string
	Slot     uint8 // 0: the lowest free one
	// NoPassword makes an account that cannot log in until a password is
	// set, as IPMI's Set User Name does.
	NoPassword bool
}

// Create adds an account and returns it.
func (s *Store) Create(n New) (Account, error) {
	if err := checkName(n.UserName); err != nil {
		return Account{}, err
	}
	if !n.Role.Valid() {
		return Account{}, invalid(FieldRole, "role %q: %w: want one of %v", n.Role, ErrInvalid, Roles)
	}
	if !n.NoPassword {
		if err := CheckPassword(n.Password); err != nil {
			return Account{}, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nameTakenLocked(n.UserName, n.System, "") {
		return Account{}, fmt.Errorf("user %q: %w", n.UserName, ErrExists)
	}
	slot := n.Slot
	if slot == 0 {
		for c := uint8(FirstSlot); c <= MaxSlot; c++ {
			if s.slotFreeLocked(n.System, c) {
				slot = c
				break
			}
		}
		if slot == 0 {
			return Account{}, fmt.Errorf("user %q: %w (IPMI user IDs %d-%d are all used)", n.UserName, ErrFull, FirstSlot, MaxSlot)
		}
	} else if slot < FirstSlot || slot > MaxSlot {
		return Account{}, invalid(FieldSlot, "IPMI user ID %d: %w: want %d to %d", slot, ErrInvalid, FirstSlot, MaxSlot)
	} else if !s.slotFreeLocked(n.System, slot) {
		return Account{}, fmt.Errorf("IPMI user ID %d: %w", slot, ErrExists)
	}
	r := &record{Account: Account{ID: strconv.Itoa(s.next), UserName: n.UserName, Role: n.Role, Enabled: n.Enabled, System: n.System, Slot: slot}}
	if !n.NoPassword {
		if err := s.setPasswordLocked(r, n.Password); err != nil {
			return Account{}, err
		}
	}
	s.next++
	s.recs[r.ID] = r
	if err := s.saveLocked(); err != nil {
		delete(s.recs, r.ID)
		s.next--
		return Account{}, err
	}
	s.bump()
	return s.viewLocked(r), nil
}

// Change is a partial update; nil fields stay.
type Change struct {
	UserName *string
	Password *string
	Role     *Role
	Enabled  *bool
	// Unlock clears the failure count and the lock.
	Unlock bool
}

// Update applies c to account id and returns the result.
func (s *Store) Update(id string, c Change) (Account, error) {
	if c.UserName != nil {
		if err := checkName(*c.UserName); err != nil {
			return Account{}, err
		}
	}
	if c.Password != nil {
		if err := CheckPassword(*c.Password); err != nil {
			return Account{}, err
		}
	}
	if c.Role != nil && !c.Role.Valid() {
		return Account{}, invalid(FieldRole, "role %q: %w: want one of %v", *c.Role, ErrInvalid, Roles)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.recs[id]
	if r == nil {
		return Account{}, fmt.Errorf("account %q: %w", id, ErrNotFound)
	}
	if c.UserName != nil && s.nameTakenLocked(*c.UserName, r.System, id) {
		return Account{}, fmt.Errorf("user %q: %w", *c.UserName, ErrExists)
	}
	old := *r
	if c.UserName != nil {
		r.UserName = *c.UserName
	}
	if c.Role != nil {
		r.Role = *c.Role
	}
	if c.Enabled != nil {
		r.Enabled = *c.Enabled
	}
	if c.Unlock || (c.UserName != nil && *c.UserName != old.UserName) {
		s.locks.clear(lockName(old.System, old.UserName))
	}
	if c.Password != nil {
		if err := s.setPasswordLocked(r, *c.Password); err != nil {
			*r = old
			return Account{}, err
		}
	}
	if err := s.saveLocked(); err != nil {
		*r = old
		return Account{}, err
	}
	s.bump()
	return s.viewLocked(r), nil
}

// Delete removes account id.
func (s *Store) Delete(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.recs[id]
	if r == nil {
		return fmt.Errorf("account %q: %w", id, ErrNotFound)
	}
	delete(s.recs, id)
	if err := s.saveLocked(); err != nil {
		s.recs[id] = r
		return err
	}
	s.locks.clear(lockName(r.System, r.UserName))
	s.bump()
	return nil
}

// byNameLocked returns the account named name that a BMC of system reaches
// (its own or a global one), one at most by nameTakenLocked; with system ""
// (the service's listener, which serves every system), the one account of
// that name, nil when several BMCs each have one: the name alone does not
// tell which.
func (s *Store) byNameLocked(name, system string) *record {
	var found *record
	for _, r := range s.recs {
		if r.UserName != name || system != "" && !r.Reaches(system) {
			continue
		}
		if found != nil {
			return nil
		}
		found = r
	}
	return found
}

// lockKeyLocked is what the lockout counts a login of name at a BMC of
// system ("" for the service's listener) under: the account it names
// there, by its own BMC (lockName), or, for a name no account holds there,
// that BMC's. A lock at one BMC neither locks nor shows at another whose
// account has the same name.
func (s *Store) lockKeyLocked(system, name string) string {
	if r := s.byNameLocked(name, system); r != nil {
		return lockName(r.System, name)
	}
	return lockName(system, name)
}

// lockName names the lock of name among the accounts of system ("": a
// global account, or the service's listener).
func lockName(system, name string) string {
	if len(name) > lockNameBytes {
		name = name[:lockNameBytes]
	}
	if system == "" {
		return name
	}
	return system + "\x00" + name
}

// usableLocked: enabled, with a password.
func usableLocked(r *record) error {
	if !r.Enabled || len(r.Hash) == 0 {
		return ErrCredentials
	}
	return nil
}

// LockedError is a login refused because its name is locked for its source
// (the lockout policy): until when.
type LockedError struct {
	Until time.Time
}

func (e *LockedError) Error() string {
	return "locked after repeated failed logins from this address until " + e.Until.UTC().Format(time.RFC3339)
}

// Is makes errors.Is(err, ErrLocked) true.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// failLocked counts a failure under lock key (lockKeyLocked) from
// source; s.mu is held.
func (s *Store) failLocked(key, source string) {
	if s.locks.fail(key, source, s.policy, s.now()) {
		if end := s.now().Add(s.policy.Duration).UnixNano(); end > s.lockEnd.Load() {
			s.lockEnd.Store(end)
		}
	}
}

// LockedFor returns a *LockedError when name is locked for logins from
// source at a BMC of system, else nil: for a face that keeps verified
// credentials (a cache) and must not let them through a lock. It costs one
// atomic load while no lock is in force.
func (s *Store) LockedFor(system, name, source string) error {
	if s.now().UnixNano() >= s.lockEnd.Load() {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lockedLocked(s.lockKeyLocked(system, name), source)
}

// lockedLocked returns a *LockedError when lock key is locked for source.
func (s *Store) lockedLocked(key, source string) error {
	if until := s.locks.until(key, source, s.now()); !until.IsZero() {
		return &LockedError{Until: until}
	}
	return nil
}

// Verify checks a user name and password (Redfish) from source (the
// client's address, "ip:port") at a BMC of system ("" for the service's
// listener, where a name that several BMCs' accounts hold is unknown:
// nothing tells which is meant). Unknown users and wrong passwords are
// ErrCredentials and count towards the lock of the name for source; a name
// locked for source is a *LockedError (errors.Is ErrLocked) whatever the
// password, for unknown names too, so a lock tells nothing of which names
// exist. found is false when no account has the name, so the caller may
// try other user sources.
//
// Every refusal costs one bcrypt comparison, against a dummy hash when
// there is no hash to compare with: an unknown name answered in 1 ms
// against 100 ms or more for a wrong password told which names exist
// (issue 25).
func (s *Store) Verify(system, user, pass, source string) (a Account, found bool, err error) {
	s.mu.Lock()
	r := s.byNameLocked(user, system)
	key := s.lockKeyLocked(system, user)
	if lerr := s.lockedLocked(key, source); lerr != nil {
		s.mu.Unlock()
		s.compareDummy(pass)
		return Account{}, r != nil, lerr
	}
	if r == nil {
		s.failLocked(key, source)
		s.mu.Unlock()
		s.compareDummy(pass)
		return Account{}, false, ErrCredentials
	}
	if err := usableLocked(r); err != nil {
		s.mu.Unlock()
		s.compareDummy(pass)
		return Account{}, true, err
	}
	hash := r.Hash
	s.mu.Unlock()
	// The hash is compared outside the lock: bcrypt is slow on purpose.
	if bcrypt.CompareHashAndPassword(hash, []byte(pass)) != nil {
		s.mu.Lock()
		s.failLocked(key, source)
		s.mu.Unlock()
		return Account{}, true, ErrCredentials
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.locks.succeed(key, source)
	return s.viewLocked(r), true, nil
}

// compareDummy spends the time of a password comparison that fails.
func (s *Store) compareDummy(pass string) {
	s.dummyOnce.Do(func() {
		pw := make([]byte, 16)
		if _, err := rand.Read(pw); err != nil {
			panic("accounts: no randomness: " + err.Error())
		}
		h, err := bcrypt.GenerateFromPassword([]byte(hex.EncodeToString(pw)), s.cost)
		if err != nil {
			panic("accounts: dummy hash: " + err.Error())
		}
		s.dummy = h
	})
	_ = bcrypt.CompareHashAndPassword(s.dummy, []byte(pass))
}

// Key returns the IPMI key (the password) of user as seen from system's BMC,
// for RAKP from source (the console's address; "" for no lock check);
// found is false when no account there has the name.
func (s *Store) Key(system, user, source string) (key []byte, a Account, found bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.byNameLocked(user, system)
	if r == nil || !r.Reaches(system) {
		return nil, Account{}, false, ErrCredentials
	}
	if err := usableLocked(r); err != nil {
		return nil, Account{}, true, err
	}
	if source != "" {
		if err := s.lockedLocked(lockName(r.System, user), source); err != nil {
			return nil, Account{}, true, err
		}
	}
	k, ok := s.openSecretLocked(r)
	if !ok {
		return nil, Account{}, true, fmt.Errorf("account %q: the sealed password does not open with %s; set the password again: %w", user, keyFile, ErrCredentials)
	}
	return k, s.viewLocked(r), true, nil
}

// Failed counts an authentication failure of user at a BMC of system from
// source on the IPMI face towards the name's lock for that source.
func (s *Store) Failed(system, user, source string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failLocked(s.lockKeyLocked(system, user), source)
}

// Succeeded forgets the failures of user at a BMC of system from source.
func (s *Store) Succeeded(system, user, source string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.locks.succeed(s.lockKeyLocked(system, user), source)
}

// ByName returns the account named user at a BMC of system ("" for the
// service's listener, where a name several BMCs' accounts hold is none).
func (s *Store) ByName(system, user string) (Account, bool) {
	return s.lookup(func() *record { return s.byNameLocked(user, system) })
}
