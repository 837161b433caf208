package vbmcd

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/ironictest"
	"github.com/bmlab/bmlab/internal/sim"
	"github.com/bmlab/bmlab/internal/testenv"
)

// iloNode is a node Ironic reaches with the ilo hardware type (proliantutils:
// RIBCL for a Gen11), virtual media boot of deployISO.
func iloNode(name, addr, user, pass, ca, deployISO string, props map[string]any) ironictest.NodeSpec {
	return ironictest.NodeSpec{
		Name: name, Driver: "ilo", Properties: props,
		DriverInfo: map[string]any{
			"ilo_address": addr, "ilo_username": user, "ilo_password": pass, "ilo_verify_ca": ca,
			"deploy_iso": deployISO,
		},
		Interfaces: map[string]string{
			"boot_interface": "ilo-virtual-media", "deploy_interface": "direct",
			"inspect_interface": "ilo", "management_interface": "ilo", "power_interface": "ilo",
			"bios_interface": "no-bios", "raid_interface": "no-raid", "vendor_interface": "no-vendor",
			"console_interface": "no-console",
		},
	}
}

// idracNode is a node Ironic reaches with the idrac hardware type:
// idrac-redfish-virtual-media, which sets the virtual CD as the boot device
// through Dell's OEM (sushy-oem-idrac).
func idracNode(name, addr, user, pass, ca, deployISO string, props map[string]any) ironictest.NodeSpec {
	n := redfishNode(name, addr, "", user, pass, ca, deployISO, props)
	n.Driver = "idrac"
	n.Interfaces["boot_interface"] = "idrac-redfish-virtual-media"
	n.Interfaces["management_interface"] = "idrac-redfish"
	n.Interfaces["power_interface"] = "idrac-redfish"
	n.Interfaces["inspect_interface"] = "idrac-redfish"
	n.Interfaces["bios_interface"] = "no-bios"
	n.Interfaces["vendor_interface"] = "no-vendor"
	return n
}

// waitState waits for a node's provision state whatever its target (a
// failed or aborted cleaning keeps its target "available").
func waitState(t *testing.T, ir *ironictest.Ironic, name, state string, timeout time.Duration) ironictest.Node {
	t.Helper()
	var n ironictest.Node
	if !testenv.WaitFor(timeout, func() bool {
		n, _ = ir.Node(name)
		return n.ProvisionState == state
	}) {
		t.Fatalf("%s: not %q after %s: %s", name, state, timeout, n)
	}
	return n
}

// TestIronicVendorDriversSim: Ironic drives simulated servers of vendor
// personalities, each at a BMC of its own, with the vendors' hardware
// types, on each release:
//   - an iLO 6 with the ilo hardware type (proliantutils, 2.14 with Ironic
//     21.4 and 2.16.3 with 29, which drive a Gen11 over RIBCL): manage, ilo
//     inspection (RIBCL's embedded health: CPUs, memory, disk, the NIC's
//     port, the model), and the start of cleaning: ilo-virtual-media
//     inserts its floppy and the deploy ISO and the server boots the CD
//     once; cleaning is aborted there (the stand-in agent cannot read the
//     token Ironic puts on the floppy);
//   - an iDRAC 9 with the idrac hardware type: on Ironic 21.4, Debian 12
//     ships no sushy-oem-idrac, so idrac-redfish-virtual-media cannot set
//     the virtual CD as the boot device, and cleaning fails with sushy's
//     "No extensions found for "manager""; on Ironic 29, with Debian 13's
//     sushy-oem-idrac 5.0 (the vendor overlay), it sets it through Dell's
//     OEM (an SCP import whose job completes at the boot): provide
//     (automated cleaning with the stand-in agent), deploy and undeploy;
//   - an iDRAC 10 with the idrac hardware type, whose cleaning fails on
//     each release (idrac10, below): not deployable by either.
func TestIronicVendorDriversSim(t *testing.T) {
	testenv.Integration(t)
	forEachRelease(t, ironicVendorDriversSim)
}

