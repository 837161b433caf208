package machine_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/sim"
)

// slowEnd is a sim backend whose forced stop leaves the machine off at once
// but returns only when released, as a real backend's stop returns after
// its re-read while the state event has already arrived; and whose warm
// reset finds the guest gone, as libvirt's does when the guest halted
// itself a moment before.
type slowEnd struct {
	*sim.Backend
	release chan struct{}
	halted  bool
}

func (b *slowEnd) Stop(ctx context.Context, id string, force bool) error {
	err := b.Backend.Stop(ctx, id, force)
	if b.release != nil {
		<-b.release
	}
	return err
}

func (b *slowEnd) Reset(ctx context.Context, id string) error {
	if b.halted {
		if err := b.Backend.Stop(ctx, id, true); err != nil {
			return err
		}
		return fmt.Errorf("reset %s: %w: domain is not running", id, machine.ErrConflict)
	}
	return b.Backend.Reset(ctx, id)
}

func waitPower(t *testing.T, svc *machine.Service, id string, want machine.PowerState) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, err := svc.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		if m.Power == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("power %s, want %s", m.Power, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// runningMachine is a service over be whose one machine has been switched
// On and reads On.
func runningMachine(t *testing.T, be machine.Backend) (*machine.Service, string) {
	t.Helper()
	svc := machine.NewService(be, nil)
	id := be.List()[0].ID
	if err := svc.Reset(context.Background(), id, machine.ResetOn); err != nil {
		t.Fatal(err)
	}
	waitPower(t, svc, id, machine.PowerOn)
	return svc, id
}

// onAfterSettling checks that the backend reads Off while the action under
// way (what) is held by release, then sends On: the On must wait for that
// action to end (release is closed as it starts waiting), be accepted and
// switch the machine on.
func onAfterSettling(t *testing.T, svc *machine.Service, be machine.Backend, id string, release chan struct{}, what string) {
	t.Helper()
	if m, _ := be.Get(id); m.Power != machine.PowerOff {
		t.Fatalf("the backend reads %s during %s action, want Off", m.Power, what)
	}
	waited := false
	machine.SetOnSettleWait(func() { waited = true; close(release) })
	defer machine.SetOnSettleWait(nil)
	if err := svc.Reset(context.Background(), id, machine.ResetOn); err != nil {
		t.Fatalf("On once the machine reads Off: %v, want accepted", err)
	}
	if !waited {
		t.Fatalf("the On did not wait for %s action to end", what)
	}
	waitPower(t, svc, id, machine.PowerOn)
}

// TestOnRightAfterOffReads: a client that reads Off after its ForceOff and
// sends On at once (Ironic, the LLDP e2e test under load) is not refused
// because the ForceOff's action has not ended its bookkeeping yet: the On
// runs once it has.
func TestOnRightAfterOffReads(t *testing.T) {
	be := &slowEnd{Backend: sim.New(1)}
	svc, id := runningMachine(t, be)
	ctx := context.Background()
	be.release = make(chan struct{})
	if err := svc.Reset(ctx, id, machine.ResetForceOff); err != nil {
		t.Fatal(err)
	}
	onAfterSettling(t, svc, be, id, be.release, "the ForceOff's")
}

// TestForceRestartOfAGuestThatJustHalted: the guest powered itself off as
// the ForceRestart came; the backend's warm reset finds it gone. A forced
// restart of a machine that is off starts it, as on a real server, instead
// of a 409 (TestE2EBootOrder under load).
func TestForceRestartOfAGuestThatJustHalted(t *testing.T) {
	be := &slowEnd{Backend: sim.New(1)}
	svc, id := runningMachine(t, be)
	ctx := context.Background()
	be.halted = true
	if err := svc.Reset(ctx, id, machine.ResetForceRestart); err != nil {
		t.Fatalf("ForceRestart of a guest that just halted: %v, want accepted", err)
	}
	waitPower(t, svc, id, machine.PowerOn)
}

// haltsAtOnce is a sim backend whose first started guest powers itself off
// at once (the marker ISO does) and whose Save waits for hold: the start's
// spending of its Once override is still under way when the machine reads
// Off again.
type haltsAtOnce struct {
	*sim.Backend
	hold   chan struct{}
	starts atomic.Int32
}

func (b *haltsAtOnce) Start(ctx context.Context, id string) error {
	if err := b.Backend.Start(ctx, id); err != nil {
		return err
	}
	if b.starts.Add(1) == 1 {
		return b.Backend.Stop(ctx, id, true)
	}
	return nil
}

func (b *haltsAtOnce) Save(ctx context.Context, id string, s machine.Settings) error {
	if b.hold != nil {
		<-b.hold
	}
	return b.Backend.Save(ctx, id, s)
}

// TestOnAfterAGuestHaltedDuringItsStart: the web console's test under load
// pressed On again once the page read Off after the CD's guest halted; the
// first start was still spending its Once override, the second On joined
// it, answered 204 and never started the machine.
func TestOnAfterAGuestHaltedDuringItsStart(t *testing.T) {
	be := &haltsAtOnce{Backend: sim.New(1)}
	svc := machine.NewService(be, nil)
	ctx := context.Background()
	id := be.List()[0].ID
	cd, once := machine.BootCd, machine.BootOnce
	if _, err := svc.SetBoot(ctx, id, machine.BootPatch{Target: &cd, Enabled: &once}); err != nil {
		t.Fatal(err)
	}
	be.hold = make(chan struct{})
	if err := svc.Reset(ctx, id, machine.ResetOn); err != nil {
		t.Fatal(err)
	}
	onAfterSettling(t, svc, be, id, be.hold, "the first start's")
	if n := be.starts.Load(); n != 2 {
		t.Fatalf("%d starts, want 2", n)
	}
}

// shuttingDown is a sim backend whose running guest reads PoweringOff
// while it shuts itself down (libvirt's shutdown state), until halt.
type shuttingDown struct {
	*sim.Backend
	down   atomic.Bool
	starts atomic.Int32
}

func (b *shuttingDown) Get(id string) (*machine.Machine, error) {
	m, err := b.Backend.Get(id)
	if err == nil && b.down.Load() && m.Power == machine.PowerOn {
		c := *m
		c.Power = machine.PowerPoweringOff
		return &c, nil
	}
	return m, err
}

func (b *shuttingDown) Start(ctx context.Context, id string) error {
	b.starts.Add(1)
	return b.Backend.Start(ctx, id)
}

// halt ends the guest's shutdown: the machine is off.
func (b *shuttingDown) halt(ctx context.Context, id string) error {
	b.down.Store(false)
	return b.Backend.Stop(ctx, id, true)
}

// TestOnWhileTheGuestShutsDown: the web console's test under load pressed
// On when the page read Off a moment before libvirt did: the CD's guest
// was still shutting down (PoweringOff). The On found the machine on,
// changed nothing, answered 204, and the machine ended off. An On now
// waits for the guest to be off and starts it.
func TestOnWhileTheGuestShutsDown(t *testing.T) {
	be := &shuttingDown{Backend: sim.New(1)}
	svc, id := runningMachine(t, be)
	ctx := context.Background()
	be.down.Store(true)
	if err := svc.Reset(ctx, id, machine.ResetOn); err != nil {
		t.Fatalf("On while the guest shuts down: %v, want accepted", err)
	}
	if m, _ := svc.Get(id); m.Power != machine.PowerPoweringOff {
		t.Fatalf("reads %s while the guest shuts down with an On waiting, want PoweringOff", m.Power)
	}
	if err := be.halt(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitPower(t, svc, id, machine.PowerOn)
	if n := be.starts.Load(); n != 2 {
		t.Fatalf("%d starts, want 2: the On was lost", n)
	}
	// ForceOn alike; PushPowerButton on a machine going down is still a
	// press on a running machine (a second shutdown request).
	be.down.Store(true)
	if err := svc.Reset(ctx, id, machine.ResetForceOn); err != nil {
		t.Fatalf("ForceOn while the guest shuts down: %v, want accepted", err)
	}
	if err := be.halt(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitPower(t, svc, id, machine.PowerOn)
	if n := be.starts.Load(); n != 3 {
		t.Fatalf("%d starts, want 3: the ForceOn was lost", n)
	}
}
