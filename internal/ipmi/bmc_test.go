package ipmi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/bmlab/bmlab/internal/accounts"
	"github.com/bmlab/bmlab/internal/ipmi/client"
	"github.com/bmlab/bmlab/internal/ipmi/wire"
	"github.com/bmlab/bmlab/internal/machine"
)

func TestSessionAndPower(t *testing.T) {
	l := newLab(t, 1, "127.0.0.1", nil)
	for _, suite := range []int{17, 3} {
		c := l.dial(t, 0, suite)
		code, data, err := c.Do(wire.NetFnChassis, cmdGetChassisStatus)
		if err != nil || code != wire.CodeOK || data[0]&1 != 0 {
			t.Fatalf("suite %d: chassis status: %v %v % x", suite, err, code, data)
		}
		code, _, err = c.Do(wire.NetFnChassis, cmdChassisControl, 0x01)
		if err != nil || code != wire.CodeOK {
			t.Fatalf("power on: %v %v", err, code)
		}
		if m := l.machine(t, 0); m.Power != machine.PowerOn {
			t.Fatalf("power after on: %s", m.Power)
		}
		code, _, _ = c.Do(wire.NetFnChassis, cmdChassisControl, 0x00)
		if code != wire.CodeOK || l.machine(t, 0).Power != machine.PowerOff {
			t.Fatalf("power off: %v %s", code, l.machine(t, 0).Power)
		}
	}
}

func TestRAKPErrors(t *testing.T) {
	l := newLab(t, 1, "127.0.0.1", nil)
	ctx := context.Background()
	for _, tt := range []struct {
		user, pass string
		want       wire.Status
	}{
		// An unknown user is told apart from a wrong password by nothing.
		{"nobody", testPass, wire.StatusInvalidIntegrityValue},
		{testUser, "wrong", wire.StatusInvalidIntegrityValue},
	} {
		_, err := client.Dial(ctx, l.addrs[0], client.Config{Username: tt.user, Password: tt.pass})
		var se *client.StatusError
		if !errors.As(err, &se) || se.Status != tt.want {
			t.Errorf("%s/%s: err %v, want status %s", tt.user, tt.pass, err, tt.want)
		}
	}
}

func TestCipherSuitesBeforeSession(t *testing.T) {
	l := newLab(t, 1, "127.0.0.1", nil)
	code, data, err := client.Sessionless(context.Background(), l.addrs[0], wire.NetFnApp, cmdGetChannelCipherSuites, 0x0e, 0x00, 0x80)
	if err != nil || code != wire.CodeOK {
		t.Fatalf("%v %v", err, code)
	}
	want := []byte{0x01, 0xc0, 17, 0x03, 0x44, 0x81, 0xc0, 3, 0x01, 0x41, 0x81}
	if diff := cmp.Diff(want, data); diff != "" {
		t.Errorf("cipher suites (-want +got):\n%s", diff)
	}
	// Chassis Control outside a session is dropped, not run.
	if _, _, err := client.Sessionless(context.Background(), l.addrs[0], wire.NetFnChassis, cmdChassisControl, 0x01); err == nil {
		t.Errorf("chassis control answered outside a session")
	}
	if l.machine(t, 0).Power != machine.PowerOff {
		t.Errorf("machine powered on by a session-less request")
	}
}

// TestCodeFor: each kind of model error has its completion code; a setting
// the machine cannot take is D6h, never C1h (unknown command).
func TestCodeFor(t *testing.T) {
	for _, c := range []struct {
		err  error
		want wire.CompletionCode
	}{
		{nil, wire.CodeOK},
		{fmt.Errorf("boot: %w", machine.ErrInvalid), wire.CodeInvalidDataField},
		{fmt.Errorf("nmi: %w", machine.ErrConflict), wire.CodeNotInPresentState},
		{fmt.Errorf("%w: node-1 has no CD-ROM drive", machine.ErrUnsupported), wire.CodeSubFunctionDisabled},
		{fmt.Errorf("get: %w", machine.ErrNotFound), wire.CodeDestinationUnavail},
		{fmt.Errorf("libvirt: %w", machine.ErrUnavailable), wire.CodeDestinationUnavail},
		{context.DeadlineExceeded, wire.CodeTimeout},
		{errors.New("disk on fire"), wire.CodeUnspecified},
	} {
		if got := codeFor(c.err); got != c.want {
			t.Errorf("codeFor(%v) = %#x, want %#x", c.err, got, c.want)
		}
	}
}

