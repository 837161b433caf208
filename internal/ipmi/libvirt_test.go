package ipmi

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/digitalocean/go-libvirt"

	"github.com/bmlab/bmlab/internal/ipmi/client"
	"github.com/bmlab/bmlab/internal/ipmi/wire"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/redfish"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virttest"
)

// The tests in this file run the BMCs over the libvirt backend: real
// libvirtd, real qemu (TCG), real clients with their default options. Every
// effect is read back from libvirt itself (virttest's DomainState, the
// domain's ID, the serial log), not from the model. VM boots are the slow
// part, so each test boots as few times as it can.

// bootWithin is generous: TCG on a busy 2-core machine (UEFI takes longest).
const bootWithin = 120 * time.Second

// waitState waits until libvirt itself reports the domain in state want.
func waitState(t *testing.T, vl *virttest.Lab, name string, want libvirt.DomainState, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var got libvirt.DomainState
	if !testenv.WaitFor(within, func() bool { got = vl.DomainState(t, name); return got == want }) {
		t.Fatalf("%s: libvirt says state %d, want %d after %s", name, got, want, within)
	}
	return time.Since(start)
}

// waitBoot waits for one more boot of the marker (grub prints it twice) and
// returns the new count.
func waitBoot(t *testing.T, vm *virttest.VM, marker string, before int) int {
	t.Helper()
	return vm.WaitMarker(t, marker, before, bootWithin) // the marker prints once per boot
}

// domainID is the running domain's ID in libvirt: every start gets a new one.
func domainID(t *testing.T, vl *virttest.Lab, name string) int32 {
	t.Helper()
	d, err := vl.Client.DomainLookupByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return d.ID
}

