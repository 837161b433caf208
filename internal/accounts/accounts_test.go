package accounts

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

func open(t *testing.T, dir string, opts ...Option) *Store {
	t.Helper()
	s, err := Open(dir, append([]Option{WithCost(bcrypt.MinCost), WithReserved("admin")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStoreSurvivesRestartHashedAndSealed(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	a, err := s.Create(New{UserName: "alice", Password: "alice-pass", Role: Operator, Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	if a.Slot != FirstSlot || a.ID != "1" {
		t.Errorf("first account %+v, want ID 1 at slot %d", a, FirstSlot)
	}
	b, err := s.Create(New{UserName: "bob", Password: "bob-pass1", Role: ReadOnly, Enabled: true, System: "sys-1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{dataFile, keyFile} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", f, st.Mode().Perm())
		}
	}
	raw, _ := os.ReadFile(filepath.Join(dir, dataFile))
	if strings.Contains(string(raw), "alice-pass") || strings.Contains(string(raw), "bob-pass1") {
		t.Fatalf("a password is in the clear in %s:\n%s", dataFile, raw)
	}

	s2 := open(t, dir)
	if _, _, err := s2.Verify("", "alice", "alice-pass", "192.0.2.1:1"); err != nil {
		t.Errorf("alice after restart: %v", err)
	}
	k, got, _, err := s2.Key("sys-1", "bob", "192.0.2.1:1")
	if err != nil || string(k) != "bob-pass1" || got.ID != b.ID {
		t.Errorf("bob's IPMI key on sys-1: %q %+v %v", k, got, err)
	}
	if _, _, found, _ := s2.Key("sys-2", "bob", ""); found {
		t.Error("bob, bound to sys-1, is known on sys-2")
	}
	if got := s2.List("sys-2"); len(got) != 1 || got[0].UserName != "alice" {
		t.Errorf("accounts reaching sys-2: %+v, want alice only", got)
	}
}

func TestStoreRefusesBadValues(t *testing.T) {
	s := open(t, t.TempDir())
	for _, n := range []New{
		{UserName: "admin", Password: "long-enough", Role: ReadOnly},
		{UserName: "x y", Password: "long-enough", Role: ReadOnly},
		{UserName: "carol", Password: "short", Role: ReadOnly},
		{UserName: "carol", Password: "0123456789012345678901", Role: ReadOnly},
		{UserName: "carol", Password: "long-enough", Role: "Root"},
		{UserName: "carol", Password: "long-enough", Role: ReadOnly, Slot: 2},
	} {
		if _, err := s.Create(n); err == nil {
			t.Errorf("Create(%+v) accepted", n)
		}
	}
	if _, err := s.Create(New{UserName: "dave", Password: "long-enough", Role: ReadOnly, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(New{UserName: "dave", Password: "long-enough", Role: ReadOnly}); !errors.Is(err, ErrExists) {
		t.Errorf("second dave: %v, want ErrExists", err)
	}
}

// eveLocks is a store on a clock read from *now (its second result) whose
// lockout policy locks after threshold failures for a minute, holding one
// enabled administrator, eve (password right-pass).
func eveLocks(t *testing.T, threshold int) (*Store, *time.Time, Account) {
	t.Helper()
	now := new(time.Time)
	*now = time.Unix(1000, 0)
	s := open(t, t.TempDir(), WithClock(func() time.Time { return *now }))
	if err := s.SetPolicy(Policy{Threshold: threshold, Duration: time.Minute}); err != nil {
		t.Fatal(err)
	}
	a, err := s.Create(New{UserName: "eve", Password: "right-pass", Role: Administrator, Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	return s, now, a
}

// Threshold failures from one source lock the name for that source only:
// another source logs in, and what is logged in stays (issue 32: one
// source without credentials kept about 60 accounts locked for everyone).
// Unknown names lock alike, so a lock tells nothing of which names exist.
func TestStoreLocksPerSource(t *testing.T) {
	s, now, _ := eveLocks(t, 3)
	const attacker, owner = "192.0.2.66:4000", "198.51.100.7:5000"
	gen := s.Generation()
	for i := 0; i < 3; i++ {
		if _, _, err := s.Verify("", "eve", "wrong-pass", attacker); !errors.Is(err, ErrCredentials) {
			t.Fatalf("failure %d: %v", i, err)
		}
		if _, _, err := s.Verify("", "nobody", "wrong-pass", attacker); !errors.Is(err, ErrCredentials) {
			t.Fatalf("unknown name, failure %d: %v", i, err)
		}
	}
	var le *LockedError
	if _, found, err := s.Verify("", "eve", "right-pass", "192.0.2.66:4001"); !errors.As(err, &le) || !found || !le.Until.Equal(now.Add(time.Minute)) {
		t.Fatalf("the attacker's source after 3 failures, right password, another port: %v, want a LockedError until %v", err, now.Add(time.Minute))
	}
	if _, found, err := s.Verify("", "nobody", "any-pass", attacker); !errors.Is(err, ErrLocked) || found {
		t.Errorf("an unknown name after 3 failures: found %v, %v, want ErrLocked as an account's", found, err)
	}
	if _, _, err := s.Verify("", "eve", "right-pass", owner); err != nil {
		t.Errorf("another source, right password: %v, want it logged in", err)
	}
	if err := s.LockedFor("", "eve", owner); err != nil {
		t.Errorf("LockedFor another source: %v", err)
	}
	if err := s.LockedFor("", "eve", attacker); !errors.Is(err, ErrLocked) {
		t.Errorf("LockedFor the attacker's source: %v, want ErrLocked", err)
	}
	if a, _ := s.ByName("", "eve"); !a.Locked {
		t.Error("the account does not show Locked while a source holds a lock")
	}
	if s.Generation() != gen {
		t.Error("a lock changed the generation: what is logged in would be checked again and refused")
	}
	if _, _, _, err := s.Key("", "eve", attacker); !errors.Is(err, ErrLocked) {
		t.Errorf("IPMI key for the locked source: %v", err)
	}
	if _, _, _, err := s.Key("", "eve", owner); err != nil {
		t.Errorf("IPMI key for another source: %v", err)
	}
	*now = now.Add(time.Minute + time.Second)
	if _, _, err := s.Verify("", "eve", "right-pass", attacker); err != nil {
		t.Errorf("after the lock duration: %v", err)
	}
	if err := s.LockedFor("", "eve", attacker); err != nil {
		t.Errorf("LockedFor after the lock duration: %v", err)
	}
}

// Once lockGlobalSources sources hold a lock on a name at once (a guesser
// spread over addresses), the name is locked for every source; the
// administrator's Unlock ends every lock.
func TestStoreLocksEverywhereFromManySources(t *testing.T) {
	s, _, a := eveLocks(t, 2)
	const owner = "198.51.100.7:5000"
	for i := range lockGlobalSources {
		src := fmt.Sprintf("192.0.2.%d:4000", 10+i)
		for range 2 {
			s.Verify("", "eve", "wrong-pass", src)
		}
		_, _, err := s.Verify("", "eve", "right-pass", owner)
		if i < lockGlobalSources-1 && err != nil {
			t.Fatalf("%d sources locked: another source refused: %v", i+1, err)
		}
		if i == lockGlobalSources-1 && !errors.Is(err, ErrLocked) {
			t.Fatalf("%d sources locked: another source %v, want ErrLocked", i+1, err)
		}
	}
	if _, err := s.Update(a.ID, Change{Unlock: true}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Verify("", "eve", "right-pass", "192.0.2.10:4000"); err != nil {
		t.Errorf("after Unlock: %v", err)
	}
}

// The lock table is bounded: lockNames names, lockSourcesPerName sources
// each, the least recently failed going first and a locked one last.
func TestLockTableBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	var l lockout
	p := Policy{Threshold: 1, Duration: time.Hour}
	l.fail("target", "192.0.2.1:1", p, now)
	for i := range lockNames + 100 {
		l.fail(fmt.Sprintf("name-%d", i), "192.0.2.2:1", Policy{Threshold: 5, Duration: time.Hour}, now.Add(time.Duration(i)))
	}
	if len(l.names) > lockNames {
		t.Errorf("%d names kept, want at most %d", len(l.names), lockNames)
	}
	if l.until("target", "192.0.2.1:1", now).IsZero() {
		t.Error("the locked name was forgotten before names that were not locked")
	}
	for i := range 3 * lockSourcesPerName {
		l.fail("target", fmt.Sprintf("198.51.100.%d:1", i), Policy{Threshold: 5, Duration: time.Hour}, now.Add(time.Duration(i)))
	}
	if n := len(l.names["target"].src); n > lockSourcesPerName {
		t.Errorf("%d sources kept for one name, want at most %d", n, lockSourcesPerName)
	}
	if l.until("target", "192.0.2.1:1", now).IsZero() {
		t.Error("the locked source was forgotten before sources that were not locked")
	}
}

func TestRolePrivileges(t *testing.T) {
	for _, tc := range []struct {
		r    Role
		ipmi uint8
		want string
	}{
		{Administrator, IPMIAdmin, "Login ConfigureManager ConfigureUsers ConfigureComponents ConfigureSelf"},
		{Operator, IPMIOperator, "Login ConfigureComponents ConfigureSelf"},
		{ReadOnly, IPMIUser, "Login ConfigureSelf"},
	} {
		if got := strings.Join(tc.r.AssignedPrivileges(), " "); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.r, got, tc.want)
		}
		if tc.r.IPMILimit() != tc.ipmi {
			t.Errorf("%s: IPMI limit %d, want %d", tc.r, tc.r.IPMILimit(), tc.ipmi)
		}
		if back, ok := RoleForIPMI(tc.ipmi); !ok || back != tc.r {
			t.Errorf("RoleForIPMI(%d) = %s", tc.ipmi, back)
		}
	}
}
