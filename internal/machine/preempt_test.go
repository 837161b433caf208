package machine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/sim"
	"github.com/bmlab/bmlab/internal/testenv"
)

// TestForcedActionPreemptsPendingStart (issue 25): Ironic reads PoweringOn
// as on and sends ForceOff at once, and does not retry a 409. A forced
// action preempts a start that waits for its turn: ForceOff leaves the
// machine off (the start never happens), ForceRestart lets it start; an
// action that cannot be combined is refused with a retry hint.
func TestForcedActionPreemptsPendingStart(t *testing.T) {
	be := sim.New(2)
	svc := machine.NewService(be, nil, machine.WithStartPacing(1, time.Minute))
	ctx := context.Background()
	a, b := be.List()[0].ID, be.List()[1].ID
	power := func(id string) machine.PowerState {
		m, err := svc.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		return m.Power
	}
	if err := svc.Reset(ctx, a, machine.ResetOn); err != nil {
		t.Fatal(err)
	}
	queue := func() {
		t.Helper()
		if err := svc.Reset(ctx, b, machine.ResetOn); err != nil {
			t.Fatal(err)
		}
		if p := power(b); p != machine.PowerPoweringOn {
			t.Fatalf("a start waiting a minute for its turn reads %s, want PoweringOn", p)
		}
	}
	queue()

	// Cannot be combined: refused, with a retry hint.
	err := svc.Reset(ctx, b, machine.ResetGracefulShutdown)
	var busy *machine.BusyError
	if !errors.As(err, &busy) || busy.RetryAfter <= 0 || !errors.Is(err, machine.ErrConflict) {
		t.Errorf("GracefulShutdown during a start: %v, want a BusyError with a retry hint", err)
	}
	// On joins the start under way.
	if err := svc.Reset(ctx, b, machine.ResetOn); err != nil {
		t.Errorf("On during a start: %v, want accepted", err)
	}

	// ForceOff preempts: off at once, not a minute later, and the start
	// never comes.
	forceOffWins := func(what string) {
		t.Helper()
		if err := svc.Reset(ctx, b, machine.ResetForceOff); err != nil {
			t.Fatalf("ForceOff during %s: %v, want accepted", what, err)
		}
		if !testenv.WaitFor(5*time.Second, func() bool { return svc.PowerQueue().Pending == 0 }) {
			t.Fatalf("%s is still under way after a ForceOff: %+v", what, svc.PowerQueue())
		}
		if p := power(b); p != machine.PowerOff {
			t.Errorf("after ForceOff during %s: %s, want Off", what, p)
		}
	}
	forceOffWins("a pending start")
	if m, _ := svc.Get(b); m.PowerFault != "" {
		t.Errorf("a preempted start left a fault: %q", m.PowerFault)
	}

	// ForceRestart preempts too, and the machine then starts (after its
	// turn: the gap is not skipped).
	queue()
	if err := svc.Reset(ctx, b, machine.ResetForceRestart); err != nil {
		t.Fatalf("ForceRestart during a pending start: %v, want accepted", err)
	}
	if p := power(b); p != machine.PowerPoweringOn {
		t.Errorf("ForceRestart of a starting machine reads %s, want PoweringOn", p)
	}
	// ForceRestart while it runs is the same action: joined.
	if err := svc.Reset(ctx, b, machine.ResetForceRestart); err != nil {
		t.Errorf("a second ForceRestart: %v, want accepted", err)
	}
	// And ForceOff still wins over it.
	forceOffWins("ForceRestart")
}

// A ForceOff while the backend itself is powering the machine on (the sim
// backend's --sim-delay, a KubeVirt VM Starting) stops it: the machine
// reads Off at once (the backend's start is cancelled). It used to be taken as "already off", answered
// 204, and the start went on to On (a Metal3 fake-ipa flow through vbmcd's
// image showed it: Ironic's ForceOff right after On was lost).
func TestForceOffStopsABackendStart(t *testing.T) {
	be := sim.New(1, sim.WithDelay(time.Minute))
	svc := machine.NewService(be, nil)
	ctx := context.Background()
	id := be.List()[0].ID
	if err := svc.Reset(ctx, id, machine.ResetOn); err != nil {
		t.Fatal(err)
	}
	if m, _ := be.Get(id); m.Power != machine.PowerPoweringOn {
		t.Fatalf("the backend reads %s after On, want PoweringOn for a minute", m.Power)
	}
	// Twice: preempting the start's action, and with no action under way
	// (the sim's start was handed over and its op ended).
	for i := range 2 {
		if i == 1 {
			if err := svc.Reset(ctx, id, machine.ResetOn); err != nil {
				t.Fatal(err)
			}
			if !testenv.WaitFor(5*time.Second, func() bool { return svc.PowerQueue().Pending == 0 }) {
				t.Fatalf("the start's action does not end: %+v", svc.PowerQueue())
			}
		}
		if err := svc.Reset(ctx, id, machine.ResetForceOff); err != nil {
			t.Fatalf("ForceOff while the backend powers on: %v", err)
		}
		if !testenv.WaitFor(5*time.Second, func() bool {
			m, _ := be.Get(id)
			return svc.PowerQueue().Pending == 0 && m.Power == machine.PowerOff
		}) {
			m, _ := be.Get(id)
			t.Fatalf("ForceOff while the backend powers on (%d): the machine reads %s, want Off", i, m.Power)
		}
	}
}
