package vbmcd

import (
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/ironictest"
	"github.com/bmlab/bmlab/internal/testenv"
)

// ilo5Node is a node of Ironic's ilo5 hardware type (iLO 5 and 6: the ilo
// type's interfaces and the ilo5 management interface), with the BIOS
// interface bios.
func ilo5Node(name, addr, user, pass, ca, deployISO, bios string) ironictest.NodeSpec {
	n := iloNode(name, addr, user, pass, ca, deployISO, map[string]any{"capabilities": "boot_mode:uefi"})
	n.Driver = "ilo5"
	n.Interfaces["management_interface"] = "ilo5"
	n.Interfaces["bios_interface"] = bios
	return n
}

// The secure boot state Ironic 21.4 and 29 cannot read from an iLO 6: with
// a Gen11 proliantutils (2.14 and 2.16.3) raises IloCommandNotSupportedError
// for get_secure_boot_mode itself (RIBCL has no such command); Ironic's
// ilo_common.get_secure_boot_mode turns it into Ironic's own
// IloOperationNotSupported, and IloManagement.get_secure_boot_state catches
// it as proliantutils.exception.IloOperationNotSupported, a name that module
// never had: evaluating that except clause raises AttributeError
// (ironic/drivers/modules/ilo/management.py, get_secure_boot_state).
const iloSecureBootWarning = "AttributeError: module 'proliantutils.exception' has no attribute 'IloOperationNotSupported'"

// TestIronicVendorBIOSAndILO5Sim: what the vendors' BIOS interfaces and
// Ironic 21.4's ilo5 type do against simulated servers of the vendor
// personalities, each at a BMC of its own, on each release:
//   - an iLO 6 with the ilo5 type and the ilo BIOS interface: validate,
//     manage; Ironic caches no BIOS setting, proliantutils saying "The
//     specified operation is not supported on current platform." (it
//     drives a Gen11 over RIBCL, for which it has no BIOS settings: the
//     refusal is the library's own, vbmcd never hears the call); Ironic
//     logs the secure boot AttributeError (iloSecureBootWarning) and so
//     records no boot mode. On 21.4, Ironic powers it on and off and sets a
//     one-time boot device over RIBCL, read back over Redfish; on 29,
//     apply_configuration as an out-of-band manual clean step
//     (disable_ramdisk) is refused by Ironic, the step requiring the
//     ramdisk, and the BIOS is unchanged;
//   - an iDRAC 9 with the idrac type and the idrac-redfish BIOS interface:
//     manage caches the BIOS settings (read over the standard Bios
//     resource). On 21.4 Ironic powers it and sets a one-time boot device
//     (standard Redfish); on 29, apply_configuration as a manual clean step
//     (the stand-in agent booted through Dell's OEM) changes ProcTurboMode,
//     which the iDRAC shows at /Bios and Ironic in its cache.
func TestIronicVendorBIOSAndILO5Sim(t *testing.T) {
	testenv.Integration(t)
	forEachRelease(t, ironicVendorBIOSAndILO5Sim)
}

