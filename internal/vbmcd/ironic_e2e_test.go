package vbmcd

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/ironictest"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virttest"
)

// TestE2EIronic: Ironic 21.4 deploys real VMs through vbmcd: two qemu
// domains, one behind a BMC of its own (--bmc-addresses, certificate from
// a lab CA) and one behind the service's single listener with its system
// named. Each goes through enroll, manage, Redfish inspection (which finds
// its NIC), provide (automated cleaning), deploy and undeploy (cleaning).
// The deploy image is the agent marker ISO, inserted by Ironic's
// redfish-virtual-media boot: the agent starts when its line shows on the
// VM's serial console; the deployed instance is the disk marker, whose
// line shows after Ironic sets the boot device to disk and powers on.
func TestE2EIronic(t *testing.T) {
	lab := virttest.New(t, "e2e-ironic-")
	// 1 GiB: sushy 4.3 reads TotalSystemMemoryGiB as an integer, so
	// Ironic's inspection of a smaller machine finds no memory and fails
	// (no real server has less; qemu touches only what grub uses).
	opts := virttest.VMOptions{NoCD: true, DiskMarker: true, NICModels: []string{"virtio"}, MemoryMiB: 1024}
	vms := []*virttest.VM{lab.NewVM(t, "own", opts), lab.NewVM(t, "single", opts)}
	caCert, caKey := labCA(t)
	state := t.TempDir()
	url := daemon(t, "e2e-ironic-", func(c *Config) {
		c.IPMI, c.StateDir, c.BMCIPMIPort = true, state, 623
		c.BMCAddresses = []string{vms[0].Name + "=127.34.4.1"}
		c.TLSCACert, c.TLSCAKey = caCert, caKey
	})
	const user, pass = "admin", "e2e-pass"
	ir := ironictest.Start(t, ironictest.Options{})
	iso := ir.Serve("/images/agent.iso", testenv.AgentISO(t))
	disk := testenv.MarkerDisk(t)
	image := ir.Serve("/images/disk.img", disk)
	bios := map[string]any{"capabilities": "boot_mode:bios"} // SeaBIOS boots the markers in a second under TCG
	specs := []ironictest.NodeSpec{
		redfishNode("own", "https://127.34.4.1", "", user, pass, caCert, iso, bios),
		redfishNode("single", url, vms[1].ID, user, pass, filepath.Join(state, "redfish-tls.crt"), iso, bios),
	}
	var names []string
	for _, s := range specs {
		if _, err := ir.Enroll(s); err != nil {
			t.Fatal(err)
		}
		names = append(names, s.Name)
	}
	start := time.Now()
	ir.Step(t, "manage", "manage", "manageable", 2*time.Minute, names...)
	ir.Step(t, "Redfish inspection", "inspect", "manageable", 2*time.Minute, names...)
	for i, n := range names {
		macs, err := ir.Ports(n)
		if err != nil || len(macs) != 1 {
			t.Fatalf("%s after inspection: ports %v (%v), want the VM's NIC", n, macs, err)
		}
		ir.Agent.WatchSerial(vms[i].SerialLog, testenv.AgentMarker, macs...)
	}
	ir.Step(t, "provide (automated cleaning)", "provide", "available", 5*time.Minute, names...)
	for i, n := range names {
		if got := testenv.Count(vms[i].SerialLog, testenv.AgentMarker); got != 1 {
			t.Errorf("%s: the agent ISO booted %d times for cleaning, want 1", n, got)
		}
		if err := ir.Patch(n, ironictest.ImageInfo(t, image, disk)...); err != nil {
			t.Fatal(err)
		}
	}
	ir.Step(t, "deploy (redfish-virtual-media, direct)", "active", "active", 5*time.Minute, names...)
	for i, n := range names {
		vms[i].WaitMarker(t, testenv.DiskMarker, 0, bootTimeout)
		if got := testenv.Count(vms[i].SerialLog, testenv.AgentMarker); got != 2 {
			t.Errorf("%s: the agent ISO booted %d times by the end of the deploy, want 2", n, got)
		}
		if node, _ := ir.Node(n); node.Power() != "power on" {
			t.Errorf("%s deployed: %s, want power on", n, node)
		}
	}
	ir.Step(t, "undeploy (cleaning)", "deleted", "available", 5*time.Minute, names...)
	for i, n := range names {
		if got := testenv.Count(vms[i].SerialLog, testenv.AgentMarker); got != 3 {
			t.Errorf("%s: the agent ISO booted %d times by the end of the undeploy, want 3", n, got)
		}
		if s := lab.DomainState(t, vms[i].Name); s != 5 { // VIR_DOMAIN_SHUTOFF
			t.Errorf("%s after cleaning: domain state %d, want shut off", n, s)
		}
	}
	t.Logf("%d VMs from enroll to cleaned after undeploy: %s", len(vms), time.Since(start).Round(time.Second))
	if strings.Contains(ir.Log(), "Traceback") {
		t.Logf("Ironic logged tracebacks; see %s", filepath.Join(ir.Dir, "ironic.log"))
	}
}