// The simulated vendors' BMCs' account (ironicSimDaemon's).
const vendorUser, vendorPass = "admin", "sim-pass-1"

// vendorIronic starts n simulated machines at BMCs of their own in addrs
// (sim-0001 an iLO 6 that does not refuse in POST, sim-0002 an iDRAC 9;
// more sets the rest on the daemon's state directory) and an Ironic with
// the vendors' drivers (29 with sushy-oem-idrac's overlay) that follows
// the daemon's events; it returns Ironic, the BMCs' CA and the deploy
// ISO's URL.
func vendorIronic(t *testing.T, release ironictest.Release, n int, addrs string, more func(state string)) (*ironictest.Ironic, string, string) {
	t.Helper()
	mainAddr, state, caCert := ironicSimDaemon(t, n, addrs, func(c *Config) {
		c.Personality, c.Quirks = "ilo6", "-refuse-in-post"
	})
	personalitySet(t, state, sim.UUIDFor("sim-0002"), "idrac9")
	if more != nil {
		more(state)
	}
	ir := ironictest.Start(t, ironictest.Options{Release: release, Vendors: true, VendorOverlay: release == ironictest.Ironic29})
	if err := ir.Agent.WatchEvents(ironictest.Redfish{URL: "https://" + mainAddr, User: vendorUser, Password: vendorPass, CAFile: filepath.Join(state, "redfish-tls.crt")}); err != nil {
		t.Fatal(err)
	}
	return ir, caCert, ir.Serve("/images/deploy.iso", testenv.MarkerISO(t))
}

