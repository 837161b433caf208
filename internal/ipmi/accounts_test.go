package ipmi

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"
	"golang.org/x/crypto/bcrypt"

	"github.com/bmlab/bmlab/internal/accounts"
	"github.com/bmlab/bmlab/internal/redfish"
	"github.com/bmlab/bmlab/internal/testenv"
)

// accountStore is an empty account store in the test's directory, quick to
// hash (bcrypt's least cost), with the built-in user's name reserved.
func accountStore(t *testing.T) *accounts.Store {
	t.Helper()
	st, err := accounts.Open(t.TempDir(), accounts.WithCost(bcrypt.MinCost), accounts.WithReserved(testUser))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestAccountsAcrossFaces: one account store behind both faces. A user made
// over Redfish (gofish) logs in over IPMI (ipmitool) with its role's
// privilege limit; a user made with ipmitool's user commands logs in over
// Redfish, reaches only its machine, and as ReadOnly is refused a power
// change on both faces. The store is reopened from disk at the end.
func TestAccountsAcrossFaces(t *testing.T) {
	testenv.Integration(t)
	testenv.Command(t, "ipmitool")
	dir := t.TempDir()
	st, err := accounts.Open(dir, accounts.WithCost(bcrypt.MinCost), accounts.WithReserved(testUser))
	if err != nil {
		t.Fatal(err)
	}
	l := newLab(t, 2, "127.0.0.1", nil, WithAccounts(st))
	rf := redfish.New(l.svc, testenv.Logger(t), redfish.WithCredentials(testUser, testPass), redfish.WithAccounts(st))
	ts := httptest.NewServer(rf.Handler())
	t.Cleanup(ts.Close)
	login := func(user, pass string) *gofish.APIClient {
		t.Helper()
		c, err := gofish.Connect(gofish.ClientConfig{Endpoint: ts.URL, Username: user, Password: pass, BasicAuth: true})
		if err != nil {
			t.Fatalf("Redfish login as %s: %v", user, err)
		}
		t.Cleanup(c.Logout)
		return c
	}
	as := func(user, pass, level string, args ...string) (string, error) {
		return l.ipmitool(t, 0, []string{"-U", user, "-P", pass, "-L", level}, args...)
	}

	// Redfish → IPMI.
	admin := login(testUser, testPass)
	svc, err := admin.Service.AccountService()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateAccount("rfop", "rfop-password", "Operator"); err != nil {
		t.Fatalf("CreateAccount: %v", err)
	}
	if out, err := as("rfop", "rfop-password", "OPERATOR", "power", "on"); err != nil {
		t.Fatalf("Redfish-made Operator, power on over IPMI: %v\n%s", err, out)
	}
	waitPower(t, l, 0, "On")
	if out, err := as("rfop", "rfop-password", "ADMINISTRATOR", "power", "status"); err == nil {
		t.Errorf("Operator got an ADMINISTRATOR session:\n%s", out)
	}

	// IPMI → Redfish: ipmitool's user commands, as the bootstrap admin.
	for _, args := range [][]string{
		{"user", "set", "name", "5", "ipmiro"},
		{"user", "set", "password", "5", "ipmiro-pass"},
		{"user", "priv", "5", "2", "1"},
		{"user", "enable", "5"},
	} {
		l.mustIpmitool(t, 0, nil, args...)
	}
	list := l.mustIpmitool(t, 0, nil, "user", "list", "1")
	for _, want := range []string{"rfop", "ipmiro"} {
		if !strings.Contains(list, want) {
			t.Errorf("user list lacks %s:\n%s", want, list)
		}
	}
	if _, err := l.ipmitool(t, 1, []string{"-U", "ipmiro", "-P", "ipmiro-pass", "-L", "USER"}, "power", "status"); err == nil {
		t.Error("the account made on machine 0's BMC logs in on machine 1's")
	}
	if out, err := as("ipmiro", "ipmiro-pass", "USER", "power", "status"); err != nil {
		t.Fatalf("ReadOnly, power status over IPMI: %v\n%s", err, out)
	}
	if out, err := as("ipmiro", "ipmiro-pass", "USER", "power", "off"); err == nil || l.machine(t, 0).Power != "On" {
		t.Errorf("ReadOnly powered off over IPMI:\n%s", out)
	}
	ro := login("ipmiro", "ipmiro-pass")
	systems, err := ro.Service.Systems()
	if err != nil || len(systems) != 1 || systems[0].UUID != l.ids[0] {
		t.Fatalf("ReadOnly bound to machine 0 sees %d systems (%v)", len(systems), err)
	}
	if _, err := systems[0].Reset(schemas.ForceOffResetType); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("ReadOnly reset over Redfish: %v, want 403", err)
	}

	// Survives a restart of the store.
	st2, err := accounts.Open(dir, accounts.WithCost(bcrypt.MinCost))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st2.Verify("", "ipmiro", "ipmiro-pass", "192.0.2.1:1"); err != nil {
		t.Errorf("ipmiro after reopening: %v", err)
	}
}
