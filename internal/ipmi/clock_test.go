package ipmi

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/testenv"
)

// TestIpmitoolSELTimeIsTheBMCClock: the BMC clock a Redfish client set
// (Manager DateTime: a skew from the host's) is what `ipmitool sel time
// get` reads.
func TestIpmitoolSELTimeIsTheBMCClock(t *testing.T) {
	testenv.Integration(t)
	l := newLab(t, 1, "127.0.0.1", nil)
	id := l.machine(t, 0).ID
	want := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	if _, err := l.svc.SetClock(context.Background(), id, &want, nil, time.Now()); err != nil {
		t.Fatal(err)
	}
	out := l.mustIpmitool(t, 0, nil, "sel", "time", "get")
	// ipmitool prints "01/02/31 03:04:05 UTC".
	f := strings.Fields(out)
	if len(f) < 2 {
		t.Fatalf("ipmitool sel time get: %q", out)
	}
	got, err := time.ParseInLocation("01/02/06 15:04:05", f[0]+" "+f[1], time.UTC)
	if err != nil {
		t.Fatalf("ipmitool sel time get: %q: %v", out, err)
	}
	if d := got.Sub(want); d < -2*time.Second || d > time.Minute {
		t.Errorf("SEL time %s, want the BMC's clock %s", got, want)
	}
}

// TestIpmitoolSetSELTimeSetsTheBMCClock: `ipmitool sel time set` sets the
// clock Redfish's Manager shows (the model's skew).
func TestIpmitoolSetSELTimeSetsTheBMCClock(t *testing.T) {
	testenv.Integration(t)
	l := newLab(t, 1, "127.0.0.1", nil)
	l.mustIpmitool(t, 0, nil, "sel", "time", "set", "03/04/33 05:06:07")
	m := l.machine(t, 0)
	got := m.BMCTime(time.Now()).UTC()
	want := time.Date(2033, 3, 4, 5, 6, 7, 0, time.UTC)
	if d := got.Sub(want); d < -2*time.Second || d > time.Minute {
		t.Errorf("after sel time set the BMC's clock is %s, want %s", got, want)
	}
}