func TestLibvirtPower(t *testing.T) {
	testenv.Command(t, "ipmitool")
	vl := virttest.New(t, "it-power-")
	vm := vl.NewVM(t, "a", virttest.VMOptions{DiskMarker: true, NoCD: true})
	l := serveLab(t, vl.Service, []string{vm.ID}, "127.0.0.1")

	// The reply time of power on alone (the session is already up), against
	// how long libvirt takes to have the domain running.
	c := l.dial(t, 0, 17)
	start := time.Now()
	code, _, err := c.Do(wire.NetFnChassis, cmdChassisControl, 0x01)
	took := time.Since(start)
	if err != nil || code != wire.CodeOK {
		t.Fatalf("power on: %v %v", err, code)
	}
	running := took + waitState(t, vl, vm.Name, libvirt.DomainRunning, 30*time.Second)
	t.Logf("power on answered in %v; libvirt reported the domain running %v after the command", took.Round(time.Millisecond), running.Round(time.Millisecond))
	if took >= time.Second {
		t.Errorf("power on took %v to answer", took)
	}
	boots := waitBoot(t, vm, testenv.DiskMarker, 0)
	if code, _, err := c.Do(wire.NetFnChassis, cmdChassisControl, 0x00); err != nil || code != wire.CodeOK {
		t.Fatalf("power off: %v %v", err, code)
	}
	waitState(t, vl, vm.Name, libvirt.DomainShutoff, 30*time.Second)
	// The answer came before the stop finished; the model catches up when
	// Stop returns (or the event arrives), a moment after libvirt.
	waitPower(t, l, 0, machine.PowerOff)

	for _, extra := range [][]string{nil, {"-C", "3"}, {"-C", "17"}} {
		t.Run(strings.Join(append([]string{"suite"}, extra...), ""), func(t *testing.T) {
			if out := l.mustIpmitool(t, 0, extra, "power", "status"); !strings.Contains(out, "Chassis Power is off") {
				t.Fatalf("power status: %q", out)
			}
			l.mustIpmitool(t, 0, extra, "power", "on")
			waitState(t, vl, vm.Name, libvirt.DomainRunning, 30*time.Second)
			// The answer came before the start finished; the model catches
			// up with libvirt when Start returns (or the event arrives).
			waitPower(t, l, 0, machine.PowerOn)
			if out := l.mustIpmitool(t, 0, extra, "power", "status"); !strings.Contains(out, "Chassis Power is on") {
				t.Fatalf("power status: %q", out)
			}
			boots = waitBoot(t, vm, testenv.DiskMarker, boots)

			// cycle: off and on again, a new qemu (libvirt gives it a new ID).
			before := domainID(t, vl, vm.Name)
			l.mustIpmitool(t, 0, extra, "power", "cycle")
			if !testenv.WaitFor(30*time.Second, func() bool {
				return vl.DomainState(t, vm.Name) == libvirt.DomainRunning && domainID(t, vl, vm.Name) != before
			}) {
				t.Fatalf("power cycle: domain ID still %d (or not running)", before)
			}
			boots = waitBoot(t, vm, testenv.DiskMarker, boots)

			// reset: the same qemu resets (same ID). That the guest then
			// boots again is TestLibvirtWarmResetBoots.
			before = domainID(t, vl, vm.Name)
			l.mustIpmitool(t, 0, extra, "power", "reset")
			if id := domainID(t, vl, vm.Name); id != before || vl.DomainState(t, vm.Name) != libvirt.DomainRunning {
				t.Errorf("power reset: domain ID %d -> %d, want a warm reset", before, id)
			}

			// diag (NMI) and soft (ACPI power button) reach qemu; grub has
			// handlers for neither, so the domain runs on, as the same
			// machine would on real hardware.
			l.mustIpmitool(t, 0, extra, "power", "diag")
			l.mustIpmitool(t, 0, extra, "power", "soft")
			time.Sleep(time.Second)
			if st := vl.DomainState(t, vm.Name); st != libvirt.DomainRunning || domainID(t, vl, vm.Name) != before {
				t.Errorf("after diag and soft: state %d, ID %d; want the same domain running", st, domainID(t, vl, vm.Name))
			}

			l.mustIpmitool(t, 0, extra, "power", "off")
			waitState(t, vl, vm.Name, libvirt.DomainShutoff, 30*time.Second)
			if out := l.mustIpmitool(t, 0, extra, "power", "status"); !strings.Contains(out, "Chassis Power is off") {
				t.Fatalf("power status: %q", out)
			}
		})
	}

	t.Run("freeipmi", func(t *testing.T) {
		power := testenv.Command(t, "ipmi-power")
		run := func(args ...string) string {
			t.Helper()
			argv := append([]string{"-h", l.addrs[0], "-u", testUser, "-p", testPass, "-D", "LAN_2_0"}, args...)
			out, err := exec.Command(power, argv...).CombinedOutput()
			t.Logf("ipmi-power %s: %s", strings.Join(args, " "), strings.TrimSpace(string(out)))
			if err != nil {
				t.Fatalf("ipmi-power %v: %v", args, err)
			}
			return string(out)
		}
		run("--on")
		waitState(t, vl, vm.Name, libvirt.DomainRunning, 30*time.Second)
		waitPower(t, l, 0, machine.PowerOn)
		if out := run("--stat"); !strings.Contains(out, ": on") {
			t.Errorf("ipmi-power --stat: %q", out)
		}
		run("--off")
		waitState(t, vl, vm.Name, libvirt.DomainShutoff, 30*time.Second)
	})

	t.Run("pyghmi", func(t *testing.T) {
		py := testenv.Python(t, "pyghmi")
		host, port, _ := net.SplitHostPort(l.addrs[0])
		script := `
import sys
from pyghmi.ipmi import command
c = command.Command(bmc=sys.argv[1], port=int(sys.argv[2]), userid=sys.argv[3], password=sys.argv[4])
print(c.get_power())
print(c.set_power("on", wait=False))
`
		out, err := exec.Command(py, "-c", script, host, port, testUser, testPass).CombinedOutput()
		t.Logf("pyghmi: %s", out)
		if err != nil {
			t.Fatalf("pyghmi: %v", err)
		}
		if !strings.Contains(string(out), "{'powerstate': 'off'}") {
			t.Errorf("pyghmi get_power: %s", out)
		}
		waitState(t, vl, vm.Name, libvirt.DomainRunning, 30*time.Second)
	})
}

// TestLibvirtWarmResetBoots: after `power reset` the guest boots again
// (a reset raises libvirt's reboot event, which once made the model reset
// again, in a loop).
func TestLibvirtWarmResetBoots(t *testing.T) {
	testenv.Command(t, "ipmitool")
	vl := virttest.New(t, "it-reset-")
	vm := vl.NewVM(t, "a", virttest.VMOptions{DiskMarker: true, NoCD: true})
	l := serveLab(t, vl.Service, []string{vm.ID}, "127.0.0.1")
	l.mustIpmitool(t, 0, nil, "power", "on")
	boots := waitBoot(t, vm, testenv.DiskMarker, 0)
	l.mustIpmitool(t, 0, nil, "power", "reset")
	waitBoot(t, vm, testenv.DiskMarker, boots)
}