func ironicVendorDriversSim(t *testing.T, release ironictest.Release) {
	const user, pass = vendorUser, vendorPass
	ir, caCert, iso := vendorIronic(t, release, 3, "127.34.8.1-127.34.8.3", func(state string) {
		personalitySet(t, state, sim.UUIDFor("sim-0003"), "idrac10", "--quirks", "-power-on-conflict")
	})
	disk := testenv.MarkerDisk(t)
	image := ir.Serve("/images/disk.img", disk)
	uefi := map[string]any{"capabilities": "boot_mode:uefi"}
	for _, s := range []ironictest.NodeSpec{
		iloNode("hpe", "127.34.8.1", user, pass, caCert, iso, uefi),
		idracNode("dell", "https://127.34.8.2", user, pass, caCert, iso, uefi),
		idracNode("dell10", "https://127.34.8.3", user, pass, caCert, iso, uefi),
	} {
		// The image from enrollment on: see ironictest's Patch on Ironic 29.
		s.InstanceInfo = ironictest.ImageInstanceInfo(t, image, disk)
		if _, err := ir.Enroll(s); err != nil {
			t.Fatal(err)
		}
	}
	ir.Step(t, "manage", "manage", "manageable", 2*time.Minute, "hpe", "dell", "dell10")

	ir.Step(t, "ilo inspection", "inspect", "manageable", 5*time.Minute, "hpe")
	node, _ := ir.Node("hpe")
	macs, err := ir.Ports("hpe")
	// Ironic's essential properties: 21.4's have cpus, 29's no longer
	// (drivers/base.py, InspectInterface.ESSENTIAL_PROPERTIES).
	noCPUs := release == ironictest.Ironic21 && node.Properties["cpus"] == nil
	if err != nil || len(macs) != 1 || macs[0] != "52:54:00:00:00:01" || noCPUs || node.Properties["cpu_arch"] != "x86_64" || node.Properties["memory_mb"] == nil || node.Properties["local_gb"] == nil {
		t.Errorf("hpe after ilo inspection: ports %v (%v), properties %v", macs, err, node.Properties)
	}
	if caps, _ := node.Properties["capabilities"].(string); !strings.Contains(caps, "server_model:ProLiant DL360 Gen11") {
		t.Errorf("hpe's capabilities %q lack the server model", caps)
	}
	// Cleaning boots the agent from the virtual CD: ilo-virtual-media
	// inserts Ironic's parameters as a floppy and the deploy ISO as the CD,
	// sets the CD to boot once and powers the server on, all over RIBCL.
	// Ironic pregenerates the agent's token and hands it over that floppy,
	// which the stand-in agent does not read; cleaning is aborted once the
	// server has booted the CD.
	if err := ir.Provision("hpe", "provide", nil); err != nil {
		t.Fatal(err)
	}
	waitState(t, ir, "hpe", "clean wait", 3*time.Minute)
	hc := caClient(t, caCert)
	get := func(path string, out any) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "https://127.34.8.1"+path, nil)
		req.SetBasicAuth(user, pass)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	type member struct {
		Inserted bool
		Image    *string
	}
	var cd, floppy member
	var sys struct {
		PowerState string
		Boot       struct{ BootSourceOverrideEnabled string }
	}
	if !testenv.WaitFor(time.Minute, func() bool {
		get("/redfish/v1/Systems/1", &sys)
		return sys.PowerState == "On" && sys.Boot.BootSourceOverrideEnabled == "Disabled"
	}) {
		t.Errorf("hpe did not boot its one-time override: %+v", sys)
	}
	get("/redfish/v1/Managers/1/VirtualMedia/2", &cd)
	get("/redfish/v1/Managers/1/VirtualMedia/1", &floppy)
	if !cd.Inserted || cd.Image == nil || !strings.HasPrefix(*cd.Image, ir.HTTPURL) || !floppy.Inserted || floppy.Image == nil || !strings.HasPrefix(*floppy.Image, ir.HTTPURL) {
		t.Errorf("hpe's virtual media while cleaning: CD %+v, floppy %+v; want both from Ironic's HTTP server", cd, floppy)
	}
	if err := ir.Provision("hpe", "abort", nil); err != nil {
		t.Fatal(err)
	}
	waitState(t, ir, "hpe", "clean failed", 3*time.Minute)

	dell, _ := ir.Node("dell")
	if err := ir.Do("POST", "/v1/ports", map[string]any{"node_uuid": dell.UUID, "address": "52:54:00:00:00:02"}, nil); err != nil {
		t.Fatal(err)
	}
	idrac10(t, ir, release)
	if release == ironictest.Ironic21 {
		if err := ir.Provision("dell", "provide", nil); err != nil {
			t.Fatal(err)
		}
		dell = waitState(t, ir, "dell", "clean failed", 3*time.Minute)
		if e := dell.LastErr(); !strings.Contains(e, `No extensions found for "manager" under namespace "sushy.resources.manager.oems"`) {
			t.Errorf("dell's cleaning failed with %q, want sushy's word that no manager extension (sushy-oem-idrac) is installed", e)
		} else {
			t.Logf("Ironic 21.4, idrac-redfish-virtual-media: %s", e)
		}
		return
	}
	// Ironic 29: idrac-redfish-virtual-media inserts the ISO and sets the
	// virtual CD as the boot device through Dell's OEM, which the stand-in
	// agent sees booted.
	ir.Step(t, "provide (automated cleaning, idrac-redfish-virtual-media)", "provide", "available", 5*time.Minute, "dell")
	if ir.Agent.Boots(dell.UUID) < 1 {
		t.Errorf("dell: cleaning did not boot the agent")
	}
	ir.Step(t, "deploy (idrac-redfish-virtual-media, direct)", "active", "active", 5*time.Minute, "dell")
	if node, err := ir.WaitPower("deploy", "dell", "power on", time.Minute); err != nil {
		t.Error(err)
	} else if ir.Agent.Boots(node.UUID) < 2 {
		t.Errorf("dell: the deploy did not boot the agent")
	}
	// Each of those boots was set through Dell's OEM: the SCP imports are
	// jobs in the iDRAC's queue, completed by the boots.
	checkDellJobs(t, hc, "https://127.34.8.2", user, pass, "dell", 2)
	ir.Step(t, "undeploy (cleaning)", "deleted", "available", 5*time.Minute, "dell")
}

