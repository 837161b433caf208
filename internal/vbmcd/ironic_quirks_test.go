package vbmcd

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/ironictest"
	"github.com/bmlab/bmlab/internal/sim"
	"github.com/bmlab/bmlab/internal/testenv"
)

// personalitySet gives machine id a personality (and switches) through
// the daemon's admin socket, as `vbmcd personality set` does.
func personalitySet(t *testing.T, state, id string, args ...string) {
	t.Helper()
	var o bytes.Buffer
	argv := append([]string{"personality", "--state-dir", state, "set", id}, args...)
	if err := Run(context.Background(), Streams{Out: &o, ErrOut: &o}, argv); err != nil {
		t.Fatalf("personality set %s: %v %s", id, err, o.String())
	}
}

// TestIronicQuirks: Debian's Ironic 21.4 meets the vendors' quirks through
// BMCs of their own (each at its own address, with the vendor's ids:
// Ironic is given no system id and finds System.Embedded.1 or /Systems/1),
// each quirk on one node and off on its twin:
//   - power-on-conflict (iDRAC 10, Ironic bug 2162995): a power-on soon
//     after Ironic powered the node off fails, the power action's error
//     carrying the BMC's 409, and the node stays off; the twin powers on;
//   - refuse-in-post (iLO 6, Ironic bug 2136275): a boot device set right
//     after a power-on, with the server in POST, is refused with the BMC's
//     400; the twin takes it.
//
// Each Ironic release.
func TestIronicQuirks(t *testing.T) {
	testenv.Integration(t)
	forEachRelease(t, ironicQuirks)
}

func ironicQuirks(t *testing.T, release ironictest.Release) {
	caCert, caKey := labCA(t)
	var state string
	_, out := simDaemon(t, func(c *Config) {
		c.SimNodes, c.InsecureHTTP = 4, false
		c.BMCAddresses = []string{"127.34.6.1-127.34.6.4"}
		c.TLSCACert, c.TLSCAKey = caCert, caKey
		c.Personality = "idrac10"
		// Windows long enough that Ironic's requests on a loaded machine
		// fall inside them.
		c.QuirkTimes = "power-on-conflict=90s,refuse-in-post=90s"
		state = c.StateDir
	})
	if !testenv.WaitFor(10*time.Second, func() bool { return strings.Contains(out.String(), "4 machine(s) have a BMC of their own") }) {
		t.Fatalf("no BMCs of their own:\n%s", out)
	}
	personalitySet(t, state, sim.UUIDFor("sim-0002"), "idrac10", "--quirks", "-power-on-conflict")
	personalitySet(t, state, sim.UUIDFor("sim-0003"), "ilo6")
	personalitySet(t, state, sim.UUIDFor("sim-0004"), "ilo6", "--quirks", "-refuse-in-post")

	const user, pass = "admin", "sim-pass-1"
	ir := ironictest.Start(t, ironictest.Options{Release: release})
	nodes := map[string]string{"dell": "127.34.6.1", "dell-off": "127.34.6.2", "hpe": "127.34.6.3", "hpe-off": "127.34.6.4"}
	var names []string
	for n, addr := range nodes {
		if _, err := ir.Enroll(redfishNode(n, "https://"+addr, "", user, pass, caCert, "", nil)); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	ir.Step(t, "manage", "manage", "manageable", 2*time.Minute, names...)
	power := func(step, want string, nodes ...string) {
		t.Helper()
		for _, n := range nodes {
			if err := ir.Power(n, want); err != nil {
				t.Fatalf("%s %s: %v", step, n, err)
			}
		}
		for _, n := range nodes {
			if _, err := ir.WaitPower(step, n, want, 2*time.Minute); err != nil {
				t.Fatal(err)
			}
		}
	}
	power("power on", "power on", names...)

	// refuse-in-post: the iLOs are in POST for 90 s after the power-on.
	bootDevice := func(n string) error {
		return ir.Do("PUT", "/v1/nodes/"+n+"/management/boot_device", map[string]any{"boot_device": "pxe", "persistent": false}, nil)
	}
	var ae *ironictest.APIError
	if err := bootDevice("hpe"); !errors.As(err, &ae) || !strings.Contains(ae.Body, "400") || !strings.Contains(ae.Body, "OperationNotAllowed") ||
		!strings.Contains(ae.Body, "https://127.34.6.3/redfish/v1/Systems/1 ") {
		t.Errorf("boot device on an iLO in POST (refuse-in-post on): %v, want Ironic's error with the BMC's 400 OperationNotAllowed at /Systems/1", err)
	} else {
		t.Logf("refuse-in-post on: %s", ae.Body)
	}
	if err := bootDevice("hpe-off"); err != nil {
		t.Errorf("boot device on an iLO in POST (refuse-in-post off): %v", err)
	}

	// power-on-conflict: a power-on right after Ironic's power-off.
	power("power off", "power off", "dell", "dell-off")
	for _, n := range []string{"dell", "dell-off"} {
		if err := ir.Power(n, "power on"); err != nil {
			t.Fatalf("power on %s: %v", n, err)
		}
	}
	if _, err := ir.WaitPower("power on (power-on-conflict off)", "dell-off", "power on", 2*time.Minute); err != nil {
		t.Error(err)
	}
	var node ironictest.Node
	if !testenv.WaitFor(2*time.Minute, func() bool {
		n, err := ir.Node("dell")
		node = n
		return err == nil && n.TargetPowerState == nil && n.LastErr() != ""
	}) {
		t.Fatalf("power on (power-on-conflict on): no error from Ironic: %s", node)
	}
	// Ironic 21.4 says "Setting power state to power on failed", 29
	// "Failed to change power state to 'power on'".
	failed := strings.Contains(node.LastErr(), "Setting power state to power on failed") || strings.Contains(node.LastErr(), "Failed to change power state to 'power on'")
	if e := node.LastErr(); !failed || !strings.Contains(e, "409") || !strings.Contains(e, "ResourceInUse") ||
		!strings.Contains(e, "https://127.34.6.1/redfish/v1/Systems/System.Embedded.1/Actions/ComputerSystem.Reset") || node.Power() != "power off" {
		t.Errorf("power on (power-on-conflict on): %s, want the power action failed on the BMC's 409 ResourceInUse at System.Embedded.1 and the node off", node)
	} else {
		t.Logf("power-on-conflict on: %s", e)
	}
}