// TestLibvirtBootAndSOL: `chassis bootdev` decides what the domain boots,
// seen on a SOL console that was activated before the VM started; input
// typed into SOL reaches grub; SOL can be left and taken again.
func TestLibvirtBootAndSOL(t *testing.T) {
	testenv.Command(t, "ipmitool")
	vl := virttest.New(t, "it-boot-")
	vm := vl.NewVM(t, "a", virttest.VMOptions{DiskMarker: true})
	l := serveLab(t, vl.Service, []string{vm.ID}, "127.0.0.1")

	in, out, cmd := solActivate(t, l, 0)
	l.mustIpmitool(t, 0, nil, "chassis", "bootdev", "cdrom")
	l.mustIpmitool(t, 0, nil, "power", "on")
	waitBoot(t, vm, testenv.Marker, 0)
	if !testenv.WaitFor(10*time.Second, func() bool { return strings.Contains(out.String(), testenv.Marker) }) {
		t.Fatalf("the marker is in the serial log but not on the SOL console:\n%q", out.String())
	}
	// The marker ISO powers the VM off; the Once override is spent.
	waitState(t, vl, vm.Name, libvirt.DomainShutoff, 60*time.Second)
	if cd, disk := vm.Markers(); cd != 1 || disk != 0 {
		t.Errorf("markers cd=%d disk=%d, want one CD boot", cd, disk)
	}
	if b := l.machine(t, 0).Settings.Boot; b.Enabled != machine.BootDisabled {
		t.Errorf("Once override not spent: %+v", b)
	}

	// Leave SOL with ~. and take it again.
	solLeave(t, in, out, cmd)
	in, out, _ = solActivate(t, l, 0)
	if !testenv.WaitFor(10*time.Second, func() bool { return strings.Contains(out.String(), "SOL Session operational") }) {
		t.Fatalf("reactivation:\n%q", out.String())
	}

	l.mustIpmitool(t, 0, nil, "chassis", "bootdev", "disk", "options=persistent")
	l.mustIpmitool(t, 0, nil, "power", "on")
	waitBoot(t, vm, testenv.DiskMarker, 0)
	// The console attaches once the model sees the domain running (SOL
	// retries every 500 ms); grub's first lines from the disk can come
	// before that and are then only in the serial log. The prompt is
	// reliably there, and what is typed at it runs.
	if !testenv.WaitFor(10*time.Second, func() bool { return strings.Contains(out.String(), "grub> ") }) {
		t.Fatalf("no grub prompt on SOL:\n%q", out.String())
	}
	if _, err := in.Write([]byte("echo SOL-INPUT-OK\r")); err != nil {
		t.Fatal(err)
	}
	// grub echoes each key between cursor moves; the whole word appears
	// only as the output of the command.
	if !testenv.WaitFor(10*time.Second, func() bool { return strings.Contains(out.String(), "\n\rSOL-INPUT-OK") }) {
		t.Fatalf("typed command did not run in grub:\n%q", out.String())
	}
	t.Logf("disk marker caught on the reactivated SOL console: %v", strings.Contains(out.String(), testenv.DiskMarker))
	if cd, _ := vm.Markers(); cd != 1 {
		t.Errorf("persistent disk boot booted the CD (cd markers %d)", cd)
	}
	// `sol deactivate` from another session frees the payload.
	l.mustIpmitool(t, 0, nil, "sol", "deactivate")
	l.mustIpmitool(t, 0, nil, "power", "off")
	waitState(t, vl, vm.Name, libvirt.DomainShutoff, 30*time.Second)
}

// TestLibvirtUEFIBoot: efiboot on a UEFI domain boots the CD.
func TestLibvirtUEFIBoot(t *testing.T) {
	testenv.Command(t, "ipmitool")
	vl := virttest.New(t, "it-uefi-")
	vm := vl.NewVM(t, "a", virttest.VMOptions{UEFI: true})
	l := serveLab(t, vl.Service, []string{vm.ID}, "127.0.0.1")
	l.mustIpmitool(t, 0, nil, "chassis", "bootdev", "cdrom", "options=efiboot")
	start := time.Now()
	l.mustIpmitool(t, 0, nil, "power", "on")
	waitBoot(t, vm, testenv.Marker, 0)
	t.Logf("UEFI boot to the marker took %v", time.Since(start).Round(time.Second))
	if m := l.machine(t, 0); m.Mode != machine.BootModeUEFI {
		t.Errorf("mode %s", m.Mode)
	}
}

