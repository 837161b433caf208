package ipmi

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/ipmi/wire"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/sim"
	"github.com/bmlab/bmlab/internal/testenv"
)

// slowSim starts machines slowly (as a VM start through libvirt can be) or
// fails to, as a broken hypervisor does.
type slowSim struct {
	*sim.Backend
	delay    time.Duration
	fail     atomic.Bool
	failLate atomic.Bool // fail after the delay, as libvirt refuses a start
}

func (s *slowSim) Start(ctx context.Context, id string) error {
	if s.fail.Load() {
		return errors.New("libvirt: internal error: qemu unexpectedly closed the monitor")
	}
	time.Sleep(s.delay)
	if s.failLate.Load() {
		return errors.New("libvirt: Cannot access storage file '/gone.img': No such file or directory")
	}
	return s.Backend.Start(ctx, id)
}

// TestSlowStartAnswersAtOnce: a start slower than the reply bound is
// answered "ok" within it and completes afterwards; a backend failure that
// comes back in time is a true failure code (0xFF), not an "ok"; one that
// comes later is a power control fault in chassis status.
func TestSlowStartAnswersAtOnce(t *testing.T) {
	be := &slowSim{Backend: sim.New(1), delay: 1500 * time.Millisecond}
	l := newLab(t, 1, "127.0.0.1", be)
	c := l.dial(t, 0, 17)
	start := time.Now()
	code, _, err := c.Do(wire.NetFnChassis, cmdChassisControl, 0x01)
	took := time.Since(start)
	t.Logf("power on with a 1.5 s backend start answered in %v", took.Round(time.Millisecond))
	if err != nil || code != wire.CodeOK {
		t.Fatalf("power on: %v %v", err, code)
	}
	waitPower(t, l, 0, machine.PowerOn)
	{
		testenv.Command(t, "ipmitool")
		out := l.mustIpmitool(t, 0, nil, "chassis", "status")
		if !strings.Contains(out, "System Power         : on") || !strings.Contains(out, "Last Power Event     : command") {
			t.Errorf("chassis status: %s", out)
		}
	}
	_, _, _ = c.Do(wire.NetFnChassis, cmdChassisControl, 0x00)
	waitPower(t, l, 0, machine.PowerOff)
	be.failLate.Store(true)
	code, _, err = c.Do(wire.NetFnChassis, cmdChassisControl, 0x01)
	if err != nil || code != wire.CodeOK {
		t.Fatalf("power on (to fail late): %v %v", err, code)
	}
	if !testenv.WaitFor(5*time.Second, func() bool {
		_, d, _ := c.Do(wire.NetFnChassis, cmdGetChassisStatus)
		return len(d) > 0 && d[0]&0x10 != 0
	}) {
		t.Fatal("a start that failed after the answer is not a power control fault")
	}
	if out := l.mustIpmitool(t, 0, nil, "chassis", "status"); !strings.Contains(out, "Power Control Fault  : true") || !strings.Contains(out, "System Power         : off") {
		t.Errorf("chassis status after a late failure: %s", out)
	}
	be.failLate.Store(false)
	be.fail.Store(true)
	code, _, err = c.Do(wire.NetFnChassis, cmdChassisControl, 0x01)
	if err != nil || code != wire.CodeUnspecified {
		t.Errorf("failing start: %v code %v, want 0xff", err, code)
	}
	// NMI to an off machine is refused as "not in present state".
	code, _, _ = c.Do(wire.NetFnChassis, cmdChassisControl, 0x04)
	if code != wire.CodeNotInPresentState {
		t.Errorf("diag interrupt when off: %v, want 0xd5", code)
	}
}
