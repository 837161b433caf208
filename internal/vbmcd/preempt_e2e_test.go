package vbmcd

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virttest"
)

// TestE2EForceOffPreemptsStart (issue 25): Ironic reads PoweringOn as on
// and sends ForceOff at once, and does not retry a 409. On real VMs, with
// starts paced so that b's start waits its turn (reads PoweringOn): sushy's
// On then ForceOff is accepted and b stays off; the same over IPMI
// (ipmitool power off); an action that cannot be combined gets 409 with
// Retry-After (Redfish) or C0h node busy (IPMI); ForceRestart preempts too
// and the machine then starts.
func TestE2EForceOffPreemptsStart(t *testing.T) {
	ipmi := newIPMITool(t, "e2e-pass")
	lab := virttest.New(t, "e2e-preempt-")
	a := lab.NewVM(t, "a", virttest.VMOptions{NoCD: true, DiskMarker: true})
	b := lab.NewVM(t, "b", virttest.VMOptions{NoCD: true, DiskMarker: true})
	const gap = 15 * time.Second
	url := daemon(t, "e2e-preempt-", ipmi.ipmiOn, func(c *Config) { c.MaxStarting, c.StartGap = 1, gap })
	reset := func(id, rt string) { sushy(t, url, "admin", "e2e-pass", id, "reset", rt) }
	power := func(id string) string {
		r, err := send("GET", url+"/redfish/v1/Systems/"+id, "admin", "e2e-pass", "")
		if err != nil {
			t.Fatal(err)
		}
		s, _ := r.object()["PowerState"].(string)
		return s
	}
	var bPort int
	if !testenv.WaitFor(10*time.Second, func() bool {
		m, err := lab.Service.Get(b.ID)
		if err == nil && m.Settings.IPMI != nil {
			bPort = m.Settings.IPMI.Port
		}
		return bPort != 0
	}) {
		t.Fatal("b got no IPMI port")
	}
	tool := ipmi.at(bPort).run

	reset(a.ID, "On")
	lab.WaitPower(t, a.ID, machine.PowerOn, bootTimeout)
	pending := func() {
		t.Helper()
		reset(b.ID, "On")
		if p := power(b.ID); p != "PoweringOn" {
			t.Fatalf("b's start waiting for its turn reads %s, want PoweringOn", p)
		}
	}

	// Ironic's pattern over Redfish: On, then ForceOff at once.
	pending()
	reset(b.ID, "ForceOff") // sushy raises on a 409
	lab.WaitPower(t, b.ID, machine.PowerOff, gap/3)
	if p := power(b.ID); p != "Off" {
		t.Errorf("after ForceOff preempted the start, b reads %s", p)
	}

	// Not combinable: 409 with a retry hint, on both faces.
	pending()
	r, err := send("POST", url+"/redfish/v1/Systems/"+b.ID+"/Actions/ComputerSystem.Reset", "admin", "e2e-pass", `{"ResetType":"GracefulShutdown"}`)
	if err != nil || r.Code != http.StatusConflict || r.Header.Get("Retry-After") == "" {
		t.Errorf("GracefulShutdown during a start: %v %d Retry-After %q, want 409 with Retry-After", err, r.Code, r.Header.Get("Retry-After"))
	}
	if out, err := tool("chassis", "power", "soft"); err == nil || !strings.Contains(strings.ToLower(out), "busy") {
		t.Errorf("ipmitool power soft during a start: %v %q, want node busy", err, out)
	}
	// ipmitool power off preempts the start as ForceOff does.
	if out, err := tool("chassis", "power", "off"); err != nil {
		t.Fatalf("ipmitool power off during a start: %v\n%s", err, out)
	}
	lab.WaitPower(t, b.ID, machine.PowerOff, gap/3)

	// ForceRestart (ipmitool power reset) preempts as well; b then starts.
	pending()
	if out, err := tool("chassis", "power", "reset"); err != nil {
		t.Fatalf("ipmitool power reset during a start: %v\n%s", err, out)
	}
	lab.WaitPower(t, b.ID, machine.PowerOn, gap+bootTimeout)
	b.WaitMarker(t, testenv.DiskMarker, 0, bootTimeout)
}
