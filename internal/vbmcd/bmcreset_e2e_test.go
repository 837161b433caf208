package vbmcd

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stmcginnis/gofish/schemas"

	"github.com/bmlab/bmlab/internal/ipmi/client"
	"github.com/bmlab/bmlab/internal/ipmi/wire"
	"github.com/bmlab/bmlab/internal/testenv"
)

// TestE2EManagerReset: a BMC reset, over Redfish (gofish's Manager.Reset) or
// IPMI (ipmitool mc reset cold), ends that BMC's IPMI sessions while the VM
// it manages keeps running, and the BMC answers new sessions at once.
func TestE2EManagerReset(t *testing.T) {
	ipmi := newIPMITool(t, "e2e-pass")
	_, vm, url := markerLab(t, "e2e-mreset-", ipmi.ipmiOn)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ipmi.port))
	ipmi.must(t, "chassis", "power", "on")
	// The power-on is answered at once and runs after (issue 14): the
	// machine reads off (PoweringOn) until libvirt has started it, which
	// on a loaded host takes longer than the answer. The reset must find
	// it on, or the check below proves nothing.
	if !testenv.WaitFor(30*time.Second, func() bool { return strings.Contains(ipmi.must(t, "power", "status"), "is on") }) {
		t.Fatalf("the VM did not power on: %q", ipmi.must(t, "power", "status"))
	}
	held := func() *client.Client {
		t.Helper()
		c, err := client.Dial(context.Background(), addr, client.Config{Username: "admin", Password: "e2e-pass", Timeout: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if code, _, err := c.Do(wire.NetFnApp, 0x01); err != nil || code != wire.CodeOK {
			t.Fatalf("Get Device ID in the held session: %v %v", code, err)
		}
		return c
	}
	ended := func(c *client.Client, by string) {
		t.Helper()
		if !testenv.WaitFor(3*time.Second, func() bool { _, _, err := c.Do(wire.NetFnApp, 0x01); return err != nil }) {
			t.Errorf("after %s, the held IPMI session still answers", by)
		}
		if out := ipmi.must(t, "power", "status"); !strings.Contains(out, "is on") {
			t.Errorf("after %s, the VM: %q, want on (a BMC reset leaves the machine alone)", by, out)
		}
	}

	c := held()
	gc := gofishClient(t, url, "admin", "e2e-pass", false)
	mgrs, err := gc.Service.Managers()
	if err != nil {
		t.Fatal(err)
	}
	var mgr *schemas.Manager
	for _, m := range mgrs {
		if m.ID == vm.ID {
			mgr = m
		}
	}
	if mgr == nil {
		t.Fatalf("no Manager %s among %d", vm.ID, len(mgrs))
	}
	if _, err := mgr.Reset(schemas.GracefulRestartResetType); err != nil {
		t.Fatalf("gofish Manager.Reset: %v", err)
	}
	ended(c, "Redfish Manager.Reset")

	c = held()
	ipmi.must(t, "mc", "reset", "cold")
	ended(c, "ipmitool mc reset cold")
}