func ironicVendorBIOSAndILO5Sim(t *testing.T, release ironictest.Release) {
	const user, pass = vendorUser, vendorPass
	ir, caCert, iso := vendorIronic(t, release, 2, "127.34.10.1-127.34.10.2", nil)
	const hpeBMC, dellBMC = "https://127.34.10.1", "https://127.34.10.2"

	hpe, err := ir.Enroll(ilo5Node("hpe", "127.34.10.1", user, pass, caCert, iso, "ilo"))
	if err != nil {
		t.Fatal(err)
	}
	var valid map[string]struct {
		Result *bool
		Reason string
	}
	if err := ir.Do("GET", "/v1/nodes/hpe/validate", nil, &valid); err != nil {
		t.Fatal(err)
	}
	for _, i := range []string{"power", "management", "bios"} {
		if r := valid[i]; r.Result == nil || !*r.Result {
			t.Errorf("hpe (ilo5): Ironic's validation of the %s interface: %+v", i, r)
		}
	}
	ir.Step(t, "manage (ilo5)", "manage", "manageable", 2*time.Minute, "hpe")
	pinLog(t, ir, "hpe (ilo5) at manage", "Unexpected exception when trying to detect secure_boot state for node "+hpe.UUID, iloSecureBootWarning)
	var raw map[string]any
	if err := ir.Do("GET", "/v1/nodes/hpe", nil, &raw); err != nil {
		t.Fatal(err)
	}
	_, hasMode := raw["boot_mode"]
	_, hasSecure := raw["secure_boot"]
	if !hasMode || !hasSecure || raw["boot_mode"] != nil || raw["secure_boot"] != nil {
		t.Errorf("hpe (ilo5): boot_mode %v, secure_boot %v; want neither recorded (Ironic gives up caching both at the secure boot error)", raw["boot_mode"], raw["secure_boot"])
	}

	// The ilo BIOS interface: proliantutils reads no BIOS of a Gen11.
	pinLog(t, ir, "hpe (ilo BIOS) at manage", "Caching BIOS settings failed on node "+hpe.UUID+" with error: The specified operation is not supported on current platform.")
	if s := biosSettings(t, ir, "hpe"); len(s) != 0 {
		t.Errorf("hpe (ilo BIOS): Ironic cached %v, want nothing (proliantutils reads no BIOS from a Gen11)", s)
	}
	if release == ironictest.Ironic21 {
		powerAndBoot(t, ir, "hpe", hpeBMC+"/redfish/v1/Systems/1", user, pass, caCert)
	}

	// Dell's idrac-redfish BIOS interface.
	d := idracNode("dell", dellBMC, user, pass, caCert, iso, map[string]any{"capabilities": "boot_mode:uefi"})
	d.Interfaces["bios_interface"] = "idrac-redfish"
	d.MACs = []string{"52:54:00:00:00:02"}
	if _, err := ir.Enroll(d); err != nil {
		t.Fatal(err)
	}
	ir.Step(t, "manage (idrac)", "manage", "manageable", 2*time.Minute, "dell")
	if s := biosSettings(t, ir, "dell"); s["ProcTurboMode"] != "Enabled" || s["BootMode"] != "Uefi" {
		t.Errorf("dell (idrac-redfish BIOS): Ironic's cache after manage %v, want the iDRAC's settings (ProcTurboMode Enabled, BootMode Uefi)", s)
	}
	if release == ironictest.Ironic21 {
		// Power and the boot device are standard Redfish in 21.4's idrac
		// type; only the virtual CD's boot needs Dell's OEM
		// (TestIronicVendorDriversSim/21), and with it every BIOS step.
		powerAndBoot(t, ir, "dell", dellBMC+"/redfish/v1/Systems/System.Embedded.1", user, pass, caCert)
		return
	}

	// Ironic 29: the ilo BIOS step out of band.
	turbo := map[string]any{"interface": "bios", "step": "apply_configuration",
		"args": map[string]any{"settings": []any{map[string]any{"name": "ProcTurboMode", "value": "Disabled"}}}}
	if err := ir.Provision("hpe", "clean", map[string]any{"clean_steps": []any{turbo}, "disable_ramdisk": true}); err != nil {
		t.Fatal(err)
	}
	n := waitState(t, ir, "hpe", "clean failed", time.Minute)
	// Ironic names the step by the user's whole step (a dict).
	if e := n.LastErr(); !strings.Contains(e, "Cannot clean node "+hpe.UUID+": clean step {") || !strings.Contains(e, "'step': 'apply_configuration'") || !strings.Contains(e, "} requires booting a ramdisk") {
		t.Errorf("hpe (ilo BIOS): out-of-band apply_configuration ended with %q, want Ironic's refusal (the ilo BIOS step requires the ramdisk)", e)
	} else {
		t.Logf("Ironic 29, ilo BIOS, apply_configuration with disable_ramdisk: %s", e)
	}
	if a, _ := getWith(t, hpeBMC, "/redfish/v1/Systems/1/Bios", user, pass, caCert)["Attributes"].(map[string]any); a["ProcTurboMode"] != "Enabled" {
		t.Errorf("hpe: ProcTurboMode %v after the refused step, want Enabled", a["ProcTurboMode"])
	}

	// Ironic 29: Dell's BIOS step, with the stand-in agent.
	start := time.Now()
	if err := ir.Provision("dell", "clean", map[string]any{"clean_steps": []any{turbo}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ir.Wait("apply_configuration (idrac-redfish)", "dell", "manageable", 3*time.Minute); err != nil {
		t.Fatalf("%v\nagent:\n%s", err, ir.Agent.Log())
	}
	t.Logf("dell: apply_configuration through manual cleaning: %s", time.Since(start).Round(100*time.Millisecond))
	if a, _ := getWith(t, dellBMC, "/redfish/v1/Systems/System.Embedded.1/Bios", user, pass, caCert)["Attributes"].(map[string]any); a["ProcTurboMode"] != "Disabled" {
		t.Errorf("dell: the iDRAC's ProcTurboMode %v after Ironic's step, want Disabled", a["ProcTurboMode"])
	}
	if s := biosSettings(t, ir, "dell"); s["ProcTurboMode"] != "Disabled" {
		t.Errorf("dell: Ironic's cached ProcTurboMode %v after the step, want Disabled", s["ProcTurboMode"])
	}
}

// powerAndBoot: Ironic powers a node on and off and sets a one-time boot
// device (for an ilo5 node RIBCL's SET_HOST_POWER, HOLD_PWR_BTN and
// SET_ONE_TIME_BOOT), each read back over the BMC's Redfish System at
// system (a URL).
func powerAndBoot(t *testing.T, ir *ironictest.Ironic, node, system, user, pass, ca string) {
	t.Helper()
	sys := func() map[string]any { return getWith(t, system, "", user, pass, ca) }
	for _, p := range []struct{ target, redfish string }{{"power on", "On"}, {"power off", "Off"}} {
		if err := ir.Power(node, p.target); err != nil {
			t.Fatal(err)
		}
		if _, err := ir.WaitPower(p.target, node, p.target, time.Minute); err != nil {
			t.Fatal(err)
		}
		if s := sys(); s["PowerState"] != p.redfish {
			t.Errorf("%s: Ironic says %q; the BMC's Redfish PowerState %v", node, p.target, s["PowerState"])
		}
	}
	if err := ir.Do("PUT", "/v1/nodes/"+node+"/management/boot_device", map[string]any{"boot_device": "pxe", "persistent": false}, nil); err != nil {
		t.Fatal(err)
	}
	var bd struct {
		BootDevice string `json:"boot_device"`
		Persistent *bool  `json:"persistent"`
	}
	if err := ir.Do("GET", "/v1/nodes/"+node+"/management/boot_device", nil, &bd); err != nil {
		t.Fatal(err)
	}
	boot, _ := sys()["Boot"].(map[string]any)
	if bd.BootDevice != "pxe" || boot["BootSourceOverrideTarget"] != "Pxe" || boot["BootSourceOverrideEnabled"] != "Once" {
		t.Errorf("%s: Ironic set pxe once; Ironic reads %+v, the BMC's Redfish %v", node, bd, boot)
	}
}

// biosSettings is Ironic's cache of a node's BIOS settings, by name.
func biosSettings(t *testing.T, ir *ironictest.Ironic, node string) map[string]any {
	t.Helper()
	var out struct {
		BIOS []struct {
			Name  string
			Value any
		}
	}
	if err := ir.Do("GET", "/v1/nodes/"+node+"/bios", nil, &out); err != nil {
		t.Fatal(err)
	}
	m := map[string]any{}
	for _, s := range out.BIOS {
		m[s.Name] = s.Value
	}
	return m
}

// pinLog fails the test unless one line of Ironic's log holds every part.
func pinLog(t *testing.T, ir *ironictest.Ironic, what string, parts ...string) {
	t.Helper()
	for l := range strings.Lines(ir.Log()) {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			t.Logf("%s, Ironic %s: %s", what, ir.Release, strings.TrimSpace(l[strings.Index(l, parts[0]):]))
			return
		}
	}
	t.Errorf("%s: no line of Ironic's log says %q", what, parts)
}
