package accounts

import (
	"errors"
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
	if _, _, err := s2.Verify("alice", "alice-pass"); err != nil {
		t.Errorf("alice after restart: %v", err)
	}
	k, got, _, err := s2.Key("sys-1", "bob")
	if err != nil || string(k) != "bob-pass1" || got.ID != b.ID {
		t.Errorf("bob's IPMI key on sys-1: %q %+v %v", k, got, err)
	}
	if _, _, found, _ := s2.Key("sys-2", "bob"); found {
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

func TestStoreLocksAfterFailures(t *testing.T) {
	now := time.Unix(1000, 0)
	s := open(t, t.TempDir(), WithClock(func() time.Time { return now }))
	if err := s.SetPolicy(Policy{Threshold: 3, Duration: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(New{UserName: "eve", Password: "right-pass", Role: Administrator, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	gen := s.Generation()
	for i := 0; i < 3; i++ {
		if _, _, err := s.Verify("eve", "wrong-pass"); !errors.Is(err, ErrCredentials) {
			t.Fatalf("failure %d: %v", i, err)
		}
	}
	if _, _, err := s.Verify("eve", "right-pass"); !errors.Is(err, ErrLocked) {
		t.Fatalf("after 3 failures: %v, want ErrLocked", err)
	}
	if a, _ := s.ByName("eve"); !a.Locked {
		t.Error("account does not show Locked")
	}
	if s.Generation() == gen {
		t.Error("locking did not change the generation (cached credentials would stay valid)")
	}
	if _, _, _, err := s.Key("", "eve"); !errors.Is(err, ErrLocked) {
		t.Errorf("IPMI key of a locked account: %v", err)
	}
	now = now.Add(time.Minute + time.Second)
	if _, _, err := s.Verify("eve", "right-pass"); err != nil {
		t.Errorf("after the lock duration: %v", err)
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