// idrac10: the idrac hardware type's cleaning of an iDRAC 10 (virtual
// media under the System; the scp-target-list quirk: ShareParameters.Target
// a list). Ironic 21.4 (sushy 4.3.3) looks for virtual media under the
// Manager only and fails the cleaning there. Ironic 29 inserts the ISO
// under the System; its sushy-oem-idrac
// 5.0 sends the string Target iDRAC 9 takes: the iDRAC 10 refuses each
// attempt to set the virtual CD as the boot device, the package retries
// (35 times, 15 s apart, RETRY_COUNT and RETRY_DELAY) before Ironic fails
// the cleaning; the test reads the first refusal in Ironic's log and
// leaves the node cleaning (Ironic is stopped with the test).
func idrac10(t *testing.T, ir *ironictest.Ironic, release ironictest.Release) {
	t.Helper()
	n, _ := ir.Node("dell10")
	if err := ir.Do("POST", "/v1/ports", map[string]any{"node_uuid": n.UUID, "address": "52:54:00:00:00:03"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := ir.Provision("dell10", "provide", nil); err != nil {
		t.Fatal(err)
	}
	if release == ironictest.Ironic21 {
		n = waitState(t, ir, "dell10", "clean failed", 3*time.Minute)
		if e := n.LastErr(); !strings.Contains(e, `The attribute VirtualMedia is missing from the resource /redfish/v1/Managers/iDRAC.Embedded.1`) {
			t.Errorf("dell10's cleaning failed with %q, want sushy 4.3.3's word that the Manager has no VirtualMedia (iDRAC 10 has it under the System)", e)
		} else {
			t.Logf("Ironic 21.4, idrac-redfish-virtual-media on an iDRAC 10: %s", e)
		}
		return
	}
	const refused = "Dell OEM set boot device failed (attempts left 35)"
	var line string
	if !testenv.WaitFor(2*time.Minute, func() bool {
		for l := range strings.Lines(ir.Log()) {
			if strings.Contains(l, refused) {
				line = l
				return true
			}
		}
		return false
	}) {
		n, _ = ir.Node("dell10")
		t.Fatalf("dell10: Ironic's log never says %q: %s", refused, n)
	}
	if !strings.Contains(line, "ActionParameterValueTypeError") || !strings.Contains(line, "The value 'ALL' for the parameter ShareParameters/Target") {
		t.Errorf("dell10: sushy-oem-idrac's first refusal %q is not the iDRAC 10's ActionParameterValueTypeError on ShareParameters/Target", line)
	}
	t.Logf("Ironic 29, idrac-redfish-virtual-media on an iDRAC 10: %s", strings.TrimSpace(line[strings.Index(line, refused):]))
}

// checkDellJobs fails the test unless the iDRAC at base has at least want
// completed configuration jobs in its queue (Dell's job service, as
// sushy-oem-idrac reads it): each virtual CD boot the idrac hardware type
// set is an SCP import, a job the boot completes.
func checkDellJobs(t *testing.T, hc *http.Client, base, user, pass, name string, want int) {
	t.Helper()
	var jobs struct {
		Members []struct{ Id, JobState, JobType, Message string }
	}
	getIn(t, hc, base+"/redfish/v1/Managers/iDRAC.Embedded.1/Oem/Dell/Jobs?$expand=.($levels=1)", user, pass, &jobs)
	completed := 0
	for _, j := range jobs.Members {
		if j.JobState == "Completed" {
			completed++
		}
	}
	t.Logf("%s: the iDRAC's job queue: %+v", name, jobs.Members)
	if completed < want {
		t.Errorf("%s: %d completed configuration jobs in the iDRAC's queue, want one per boot (%d or more): %+v", name, completed, want, jobs.Members)
	}
}