// TestLibvirtCrossProtocol: Redfish and IPMI over the same libvirt domain
// see each other's boot override (stored in the domain's metadata).
func TestLibvirtCrossProtocol(t *testing.T) {
	testenv.Command(t, "ipmitool")
	vl := virttest.New(t, "it-xproto-")
	vm := vl.NewVM(t, "a", virttest.VMOptions{})
	l := serveLab(t, vl.Service, []string{vm.ID}, "127.0.0.1")
	rf := httptest.NewServer(redfish.New(vl.Service, testenv.Logger(t), redfish.WithCredentials(testUser, testPass)).Handler())
	t.Cleanup(rf.Close)
	do := func(method string, body any) map[string]any {
		t.Helper()
		var rd *bytes.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		} else {
			rd = bytes.NewReader(nil)
		}
		req, _ := http.NewRequest(method, rf.URL+"/redfish/v1/Systems/"+vm.ID, rd)
		req.SetBasicAuth(testUser, testPass)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode >= 300 {
			t.Fatalf("%s: %s %v", method, resp.Status, out)
		}
		return out
	}
	do(http.MethodPatch, map[string]any{"Boot": map[string]any{"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once"}})
	out := l.mustIpmitool(t, 0, nil, "chassis", "bootparam", "get", "5")
	for _, want := range []string{"Force Boot from CD/DVD", "Options apply to only next boot"} {
		if !strings.Contains(out, want) {
			t.Errorf("bootparam get 5 after the Redfish PATCH lacks %q:\n%s", want, out)
		}
	}
	l.mustIpmitool(t, 0, nil, "chassis", "bootdev", "pxe", "options=persistent")
	boot, _ := do(http.MethodGet, nil)["Boot"].(map[string]any)
	if boot["BootSourceOverrideTarget"] != "Pxe" || boot["BootSourceOverrideEnabled"] != "Continuous" {
		t.Errorf("Redfish Boot after ipmitool bootdev pxe persistent: %v", boot)
	}
	// libvirt's own definition boots the network first now.
	x := vl.LiveXML(t, vm.Name, libvirt.DomainXMLInactive)
	if i := strings.Index(x, "<boot dev="); i < 0 || !strings.HasPrefix(x[i+len("<boot dev="):], "'network'") {
		t.Errorf("persistent definition does not boot the network first:\n%s", x)
	}
}

// TestLibvirtFailures: what libvirt refuses is an IPMI failure, not "ok".
func TestLibvirtFailures(t *testing.T) {
	testenv.Command(t, "ipmitool")
	vl := virttest.New(t, "it-fail-")
	vm := vl.NewVM(t, "a", virttest.VMOptions{DiskMarker: true, NoCD: true})
	l := serveLab(t, vl.Service, []string{vm.ID}, "127.0.0.1")
	m := l.machine(t, 0)
	for _, d := range m.Disks {
		if d.Device == machine.DeviceDisk {
			if err := os.Remove(d.Source); err != nil {
				t.Fatal(err)
			}
		}
	}
	// libvirt refuses to start a domain whose disk is gone, but only after
	// about a second of work here: longer than the BMC waits before it
	// answers. The refusal is then a power control fault; were it faster, it
	// would be the completion code.
	c := l.dial(t, 0, 17)
	code, _, err := c.Do(wire.NetFnChassis, cmdChassisControl, 0x01)
	if err != nil {
		t.Fatal(err)
	}
	if code == wire.CodeOK {
		if !testenv.WaitFor(30*time.Second, func() bool {
			_, d, _ := c.Do(wire.NetFnChassis, cmdGetChassisStatus)
			return len(d) > 0 && d[0]&0x10 != 0
		}) {
			t.Fatal("power on answered ok, and the refused start never became a power control fault")
		}
		t.Logf("libvirt refused the start after the answer: power control fault")
	} else {
		t.Logf("libvirt refused the start in time: completion code %v", code)
	}
	if st := vl.DomainState(t, vm.Name); st != libvirt.DomainShutoff {
		t.Errorf("domain state %d after a refused start", st)
	}
	if out := l.mustIpmitool(t, 0, nil, "chassis", "status"); !strings.Contains(out, "System Power         : off") || !strings.Contains(out, "Power Control Fault  : true") {
		t.Errorf("chassis status after the refused start:\n%s", out)
	}
	if out, err := l.ipmitool(t, 0, nil, "power", "diag"); err == nil {
		t.Errorf("NMI to an off domain succeeded: %s", out)
	}

	// The domain undefined behind the daemon's back: power on through a
	// session opened before is not a success (libvirt's "no domain" if the
	// command wins the race with the event, else the BMC is gone with its
	// machine and does not answer).
	d, err := vl.Client.DomainLookupByName(vm.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := vl.Client.DomainUndefineFlags(d, libvirt.DomainUndefineNvram); err != nil {
		t.Fatal(err)
	}
	code, _, err = c.Do(wire.NetFnChassis, cmdChassisControl, 0x01)
	if err == nil && code == wire.CodeOK {
		t.Fatal("power on of an undefined domain answered ok")
	}
	if err != nil {
		t.Logf("power on of an undefined domain: no answer (the BMC went with its machine): %v", err)
	} else {
		t.Logf("power on of an undefined domain: completion code %v", code)
	}
	if _, err := vl.Client.DomainLookupByName(vm.Name); err == nil {
		t.Error("the domain came back")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if c2, err := client.Dial(ctx, l.addrs[0], client.Config{Username: testUser, Password: testPass, Suite: 17}); err == nil {
		c2.Close()
		t.Error("the BMC of an undefined domain still answers")
	}
}
