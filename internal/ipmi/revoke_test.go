package ipmi

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/accounts"
	"github.com/bmlab/bmlab/internal/ipmi/client"
	"github.com/bmlab/bmlab/internal/ipmi/wire"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/sim"
	"github.com/bmlab/bmlab/internal/testenv"
)

// shellAs runs `ipmitool shell` against BMC i as user at level under
// script(1): one session kept open, commands typed one by one.
func shellAs(t *testing.T, l *lab, i int, user, pass, level string) *solConsole {
	t.Helper()
	return underScript(t, l, i, user, pass, level, "shell")
}

// run types a command into the shell and waits until its output holds
// want (and returns it), failing after 20 s.
func (c *solConsole) run(t *testing.T, command, want string) string {
	t.Helper()
	from := len(c.out.String())
	if _, err := c.in.Write([]byte(command + "\n")); err != nil {
		t.Fatal(err)
	}
	var got string
	if !testenv.WaitFor(20*time.Second, func() bool {
		got = c.out.String()[from:]
		return strings.Contains(got, want)
	}) {
		t.Fatalf("ipmitool shell, %q: no %q in %q", command, want, got)
	}
	return got
}

func bmcSessions(l *lab, i int) int {
	l.mgr.mu.Lock()
	b := l.mgr.bmcs[l.ids[i]]
	l.mgr.mu.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, s := range b.sessions {
		if s.state == stateActive {
			n++
		}
	}
	return n
}

// An established IPMI session is held to its account as the account is now
// (issue 32: a power off went through 4 s after the account was deleted,
// 16 power changes after it was lowered to ReadOnly): deleting or
// disabling the account ends its sessions, and its serial console, within
// a second; lowering its role lowers every session's privilege at once, so
// the next power change is refused ("Insufficient privilege level") and a
// serial console below Operator ends. With real ipmitool, one session kept
// open (`ipmitool shell`, `sol activate`).
func TestIPMISessionsFollowTheirAccount(t *testing.T) {
	testenv.Integration(t)
	testenv.Command(t, "ipmitool")
	for _, tc := range []struct {
		name   string
		change func(st *accounts.Store, a accounts.Account) error
		ends   bool // the session ends; else it is lowered
	}{
		{"deleted", func(st *accounts.Store, a accounts.Account) error { return st.Delete(a.ID) }, true},
		{"disabled", func(st *accounts.Store, a accounts.Account) error {
			off := false
			_, err := st.Update(a.ID, accounts.Change{Enabled: &off})
			return err
		}, true},
		{"lowered to ReadOnly", func(st *accounts.Store, a accounts.Account) error {
			ro := accounts.ReadOnly
			_, err := st.Update(a.ID, accounts.Change{Role: &ro})
			return err
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := accountStore(t)
			be := &consoleSim{Backend: sim.New(1)}
			l := newLab(t, 1, "127.0.0.1", be, WithAccounts(st))
			a, err := st.Create(accounts.New{UserName: "op", Password: "op-password", Role: accounts.Operator, Enabled: true})
			if err != nil {
				t.Fatal(err)
			}
			sh := shellAs(t, l, 0, "op", "op-password", "OPERATOR")
			sh.run(t, "power status", "Chassis Power is off")
			sol := startSOLAs(t, l, 0, "op", "op-password", "OPERATOR")
			if !testenv.WaitFor(10*time.Second, func() bool { return strings.Contains(sol.out.String(), testenv.Marker) }) {
				t.Fatalf("the Operator's console: no marker:\n%q", sol.out.String())
			}
			if n := bmcSessions(l, 0); n != 2 {
				t.Fatalf("%d sessions, want the shell's and the console's", n)
			}

			changed := time.Now()
			if err := tc.change(st, a); err != nil {
				t.Fatal(err)
			}
			if !testenv.WaitFor(time.Second, func() bool { return !solActive(l, 0) }) {
				t.Fatal("the serial console still runs a second after the change")
			}
			t.Logf("the serial console ended %v after the change", time.Since(changed).Round(time.Millisecond))
			if tc.ends {
				if !testenv.WaitFor(time.Second, func() bool { return bmcSessions(l, 0) == 0 }) {
					t.Fatalf("%d sessions a second after the change, want none", bmcSessions(l, 0))
				}
				// The shell's session is gone: its command gets no
				// answer, and changes nothing.
				from := len(sh.out.String())
				sh.in.Write([]byte("power on\n"))
				time.Sleep(3 * time.Second) // the window in which nothing may happen
				if p := l.machine(t, 0).Power; p != machine.PowerOff {
					t.Errorf("power %s after a deleted account's power on, want Off", p)
				}
				if out := sh.out.String()[from:]; strings.Contains(out, "Up/On") {
					t.Errorf("the deleted account's power on was answered: %q", out)
				}
				return
			}
			out := sh.run(t, "power on", "nsufficient privilege")
			if p := l.machine(t, 0).Power; p != machine.PowerOff {
				t.Errorf("power %s after the lowered account's power on, want Off: %q", p, out)
			}
			sh.run(t, "power status", "Chassis Power is off") // a ReadOnly right stays
		})
	}
}

// A BMC keeps its last session for an Administrator: ReadOnly consoles
// fill the rest and the next is told "insufficient resources", and an
// Administrator (ipmitool) still gets in (issue 32: a ReadOnly user holding
// all 16 sessions kept the Administrator out).
func TestIPMIKeepsASessionForTheAdministrator(t *testing.T) {
	testenv.Integration(t)
	testenv.Command(t, "ipmitool")
	st := accountStore(t)
	const limit = 4
	l := newLab(t, 1, "127.0.0.1", nil, WithAccounts(st), WithSessionLimit(limit))
	if _, err := st.Create(accounts.New{UserName: "viewer", Password: "viewer-pass", Role: accounts.ReadOnly, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range limit - 1 {
		c, err := client.Dial(ctx, l.addrs[0], client.Config{Username: "viewer", Password: "viewer-pass", Privilege: privUser})
		if err != nil {
			t.Fatalf("ReadOnly session %d: %v", i, err)
		}
		t.Cleanup(func() { c.Close() })
	}
	var se *client.StatusError
	if _, err := client.Dial(ctx, l.addrs[0], client.Config{Username: "viewer", Password: "viewer-pass", Privilege: privUser}); !errors.As(err, &se) || se.Status != wire.StatusNoResources {
		t.Errorf("a ReadOnly session past %d of %d: %v, want insufficient resources", limit-1, limit, err)
	}
	if out := l.mustIpmitool(t, 0, nil, "power", "status"); !strings.Contains(out, "Chassis Power is") {
		t.Errorf("the Administrator with the other sessions taken: %q", out)
	}
}