// TestIPMILoginThrottle: after its budget of failed logins a source gets no
// answer to RAKP 1 until it earns a try, even with the right password; a
// successful login costs nothing; each refusal is logged with a bounded
// user name.
func TestIPMILoginThrottle(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	l := newLabLog(t, zap.New(core), 1, "127.0.0.1", nil, WithThrottle(accounts.NewThrottle(3, time.Hour)))
	ctx := context.Background()
	dial := func(user, pass string) error {
		c, err := client.Dial(ctx, l.addrs[0], client.Config{Username: user, Password: pass, Timeout: 300 * time.Millisecond})
		if err == nil {
			c.Close()
		}
		return err
	}
	for i := range 5 {
		if err := dial(testUser, testPass); err != nil {
			t.Fatalf("good login %d: %v", i, err)
		}
	}
	long := strings.Repeat("x", 16) // the longest name RAKP 1 carries
	for i, user := range []string{testUser, "nobody", long} {
		var se *client.StatusError
		if err := dial(user, "wrong"); !errors.As(err, &se) {
			t.Fatalf("bad login %d: %v, want a RAKP status", i, err)
		}
	}
	if err := dial(testUser, testPass); err == nil || errors.As(err, new(*client.StatusError)) {
		t.Errorf("after 3 failures, the right password: %v; want no answer", err)
	}
	// The three wrong passwords, then the unanswered tries of the right
	// one (the client repeats RAKP 1): every refusal is logged, the
	// throttled ones too (issue 32: they were not).
	all := logs.FilterMessage("login refused").All()
	var refused, throttled []observer.LoggedEntry
	for _, e := range all {
		if why, _ := e.ContextMap()["why"].(string); strings.Contains(why, "too many failed logins") {
			throttled = append(throttled, e)
		} else {
			refused = append(refused, e)
		}
	}
	if len(refused) != 3 || len(throttled) == 0 {
		t.Fatalf("%d refusals and %d throttled tries logged, want 3 and at least 1: %v", len(refused), len(throttled), all)
	}
	for _, e := range all {
		f := e.ContextMap()
		if u, _ := f["user"].(string); len(u) > 64+len("…") || f["remote"] == nil || f["face"] != "ipmi" {
			t.Errorf("refusal logged as %v", f)
		}
	}
}

// TestIpmitoolRefusalLogged: ipmitool with an unknown user and with a wrong
// password fails the same way, and the BMC logs each refusal.
func TestIpmitoolRefusalLogged(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	l := newLabLog(t, zap.New(core), 1, "127.0.0.1", nil)
	var outs []string
	for _, user := range []string{"nobody", testUser} {
		out, err := l.ipmitool(t, 0, []string{"-U", user, "-P", "wrong-password", "-R", "1"}, "power", "status")
		if err == nil {
			t.Fatalf("%s with a wrong password: %s", user, out)
		}
		outs = append(outs, out)
	}
	if outs[0] != outs[1] {
		t.Errorf("ipmitool tells an unknown user from a wrong password:\n%s\nversus\n%s", outs[0], outs[1])
	}
	// ipmitool stops after RAKP 2; the half-open sessions are refused when
	// they expire, as a sweep a minute later finds them.
	l.mgr.mu.Lock()
	for _, b := range l.mgr.bmcs {
		b.sweep(time.Now().Add(time.Minute))
	}
	l.mgr.mu.Unlock()
	var users []string
	for _, e := range logs.FilterMessage("login refused").All() {
		users = append(users, e.ContextMap()["user"].(string))
	}
	// The sweep finds the half-open sessions in no particular order.
	slices.Sort(users)
	if want := []string{testUser, "nobody"}; !cmp.Equal(users, want) {
		t.Errorf("refusals logged for %v, want %v", users, want)
	}
}
