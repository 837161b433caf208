package ipmi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/bmlab/bmlab/internal/accounts"
	"github.com/bmlab/bmlab/internal/ipmi/client"
	"github.com/bmlab/bmlab/internal/ipmi/wire"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/redfish"
	"github.com/bmlab/bmlab/internal/testenv"
)

// testPassword sends Set User Password's test (operation 3, IPMI v2.0
// §22.30) of pass for user uid in session c.
func testPassword(t *testing.T, c *client.Client, uid uint8, pass string) wire.CompletionCode {
	t.Helper()
	d := make([]byte, 2+16)
	d[0], d[1] = uid, 3
	copy(d[2:], pass)
	code, _, err := c.Do(wire.NetFnApp, cmdSetUserPassword, d...)
	if err != nil {
		t.Fatalf("test password of user %d: %v", uid, err)
	}
	return code
}

// TestIPMIPasswordTestIsALogin: Set User Password's test (the attack of
// issue 46: a system-bound Administrator tested the service
// administrator's and every global account's password, about 1,150 guesses
// a second in one session, with nothing logged, throttled or locked). Over
// lanplus, with the project's client, as an Administrator bound to
// machine 0: the daemon's user (ID 2) and a global Administrator are empty
// slots to it, whatever the password; a ReadOnly account of its own
// machine is tested, each wrong guess is logged and counted: after the
// lockout threshold (5) the name is locked for the guesser's address (the
// right password then fails too, and a Redfish login from that address is
// refused as locked), and after the source's budget (20) the test answers
// C0h (node busy) before comparing anything.
func TestIPMIPasswordTestIsALogin(t *testing.T) {
	st := accountStore(t)
	core, logs := observer.New(zap.InfoLevel)
	throttle := accounts.NewThrottle(20, time.Hour)
	l := newLabLog(t, zap.New(core), 1, "127.0.0.1", nil, WithAccounts(st), WithThrottle(throttle))
	global, err := st.Create(accounts.New{UserName: "global-admin", Password: "global-pass-1", Role: accounts.Administrator, Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Create(accounts.New{UserName: "m0-admin", Password: "m0-admin-pass", Role: accounts.Administrator, Enabled: true, System: l.ids[0]}); err != nil {
		t.Fatal(err)
	}
	ro, err := st.Create(accounts.New{UserName: "m0-ro", Password: "m0-ro-pass", Role: accounts.ReadOnly, Enabled: true, System: l.ids[0]})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(context.Background(), l.addrs[0], client.Config{Username: "m0-admin", Password: "m0-admin-pass"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// Users it may not see: an empty slot, whatever the guess.
	for _, tc := range []struct {
		uid  uint8
		pass string
	}{{2, testPass}, {2, "wrong"}, {global.Slot, "global-pass-1"}, {global.Slot, "wrong"}} {
		if code := testPassword(t, c, tc.uid, tc.pass); code != wire.CodeInvalidDataField {
			t.Errorf("test of user %d (not this account's to see) with %q: %s, want %s", tc.uid, tc.pass, code, wire.CodeInvalidDataField)
		}
	}
	// Its own machine's account: tested, and guessing costs.
	if code := testPassword(t, c, ro.Slot, "m0-ro-pass"); code != wire.CodeOK {
		t.Fatalf("test of its machine's account with the right password: %s", code)
	}
	var codes []string
	for range 24 {
		codes = append(codes, testPassword(t, c, ro.Slot, "guess").String())
	}
	want := strings.Repeat(codePasswordTestFailed.String()+",", 20) + strings.Repeat(wire.CodeNodeBusy.String()+",", 4)
	if got := strings.Join(codes, ",") + ","; got != want {
		t.Errorf("24 wrong guesses answered %s; want 20 failures, then node busy", got)
	}
	if err := st.LockedFor(l.ids[0], "m0-ro", "127.0.0.1:1"); err == nil {
		t.Error("m0-ro is not locked for the guesser's address after 20 wrong guesses")
	}
	if err := st.LockedFor(l.ids[0], "m0-ro", "192.0.2.9:1"); err != nil {
		t.Errorf("m0-ro is locked for another address: %v", err)
	}
	if n := len(logs.FilterMessage("login refused").All()); n < 20 {
		t.Errorf("%d refusals logged, want one per wrong guess at least", n)
	}
	// The same source's Redfish login: refused as locked.
	rf := redfish.New(l.svc, testenv.Logger(t), redfish.WithCredentials(testUser, testPass), redfish.WithAccounts(st), redfish.WithThrottle(throttle))
	r := httptest.NewRequest(http.MethodGet, "/redfish/v1/Systems", nil)
	r.RemoteAddr = "127.0.0.1:40000"
	r.SetBasicAuth("m0-ro", "m0-ro-pass")
	w := httptest.NewRecorder()
	rf.Handler().ServeHTTP(w, r)
	if w.Code != http.StatusTooManyRequests && (w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), "locked")) {
		t.Errorf("Redfish login of m0-ro from the guesser's address: %d %s; want 429 or 401 locked", w.Code, w.Body)
	}
}

// TestIPMIMachineUserBoundToItsMachine: the escalation of issue 46. A
// machine's own BMC user (Settings.Credentials, as vbmcd ipmi set gives it
// on libvirt) is bound to its machine on every face. With ipmitool at
// machine 0's BMC it sets the password of a global Administrator
// (refused: insufficient privilege, D4h), renames, disables, lowers and
// deletes it (each refused), and does not see it in the user list; so that
// account, over Redfish with the password it tried, cannot power off
// machine 1 (401), and machine 1 stays on. It still administers its own
// machine's users: a user it names over IPMI is machine 0's. Over
// Redfish it changes no account either. Before the fix the password change
// succeeded and the ForceOff of machine 1 was answered 204.
func TestIPMIMachineUserBoundToItsMachine(t *testing.T) {
	testenv.Integration(t)
	testenv.Command(t, "ipmitool")
	st := accountStore(t)
	l := newLab(t, 2, "127.0.0.1", nil, WithAccounts(st))
	const ownUser, ownPass = "m0-bmc", "m0-bmc-pass"
	if _, err := l.svc.UpdateSettings(context.Background(), l.ids[0], func(s *machine.Settings) error {
		s.Credentials = []machine.Credential{{Username: ownUser, Password: ownPass}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ops, err := st.Create(accounts.New{UserName: "ops", Password: "ops-password-1", Role: accounts.Administrator, Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.svc.Reset(context.Background(), l.ids[1], machine.ResetOn); err != nil {
		t.Fatal(err)
	}
	waitPower(t, l, 1, machine.PowerOn)
	as := func(args ...string) (string, error) {
		return l.ipmitool(t, 0, []string{"-U", ownUser, "-P", ownPass, "-L", "ADMINISTRATOR"}, args...)
	}
	// The machine's own user logs in at its BMC (the users follow the
	// settings; wait for them).
	if !testenv.WaitFor(5*time.Second, func() bool { _, err := as("power", "status"); return err == nil }) {
		t.Fatal("the machine's own user cannot log in at its BMC")
	}
	slot := strconv.Itoa(int(ops.Slot))
	refused := func(args ...string) {
		t.Helper()
		out, err := as(args...)
		if err == nil || !strings.Contains(strings.ToLower(out), "insufficient privilege") {
			t.Errorf("ipmitool %s as machine 0's own user: %v %q; want refused, insufficient privilege", strings.Join(args, " "), err, out)
		}
	}
	refused("user", "set", "password", slot, "hacked-password")

	// Redfish, as the attacker would go on: the global Administrator with
	// the password it tried powers off another machine.
	rf := redfish.New(l.svc, testenv.Logger(t), redfish.WithCredentials(testUser, testPass), redfish.WithAccounts(st))
	do := func(method, path, user, pass, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.SetBasicAuth(user, pass)
		if body != "" {
			r.Header.Set("Content-Type", "application/json")
		}
		w := httptest.NewRecorder()
		rf.Handler().ServeHTTP(w, r)
		return w
	}
	reset := "/redfish/v1/Systems/" + l.ids[1] + "/Actions/ComputerSystem.Reset"
	if w := do(http.MethodPost, reset, "ops", "hacked-password", `{"ResetType":"ForceOff"}`); w.Code != http.StatusUnauthorized {
		t.Errorf("ForceOff of machine 1 as ops with the password tried: %d, want 401", w.Code)
	}
	if m := l.machine(t, 1); m.Power != machine.PowerOn {
		t.Errorf("machine 1 is %s, want On", m.Power)
	}
	if w := do(http.MethodPatch, "/redfish/v1/AccountService/Accounts/"+ops.ID, ownUser, ownPass, `{"Password":"hacked-password"}`); w.Code < 400 {
		t.Errorf("PATCH of the global Administrator's password over Redfish as machine 0's own user: %d", w.Code)
	}

	// The rest of what a user command may change.
	refused("user", "set", "name", slot, "ops2")
	refused("user", "disable", slot)
	refused("user", "priv", slot, "2", "1")
	if list, _ := as("user", "list", "1"); strings.Contains(list, "ops") {
		t.Errorf("the global Administrator is listed to machine 0's own user:\n%s", list)
	}
	a, err := st.Get(ops.ID)
	if err != nil || a.UserName != "ops" || !a.Enabled || a.Role != accounts.Administrator {
		t.Errorf("the global Administrator after the attempts: %+v %v", a, err)
	}

	// Its own machine's users it still administers.
	for _, args := range [][]string{{"user", "set", "name", "9", "m0-new"}, {"user", "set", "password", "9", "m0-new-pass"}} {
		if out, err := as(args...); err != nil {
			t.Fatalf("ipmitool %s as machine 0's own user: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if made, ok := st.BySlot(l.ids[0], 9); !ok || made.UserName != "m0-new" || made.System != l.ids[0] {
		t.Errorf("the user it named: %+v %v, want m0-new bound to machine 0", made, ok)
	}
}
