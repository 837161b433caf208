package vbmcd

import (
	"crypto/sha1" //nolint:gosec // the checksum Ironic 21.4 asks for firmware images
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/ironictest"
	"github.com/bmlab/bmlab/internal/pki"
	"github.com/bmlab/bmlab/internal/sim"
	"github.com/bmlab/bmlab/internal/testenv"
)

// labCA makes a CA as labctl makes a lab's, for vbmcd to issue the BMCs'
// certificates from (--tls-ca-cert) and Ironic to verify them with.
func labCA(t *testing.T) (cert, key string) {
	t.Helper()
	dir := t.TempDir()
	cert, key = filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if _, err := pki.EnsureCA(cert, key, "bmlab test lab CA", time.Now()); err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// redfishNode is a node Ironic reaches with the redfish hardware type:
// virtual media boot of deployISO, Redfish inspection, BIOS and firmware.
// systemID is empty for a BMC of the node's own, as real hardware has one.
func redfishNode(name, addr, systemID, user, pass, ca, deployISO string, props map[string]any) ironictest.NodeSpec {
	info := map[string]any{
		"redfish_address":   addr,
		"redfish_username":  user,
		"redfish_password":  pass,
		"redfish_verify_ca": ca,
		"deploy_iso":        deployISO, // redfish_deploy_iso before 21.x
	}
	if systemID != "" {
		info["redfish_system_id"] = "/redfish/v1/Systems/" + systemID
	}
	return ironictest.NodeSpec{
		Name: name, Driver: "redfish", DriverInfo: info, Properties: props,
		Interfaces: map[string]string{
			"boot_interface": "redfish-virtual-media", "deploy_interface": "direct",
			"inspect_interface": "redfish", "bios_interface": "redfish",
			"management_interface": "redfish", "power_interface": "redfish",
			"raid_interface": "no-raid", "vendor_interface": "redfish",
		},
	}
}

// TestIronicSim: Ironic drives simulated servers through vbmcd's
// BMCs, one BMC per address (--bmc-addresses), with certificates from a
// lab's CA that Ironic verifies, and one node through the service's single
// listener with its system named: each redfish node goes through enroll,
// manage, Redfish inspection, provide (automated cleaning with the agent),
// deploy with redfish-virtual-media (the agent heartbeats when vbmcd says
// the virtual CD booted) and undeploy with cleaning. One node then gets a
// BIOS setting and a firmware update through Ironic's manual cleaning, the
// update as Ironic sends it (21.4 and 29 alike), SimpleUpdate without Targets, by the
// service-wide account. A node with the ipmi hardware type is managed and
// powered through ipmitool at port 623 of its own address. On each Ironic
// release (21.4 and 29.0.5; the stand-in agent serves its API over TLS, as
// Ironic 29 requires).
func TestIronicSim(t *testing.T) {
	testenv.Integration(t)
	forEachRelease(t, ironicSim)
}

// forEachRelease runs f as a subtest for each Ironic release the harness
// runs, named by its major version.
func forEachRelease(t *testing.T, f func(*testing.T, ironictest.Release)) {
	for _, r := range ironictest.Releases {
		t.Run(r.Short(), func(t *testing.T) { f(t, r) })
	}
}

// ironicSimDaemon starts vbmcd for Ironic: n simulated servers (500 ms to
// act), each with a BMC of its own in addrs, certificates from a lab CA,
// IPMI on, the loopback addresses of Ironic's HTTP server and of the
// agent's event listener allowed; edit changes the rest. It waits for the
// BMCs and returns the service's address, its state directory and the CA.
func ironicSimDaemon(t *testing.T, n int, addrs string, edit func(*Config)) (mainAddr, state, caCert string) {
	t.Helper()
	caCert, caKey := labCA(t)
	mainAddr, out := simDaemon(t, func(c *Config) {
		c.SimNodes, c.SimDelay, c.InsecureHTTP, c.IPMI = n, 500*time.Millisecond, false, true
		c.BMCAddresses = []string{addrs}
		c.TLSCACert, c.TLSCAKey = caCert, caKey
		c.MediaAllowLoopback = true  // Ironic's HTTP server is on loopback
		c.EventsAllowLoopback = true // and the agent's event listener
		edit(c)
		state = c.StateDir
	})
	want := fmt.Sprintf("%d machine(s) have a BMC of their own", n)
	if !testenv.WaitFor(10*time.Second, func() bool { return strings.Contains(out.String(), want) }) {
		t.Fatalf("no BMCs of their own:\n%s", out)
	}
	return mainAddr, state, caCert
}

func ironicSim(t *testing.T, release ironictest.Release) {
	mainAddr, state, caCert := ironicSimDaemon(t, 4, "127.34.3.1-127.34.3.9", func(c *Config) {
		c.BMCUpdateDowntime, c.BMCFlashTime = 2*time.Second, 500*time.Millisecond
	})
	const user, pass = "admin", "sim-pass-1"
	ir := ironictest.Start(t, ironictest.Options{Release: release})
	if err := ir.Agent.WatchEvents(ironictest.Redfish{URL: "https://" + mainAddr, User: user, Password: pass, CAFile: filepath.Join(state, "redfish-tls.crt")}); err != nil {
		t.Fatal(err)
	}
	iso := ir.Serve("/images/deploy.iso", testenv.MarkerISO(t))
	disk := testenv.MarkerDisk(t)
	image := ir.Serve("/images/disk.img", disk)
	uefi := map[string]any{"capabilities": "boot_mode:uefi"}

	own0, own1 := sim.UUIDFor("sim-0001"), sim.UUIDFor("sim-0002")
	single := sim.UUIDFor("sim-0003")
	specs := []ironictest.NodeSpec{
		redfishNode("own-0", "https://127.34.3.1", "", user, pass, caCert, iso, uefi),
		redfishNode("own-1", "https://127.34.3.2", "", user, pass, caCert, iso, uefi),
		redfishNode("single", "https://"+mainAddr, single, user, pass, filepath.Join(state, "redfish-tls.crt"), iso, uefi),
	}
	var names []string
	for _, s := range specs {
		// The image from enrollment on: see ironictest's Patch on Ironic 29.
		s.InstanceInfo = ironictest.ImageInstanceInfo(t, image, disk)
		if _, err := ir.Enroll(s); err != nil {
			t.Fatal(err)
		}
		names = append(names, s.Name)
	}
	ir.Step(t, "manage", "manage", "manageable", 2*time.Minute, names...)
	ir.Step(t, "Redfish inspection", "inspect", "manageable", 2*time.Minute, names...)
	for i, n := range names {
		node, _ := ir.Node(n)
		macs, err := ir.Ports(n)
		want := strings.ToLower(fmt.Sprintf("52:54:00:00:00:%02x", i+1))
		if err != nil || len(macs) != 1 || macs[0] != want || node.Properties["memory_mb"] == nil || node.Properties["cpus"] == nil {
			t.Errorf("%s after inspection: ports %v (%v), properties %v; want port %s, cpus and memory_mb", n, macs, err, node.Properties, want)
		}
	}
	ir.Step(t, "provide (automated cleaning)", "provide", "available", 3*time.Minute, names...)
	for _, n := range names {
		node, _ := ir.Node(n)
		if ir.Agent.Boots(node.UUID) < 1 {
			t.Errorf("%s: cleaning did not boot the agent", n)
		}
	}
	ir.Step(t, "deploy (redfish-virtual-media, direct)", "active", "active", 3*time.Minute, names...)
	for _, n := range names {
		if node, err := ir.WaitPower("deploy", n, "power on", time.Minute); err != nil {
			t.Error(err)
		} else if ir.Agent.Boots(node.UUID) < 2 {
			t.Errorf("%s: the deploy did not boot the agent", n)
		}
	}
	ir.Step(t, "undeploy (cleaning)", "deleted", "available", 3*time.Minute, names...)

	// BIOS and firmware through manual cleaning, on own-0.
	ir.Step(t, "manage for manual cleaning", "manage", "manageable", time.Minute, "own-0")
	clean := func(name string, steps ...map[string]any) {
		t.Helper()
		start := time.Now()
		if err := ir.Provision("own-0", "clean", map[string]any{"clean_steps": steps}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := ir.Wait(name, "own-0", "manageable", 3*time.Minute); err != nil {
			t.Fatalf("%v\nagent:\n%s", err, ir.Agent.Log())
		}
		t.Logf("%s: %s", name, time.Since(start).Round(100*time.Millisecond))
	}
	clean("BIOS settings", map[string]any{"interface": "bios", "step": "apply_configuration",
		"args": map[string]any{"settings": []any{map[string]any{"name": "ProcTurboMode", "value": "Disabled"}}}})
	ca := caCert
	bios := getWith(t, "https://127.34.3.1", "/redfish/v1/Systems/"+own0+"/Bios", user, pass, ca)
	if a, _ := bios["Attributes"].(map[string]any); a["ProcTurboMode"] != "Disabled" {
		t.Errorf("after Ironic's BIOS step: ProcTurboMode %v, want Disabled", a["ProcTurboMode"])
	}
	fw := ir.Serve("/firmware/bios-2.3.1.bin", disk)
	clean("firmware update (SimpleUpdate without Targets)", map[string]any{"interface": "management", "step": "update_firmware",
		"args": map[string]any{"firmware_images": []any{map[string]any{"url": fw, "checksum": sha1File(t, disk), "wait": 1}}}})
	sys := getWith(t, "https://127.34.3.1", "/redfish/v1/Systems/"+own0, user, pass, ca)
	if sys["BiosVersion"] != "2.3.1" {
		t.Errorf("after Ironic's firmware update: BiosVersion %v, want 2.3.1", sys["BiosVersion"])
	}
	if other := getWith(t, "https://127.34.3.2", "/redfish/v1/Systems/"+own1, user, pass, ca); other["BiosVersion"] == "2.3.1" {
		t.Errorf("the update without Targets reached own-1 too")
	}

	// The ipmi hardware type: ipmitool at port 623 of the node's own address.
	ipmiNode := sim.UUIDFor("sim-0004")
	if _, err := ir.Enroll(ironictest.NodeSpec{Name: "ipmi", Driver: "ipmi", DriverInfo: map[string]any{
		"ipmi_address": "127.34.3.4", "ipmi_port": 623, "ipmi_username": user, "ipmi_password": pass,
	}, Interfaces: map[string]string{"boot_interface": "ipxe", "deploy_interface": "direct", "management_interface": "ipmitool", "power_interface": "ipmitool"}}); err != nil {
		t.Fatal(err)
	}
	ir.Step(t, "manage (ipmi)", "manage", "manageable", 2*time.Minute, "ipmi")
	if err := ir.Power("ipmi", "power on"); err != nil {
		t.Fatal(err)
	}
	if _, err := ir.WaitPower("power on (ipmi)", "ipmi", "power on", time.Minute); err != nil {
		t.Fatal(err)
	}
	if s := getWith(t, "https://127.34.3.4", "/redfish/v1/Systems/"+ipmiNode, user, pass, ca); s["PowerState"] != "On" {
		t.Errorf("Ironic powered the ipmi node on; vbmcd reads %v", s["PowerState"])
	}
	if err := ir.Do("PUT", "/v1/nodes/ipmi/management/boot_device", map[string]any{"boot_device": "pxe", "persistent": false}, nil); err != nil {
		t.Fatal(err)
	}
	if s := getWith(t, "https://127.34.3.4", "/redfish/v1/Systems/"+ipmiNode, user, pass, ca); s["Boot"].(map[string]any)["BootSourceOverrideTarget"] != "Pxe" {
		t.Errorf("Ironic set the boot device to pxe over IPMI; vbmcd reads %v", s["Boot"])
	}
	if err := ir.Power("ipmi", "power off"); err != nil {
		t.Fatal(err)
	}
	if _, err := ir.WaitPower("power off (ipmi)", "ipmi", "power off", time.Minute); err != nil {
		t.Fatal(err)
	}
}

// sha1File is the SHA-1 of a file, as Ironic 21.4's firmware update wants
// its images' checksums.
func sha1File(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha1.Sum(b)
	return hex.EncodeToString(sum[:])
}

// getWith GETs path from a BMC at base, verifying its certificate against
// the CA in caFile, and decodes the JSON object.
func getWith(t *testing.T, base, path, user, pass, caFile string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+path, nil)
	req.SetBasicAuth(user, pass)
	resp, err := caClient(t, caFile).Do(req)
	if err != nil {
		t.Fatalf("GET %s%s: %v", base, path, err)
	}
	defer resp.Body.Close()
	var v map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s%s: %d %v", base, path, resp.StatusCode, err)
	}
	return v
}
