package vbmcd

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/ironictest"
	"github.com/bmlab/bmlab/internal/testenv"
)

// TestIronicFakeSystems is Metal3's scale setup with vbmcd in place of
// sushy-tools: vbmcd starts from a sushy-tools fake-driver configuration
// as a Metal3 job writes it, unchanged, with its notifier pointed at a
// listener that decides as fake-ipa does and boots or stops the stand-in
// agent accordingly (so nothing else tells the agent of a boot). Ironic
// enrolls both systems by their UUIDs, manages them, inspects them
// (the ports are the file's MACs), powers them on and off; one is then
// provided and deployed with redfish-virtual-media, its agent booted by
// the announcement of the Cd power-on alone, and undeployed. Each power
// change Ironic makes reaches the listener in the fake driver's form: the
// pending state with its apply_time, then the state reached; no
// announcement is one fake-ipa would fail on, and vbmcd's metrics count as
// sent what the listener got. Cleaning is off (automated_clean false) to
// keep the test short: TestIronicSim covers it. On each Ironic release.
func TestIronicFakeSystems(t *testing.T) {
	testenv.Integration(t)
	forEachRelease(t, ironicFakeSystems)
}

func ironicFakeSystems(t *testing.T, release ironictest.Release) {
	ipa, listener := newFakeIPA(t)
	conf := fakeDriverConf(t, listener, true)
	addr, out := simDaemon(t, func(c *Config) {
		c.SimSystems, c.SimDelay = conf, 300*time.Millisecond
		c.MediaAllowLoopback = true // Ironic's HTTP server is on loopback
		c.MetricsAddr = "127.0.0.1:0"
	})
	ir := ironictest.Start(t, ironictest.Options{Release: release, Config: map[string]map[string]string{"conductor": {"automated_clean": "false"}}})
	ipa.drive(ir.Agent)
	iso := ir.Serve("/images/deploy.iso", testenv.MarkerISO(t))
	disk := testenv.MarkerDisk(t)
	image := ir.Serve("/images/disk.img", disk)

	names := map[string]string{"fake1": fakeID1, "fake2": fakeID2}
	for _, n := range []string{"fake1", "fake2"} {
		spec := redfishNode(n, "http://"+addr, names[n], "admin", "sim-pass-1", "false", iso, map[string]any{"capabilities": "boot_mode:uefi"})
		// The image from enrollment on: see ironictest's Patch on Ironic 29.
		spec.InstanceInfo = ironictest.ImageInstanceInfo(t, image, disk)
		if _, err := ir.Enroll(spec); err != nil {
			t.Fatal(err)
		}
	}
	ir.Step(t, "manage", "manage", "manageable", 2*time.Minute, "fake1", "fake2")
	ir.Step(t, "Redfish inspection", "inspect", "manageable", 2*time.Minute, "fake1", "fake2")
	for n, want := range map[string]string{"fake1": fakeMAC1, "fake2": fakeMAC2} {
		if macs, err := ir.Ports(n); err != nil || !slices.Equal(macs, []string{want}) {
			t.Errorf("%s after inspection: ports %v (%v), want the file's %s", n, macs, err, want)
		}
	}
	for _, target := range []string{"power on", "power off"} {
		for _, n := range []string{"fake1", "fake2"} {
			if err := ir.Power(n, target); err != nil {
				t.Fatal(err)
			}
		}
		for _, n := range []string{"fake1", "fake2"} {
			if _, err := ir.WaitPower(target, n, target, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Ironic's power changes of fake2, as the listener got them (nothing
	// before: managing and inspecting change nothing to announce).
	want := []string{"Off->On", "On", "On->Off", "Off"}
	ipa.waitFor(t, fmt.Sprintf("fake2's power as %v", want), func(b []map[string]any, _ []string) bool {
		return slices.Equal(powerSteps(t, b, "fake2"), want)
	})

	ir.Step(t, "provide", "provide", "available", 2*time.Minute, "fake1")
	ir.Step(t, "deploy (redfish-virtual-media, the agent booted by the announcement)", "active", "active", 3*time.Minute, "fake1")
	if node, err := ir.Node("fake1"); err != nil || ir.Agent.Boots(node.UUID) != 1 {
		t.Errorf("the deploy of fake1 booted the agent %d times (%v), want once", ir.Agent.Boots(node.UUID), err)
	}
	if _, err := ir.WaitPower("deploy", "fake1", "power on", time.Minute); err != nil {
		t.Fatal(err)
	}
	ir.Step(t, "undeploy", "deleted", "available", 2*time.Minute, "fake1")
	if _, err := ir.WaitPower("undeploy", "fake1", "power off", time.Minute); err != nil {
		t.Fatal(err)
	}
	// The deploy: the ramdisk's power-on (Cd, so fake-ipa boots), the
	// power-off once the image is written, the power-on from the disk
	// (Hdd: no agent); undeploy powers it off.
	ipa.waitFor(t, "fake1's deploy and undeploy", func(b []map[string]any, d []string) bool {
		s := powerSteps(t, b, "fake1")
		return len(s) > 0 && s[len(s)-1] == "Off" && slices.Contains(d, "boot fake1")
	})

	ipa.mu.Lock()
	steps := powerSteps(t, ipa.bodies, "fake1")
	decisions := slices.Clone(ipa.decisions)
	refused := slices.Clone(ipa.refused)
	sent := len(ipa.bodies)
	ipa.mu.Unlock()
	t.Logf("fake1's power as announced: %v; fake-ipa's decisions: %v", steps, decisions)
	// Every change is announced pending then reached: no state is
	// reached that was not announced as pending first.
	for i, s := range steps {
		if !strings.Contains(s, "->") && i > 0 && !strings.HasSuffix(steps[i-1], "->"+s) {
			t.Errorf("fake1 reached %s without its pending announcement: %v", s, steps)
		}
	}
	if !slices.Contains(steps, "On->Off") || strings.Count(strings.Join(steps, " "), "Off->On") < 3 {
		t.Errorf("fake1's power as announced: %v, want Ironic's power on, the deploy's two power-ons and its power-off", steps)
	}
	if len(refused) > 0 {
		t.Errorf("fake-ipa would fail on %d announcement(s), the first: %s", len(refused), refused[0])
	}
	if !metricsSay(t, out, `(?m)^vbmcd_notifications_sent_total `+strconv.Itoa(sent)+`$`) ||
		!metricsSay(t, out, `(?m)^vbmcd_notifications_failed_total 0$`) {
		t.Errorf("metrics do not count the %d announcements the listener got as sent, none failed", sent)
	}
}

// powerSteps is a system's power as its announcements said it: the state,
// or STATE->PENDING while a change is pending (its apply_time checked), in
// order, each once.
func powerSteps(t *testing.T, bodies []map[string]any, name string) []string {
	t.Helper()
	var steps []string
	for _, b := range bodies {
		if b["name"] != name {
			continue
		}
		st := fmt.Sprint(b["power_state"])
		if p, ok := b["pending_power"].(map[string]any); ok {
			at, _ := p["apply_time"].(float64)
			if at != float64(int64(at)) || int64(at) < time.Now().Unix()-600 {
				t.Errorf("%s: apply_time %v: want the Unix second the change applies", name, p["apply_time"])
			}
			st = fmt.Sprintf("%s->%v", st, p["power_state"])
		}
		if len(steps) == 0 || steps[len(steps)-1] != st {
			steps = append(steps, st)
		}
	}
	return steps
}
