package ipmi

import (
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/accounts"
	"github.com/bmlab/bmlab/internal/sim"
	"github.com/bmlab/bmlab/internal/testenv"
)

// TestSOLNeedsOperatorAndOwner (issue 25): a ReadOnly account (User
// privilege) gets no interactive console; no user ends another user's SOL
// payload unless an Administrator; and an Operator bound to one system sees
// in `ipmitool user list` only the accounts of that system, not the global
// ones, as Redfish shows it. All with real ipmitool.
func TestSOLNeedsOperatorAndOwner(t *testing.T) {
	testenv.Integration(t)
	testenv.Command(t, "ipmitool")
	st := accountStore(t)
	be := &consoleSim{Backend: sim.New(1)}
	l := newLab(t, 1, "127.0.0.1", be, WithAccounts(st))
	for _, n := range []accounts.New{
		{UserName: "rouser", Password: "rouser-pass", Role: accounts.ReadOnly, Enabled: true, System: l.ids[0]},
		{UserName: "opuser", Password: "opuser-pass", Role: accounts.Operator, Enabled: true, System: l.ids[0]},
		{UserName: "globalop", Password: "globalop-pass", Role: accounts.Operator, Enabled: true},
	} {
		if _, err := st.Create(n); err != nil {
			t.Fatal(err)
		}
	}
	as := func(user, level string, args ...string) (string, error) {
		return l.ipmitool(t, 0, []string{"-U", user, "-P", user + "-pass", "-L", level}, args...)
	}

	// A ReadOnly account: no console, and ipmitool says why.
	ro := startSOLAs(t, l, 0, "rouser", "rouser-pass", "USER")
	exited := make(chan struct{})
	go func() { _ = ro.script.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
	}
	if strings.Contains(ro.out.String(), "SOL Session operational") || solActive(l, 0) {
		t.Fatalf("a ReadOnly account got a SOL console:\n%q", ro.out.String())
	}
	if !strings.Contains(ro.out.String(), "nsufficient privilege") {
		t.Errorf("ReadOnly sol activate: %q, want a refusal for privilege", ro.out.String())
	}

	// An Operator's console; others cannot end it, an Administrator can.
	op := startSOLAs(t, l, 0, "opuser", "opuser-pass", "OPERATOR")
	if !testenv.WaitFor(10*time.Second, func() bool { return strings.Contains(op.out.String(), testenv.Marker) }) {
		t.Fatalf("the Operator's console: no marker:\n%q", op.out.String())
	}
	for _, who := range []struct{ user, level string }{{"rouser", "USER"}, {"globalop", "OPERATOR"}} {
		out, err := as(who.user, who.level, "sol", "deactivate")
		if err == nil || !solActive(l, 0) {
			t.Errorf("%s ended the Operator's console (err %v):\n%s", who.user, err, out)
		}
	}
	l.mustIpmitool(t, 0, nil, "sol", "deactivate")
	if !testenv.WaitFor(3*time.Second, func() bool { return !solActive(l, 0) }) {
		t.Error("the Administrator's sol deactivate left the console active")
	}

	// The Operator bound to this system lists its system's accounts only.
	list, err := as("opuser", "OPERATOR", "user", "list", "1")
	if err != nil {
		t.Fatalf("user list as the bound Operator: %v\n%s", err, list)
	}
	for _, hidden := range []string{"globalop", testUser} {
		if strings.Contains(list, hidden) {
			t.Errorf("the bound Operator sees %s:\n%s", hidden, list)
		}
	}
	for _, want := range []string{"opuser", "rouser"} {
		if !strings.Contains(list, want) {
			t.Errorf("the bound Operator does not see %s of its system:\n%s", want, list)
		}
	}
	if full := l.mustIpmitool(t, 0, nil, "user", "list", "1"); !strings.Contains(full, "globalop") {
		t.Errorf("the Administrator does not see globalop:\n%s", full)
	}
}
