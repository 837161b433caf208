package ipmi

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
)

// ipmitool runs the real ipmitool against BMC i of the lab with its default
// options, plus extra (e.g. "-C", "3"), and returns its output.
func (l *lab) ipmitool(t *testing.T, i int, extra []string, args ...string) (string, error) {
	t.Helper()
	bin := testenv.Command(t, "ipmitool")
	host, port, _ := net.SplitHostPort(l.addrs[i])
	argv := append([]string{"-I", "lanplus", "-H", host, "-p", port, "-U", testUser, "-P", testPass}, extra...)
	argv = append(argv, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	out, err := exec.CommandContext(ctx, bin, argv...).CombinedOutput()
	t.Logf("ipmitool %s (%v): %s", strings.Join(append(extra, args...), " "), time.Since(start).Round(time.Millisecond), strings.TrimSpace(string(out)))
	return string(out), err
}

func (l *lab) mustIpmitool(t *testing.T, i int, extra []string, args ...string) string {
	t.Helper()
	out, err := l.ipmitool(t, i, extra, args...)
	if err != nil {
		t.Fatalf("ipmitool %v: %v\n%s", args, err, out)
	}
	return out
}

func waitPower(t *testing.T, l *lab, i int, want machine.PowerState) {
	t.Helper()
	if !testenv.WaitFor(5*time.Second, func() bool { return l.machine(t, i).Power == want }) {
		t.Fatalf("power %s, want %s", l.machine(t, i).Power, want)
	}
}

func TestIpmitoolPower(t *testing.T) {
	testenv.Integration(t)
	testenv.Command(t, "ipmitool")
	l := newLab(t, 1, "127.0.0.1", nil)
	for _, extra := range [][]string{nil, {"-C", "3"}, {"-C", "17"}} {
		t.Run(strings.Join(append([]string{"suite"}, extra...), ""), func(t *testing.T) {
			if out := l.mustIpmitool(t, 0, extra, "power", "status"); !strings.Contains(out, "Chassis Power is off") {
				t.Fatalf("power status: %q", out)
			}
			l.mustIpmitool(t, 0, extra, "power", "on")
			waitPower(t, l, 0, machine.PowerOn)
			if out := l.mustIpmitool(t, 0, extra, "power", "status"); !strings.Contains(out, "Chassis Power is on") {
				t.Fatalf("power status: %q", out)
			}
			l.mustIpmitool(t, 0, extra, "power", "cycle")
			waitPower(t, l, 0, machine.PowerOn)
			l.mustIpmitool(t, 0, extra, "power", "reset")
			waitPower(t, l, 0, machine.PowerOn)
			l.mustIpmitool(t, 0, extra, "power", "diag")
			l.mustIpmitool(t, 0, extra, "power", "soft")
			waitPower(t, l, 0, machine.PowerOff)
			l.mustIpmitool(t, 0, extra, "power", "on")
			waitPower(t, l, 0, machine.PowerOn)
			l.mustIpmitool(t, 0, extra, "power", "off")
			waitPower(t, l, 0, machine.PowerOff)
		})
	}
}
