package ipmi

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

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
		{"nobody", testPass, wire.StatusUnauthorizedName},
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
