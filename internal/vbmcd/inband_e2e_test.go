package vbmcd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/digitalocean/go-libvirt"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virttest"
)

// inbandScript is what the guest runs instead of the deploy ramdisk's
// agent (its /init): the kernel's filesystems, the in-band IPMI drivers,
// then each check as a section of the serial console, between
// "BMLAB-KCS-BEGIN name" and "BMLAB-KCS-END name rc=N". ipa-bmc-address
// and ipa-bmc-mac run the commands ironic-python-agent 10.2.0 runs for its
// inventory (hardware.py, get_bmc_address and get_bmc_mac). wait-cd waits
// for the boot device the host sets over Redfish; the last section powers
// the machine off from inside.
const inbandScript = `#!/bin/sh
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
exec >/dev/console 2>&1
section() { name=$1; shift; t0=$(cut -d' ' -f1 /proc/uptime); echo "BMLAB-KCS-BEGIN $name"; "$@"; rc=$?; echo "BMLAB-KCS-END $name rc=$rc took=$(awk -v t0="$t0" '{printf "%.2f", $1 - t0}' /proc/uptime)s"; }
echo "BMLAB-KCS-UP $(cut -d' ' -f1 /proc/uptime)"
section modules sh -c 'modprobe ipmi_msghandler && modprobe ipmi_devintf && modprobe ipmi_si && for i in $(seq 1 300); do [ -e /dev/ipmi0 ] && exit 0; sleep 0.1; done; exit 1'
section lan ipmitool lan print 1
section ipa-bmc-address sh -c "ipmitool lan print 1 | awk '/IP Address[ \\t]*:/ {print \$4}'"
section ipa-bmc-mac sh -c "ipmitool lan print 1 | awk '/(IP|MAC) Address[ \\t]*:/ {print \$4}'"
section mc ipmitool mc info
section watchdog ipmitool mc watchdog get
section user sh -c 'ipmitool user set name 5 osadmin && ipmitool user set password 5 Os-admin-pass1 && ipmitool user priv 5 4 1 && ipmitool user enable 5'
section bootdev ipmitool chassis bootdev pxe options=persistent
section sel ipmitool sel list
section wait-cd sh -c 'for i in $(seq 1 600); do ipmitool chassis bootparam get 5 | grep -q "Force Boot from CD/DVD" && exit 0; sleep 0.5; done; exit 1'
section power-off ipmitool chassis power off
sleep 60
echo o >/proc/sysrq-trigger
sleep 1000
`

// withInbandIPMI is a daemon option (daemon's mods) that serves each VM's
// in-band IPMI, as vbmcd does by default but the tests' daemons do not:
// the VM gets its KCS at its next power-on through vbmcd, and the deploy
// ramdisk's agent reads its BMC there. For a test of the real agent
// through Ironic: with it, the node's inspection inventory holds
// wantInventoryBMC.
func withInbandIPMI(cfg *Config) { cfg.IPMI, cfg.IPMIInband = true, true }

// wantInventoryBMC is what ironic-python-agent reports of machine id's BMC
// (hardware.py, get_bmc_address and get_bmc_mac, in Ironic's inventory as
// bmc_address and bmc_mac) when the BMC answers at addr: the machine's own
// BMC address (--bmc-addresses), else the service's IPMI address
// (--ipmi-addr, by default --redfish-addr's host), and its BMC's MAC.
func wantInventoryBMC(id, addr string) map[string]string {
	return map[string]string{"bmc_address": addr, "bmc_mac": machine.BMCMAC(id).String()}
}

// ipaRamdisk is the deploy ramdisk's directory (hack/build-ipa-ramdisk.sh,
// which make test runs, links it as _out/tools/ipa-ramdisk).
func ipaRamdisk(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(testenv.RepoRoot(), "_out", "tools", "ipa-ramdisk")
	_, err := os.Stat(filepath.Join(dir, "initramfs"))
	testenv.Require(t, err == nil, "the deploy ramdisk (bash hack/build-ipa-ramdisk.sh): "+fmt.Sprint(err))
	return dir
}

// withScript writes the ramdisk's initramfs followed by a cpio archive
// that adds script as /name (the kernel unpacks concatenated archives, a
// compressed one and a plain one alike) into dir, and returns its path:
// the ramdisk stays one build, and the guest runs the script by rdinit=.
func withScript(t *testing.T, ramdisk, dir, name, script string) string {
	t.Helper()
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testenv.Command(t, "cpio"), "--quiet", "-o", "-H", "newc", "-R", "0:0")
	cmd.Dir, cmd.Stdin = root, strings.NewReader(name+"\n")
	extra, err := cmd.Output()
	if err != nil {
		t.Fatalf("cpio: %v", err)
	}
	base, err := os.ReadFile(filepath.Join(ramdisk, "initramfs"))
	if err != nil {
		t.Fatal(err)
	}
	// The kernel looks for the next archive's cpio magic at a 4-byte
	// boundary only, skipping zeros (init/initramfs.c, unpack_to_rootfs).
	base = append(base, make([]byte, (4-len(base)%4)%4)...)
	out := filepath.Join(dir, "initramfs")
	if err := os.WriteFile(out, append(base, extra...), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// sections reads the guest's sections from its serial log.
type sections struct {
	t   *testing.T
	log string
}

// wait returns section name's output and exit status, once it ended.
func (s sections) wait(name string, timeout time.Duration) (string, string) {
	s.t.Helper()
	re := regexp.MustCompile(`(?s)BMLAB-KCS-BEGIN ` + regexp.QuoteMeta(name) + `\n(.*?)BMLAB-KCS-END ` + regexp.QuoteMeta(name) + ` rc=(\d+) took=(\S+)`)
	var m []string
	if !testenv.WaitFor(timeout, func() bool {
		b, _ := os.ReadFile(s.log)
		m = re.FindStringSubmatch(strings.ReplaceAll(string(b), "\r", ""))
		return m != nil
	}) {
		b, _ := os.ReadFile(s.log)
		tail := string(b)
		if len(tail) > 3000 {
			tail = tail[len(tail)-3000:]
		}
		s.t.Fatalf("the guest's section %s did not end within %s; serial log ends:\n%s", name, timeout, tail)
	}
	s.t.Logf("in-band %s (rc=%s, %s in the guest):\n%s", name, m[2], m[3], m[1])
	return m[1], m[2]
}

// began waits until section name began.
func (s sections) began(name string, timeout time.Duration) {
	s.t.Helper()
	if !testenv.WaitFor(timeout, func() bool { return testenv.Count(s.log, "BMLAB-KCS-BEGIN "+name) > 0 }) {
		s.t.Fatalf("the guest's section %s did not begin within %s", name, timeout)
	}
}

// must is wait for a section that must exit 0.
func (s sections) must(name string, timeout time.Duration) string {
	s.t.Helper()
	out, rc := s.wait(name, timeout)
	if rc != "0" {
		s.t.Fatalf("in-band %s exited %s:\n%s", name, rc, out)
	}
	return out
}

// lanIpmitool runs ipmitool over LAN against the BMC at addr.
func lanIpmitool(t *testing.T, addr, user, pass string, args ...string) string {
	t.Helper()
	argv := append([]string{"-I", "lanplus", "-H", addr, "-U", user, "-P", pass}, args...)
	out, err := exec.Command(testenv.Command(t, "ipmitool"), argv...).CombinedOutput()
	if err != nil {
		t.Fatalf("ipmitool -H %s %s: %v\n%s", addr, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestE2EInbandIPMI: a real guest (the deploy ramdisk's kernel, its
// ipmi_si and ipmitool 1.8.19 from Debian 13) reaches its BMC through the
// KCS interface vbmcd wired into its domain at power-on, and what it reads
// and does there is what Redfish and ipmitool over LAN see: `lan print`
// gives the machine's own BMC address (--bmc-addresses) and its BMC's MAC,
// as ironic-python-agent's commands read them; `mc info` and `lan print`
// read the same over LAN; a user made with `ipmitool user` logs in over
// Redfish; a boot device set in-band shows over Redfish, and one set over
// Redfish shows in-band; the SEL holds the power-on, in-band and over LAN;
// `chassis power off` from inside powers the machine off. One boot.
func TestE2EInbandIPMI(t *testing.T) {
	lab := virttest.New(t, "e2e-kcs-")
	ramdisk := ipaRamdisk(t)
	testenv.Command(t, "ipmitool")
	vm := lab.NewVM(t, "a", virttest.VMOptions{NoCD: true, MemoryMiB: 1024})
	initrd := withScript(t, ramdisk, testenv.QemuDir(t), "bmlab-kcs-test", inbandScript)
	lab.DirectBoot(t, vm, filepath.Join(ramdisk, "vmlinuz"), initrd, "console=ttyS0,115200 rdinit=/bmlab-kcs-test loglevel=4 panic=-1")
	const bmcAddr = "127.34.9.1"
	url := daemon(t, "e2e-kcs-", withInbandIPMI, func(cfg *Config) {
		cfg.BMCIPMIPort = 623
		cfg.BMCAddresses = []string{vm.Name + "=" + bmcAddr}
	})
	sys := "/redfish/v1/Systems/" + vm.ID
	start := time.Now()
	if code, body := postJSON(t, url, sys+"/Actions/ComputerSystem.Reset", `{"ResetType":"On"}`); code/100 != 2 {
		t.Fatalf("power on over Redfish: %d %s", code, body)
	}
	if x := lab.LiveXML(t, vm.Name, libvirt.DomainXMLInactive); !strings.Contains(x, "ipmi-bmc-extern") || !strings.Contains(x, "/run/vbmcd/kcs/"+vm.ID+".sock") {
		t.Fatalf("vbmcd did not wire the KCS at power-on:\n%s", x)
	}
	s := sections{t: t, log: vm.SerialLog}
	s.must("modules", 6*time.Minute)
	t.Logf("the guest reached its BMC %v after the power-on", time.Since(start).Round(time.Second))

	// lan print: the machine's own BMC's address and MAC, as the agent
	// reads them, and the same over LAN.
	want := wantInventoryBMC(vm.ID, bmcAddr)
	mac := want["bmc_mac"]
	lan := s.must("lan", 2*time.Minute)
	if got := strings.TrimSpace(s.must("ipa-bmc-address", 2*time.Minute)); got != want["bmc_address"] {
		t.Errorf("the agent's BMC address: %q, want %s", got, want["bmc_address"])
	}
	if got := strings.Fields(s.must("ipa-bmc-mac", 2*time.Minute)); len(got) != 2 || got[0] != bmcAddr || got[1] != mac {
		t.Errorf("the agent's BMC address and MAC: %q, want %s %s", got, bmcAddr, mac)
	}
	if viaLAN := lanIpmitool(t, bmcAddr, "admin", "e2e-pass", "lan", "print", "1"); viaLAN != lan {
		t.Errorf("lan print differs over LAN:\n%s\nin-band:\n%s", viaLAN, lan)
	}
	// Redfish's view of the same NIC: the Manager's EthernetInterface.
	nic := getJSON(t, url, "/redfish/v1/Managers/"+vm.ID+"/EthernetInterfaces/1")
	v4, _ := nic["IPv4Addresses"].([]any)
	if nic["MACAddress"] != mac || len(v4) != 1 || v4[0].(map[string]any)["Address"] != bmcAddr ||
		!strings.Contains(lan, "Subnet Mask             : "+v4[0].(map[string]any)["SubnetMask"].(string)) {
		t.Errorf("the Manager's EthernetInterface %v does not agree with lan print:\n%s", nic, lan)
	}
	mc := s.must("mc", 2*time.Minute)
	if viaLAN := lanIpmitool(t, bmcAddr, "admin", "e2e-pass", "mc", "info"); viaLAN != mc {
		t.Errorf("mc info differs over LAN:\n%s\nin-band:\n%s", viaLAN, mc)
	}
	s.must("watchdog", 2*time.Minute)

	// A user made in-band logs in over Redfish, at its machine's BMC and
	// at the service's listener.
	s.must("user", 2*time.Minute)
	for _, base := range []string{"https://" + bmcAddr, url} {
		r, err := send("GET", base+sys, "osadmin", "Os-admin-pass1", "")
		if err != nil || r.Code != 200 {
			t.Errorf("Redfish GET %s%s as the in-band user: %d %v %.200s", base, sys, r.Code, err, r.Body)
		}
	}
	// An Administrator: it may power the machine (checked below by the
	// guest's own power off), not another machine's; reached over LAN too.
	lanIpmitool(t, bmcAddr, "osadmin", "Os-admin-pass1", "chassis", "status")

	// Boot device: in-band → Redfish, then Redfish → in-band.
	s.must("bootdev", 2*time.Minute)
	boot := getJSON(t, url, sys)["Boot"].(map[string]any)
	if boot["BootSourceOverrideTarget"] != "Pxe" || boot["BootSourceOverrideEnabled"] != "Continuous" {
		t.Errorf("Redfish Boot after the in-band bootdev pxe persistent: %v", boot)
	}
	sel := s.must("sel", 2*time.Minute)
	if !strings.Contains(sel, "S0/G0: working") {
		t.Errorf("the SEL read in-band has no power-on record:\n%s", sel)
	}
	r, err := send("PATCH", url+sys, "admin", "e2e-pass", `{"Boot":{"BootSourceOverrideTarget":"Cd","BootSourceOverrideEnabled":"Once"}}`)
	if err != nil || r.Code/100 != 2 {
		t.Fatalf("PATCH Boot Cd Once: %d %v %s", r.Code, err, r.Body)
	}
	s.must("wait-cd", 5*time.Minute)

	// Power off from the OS: the machine stops under the command, which
	// never prints its end.
	s.began("power-off", 2*time.Minute)
	if !testenv.WaitFor(time.Minute, func() bool { return getJSON(t, url, sys)["PowerState"] == "Off" }) {
		t.Errorf("Redfish PowerState after the in-band power off: %v", getJSON(t, url, sys)["PowerState"])
	}
	// The SEL over LAN: what the guest read, then the power off.
	viaLAN := lanIpmitool(t, bmcAddr, "admin", "e2e-pass", "sel", "list")
	if !strings.HasPrefix(strings.TrimSpace(viaLAN), strings.TrimSpace(sel)) || !strings.Contains(viaLAN, "S5/G2: soft-off") {
		t.Errorf("the SEL over LAN:\n%s\nwant what the guest read:\n%s\nthen the power off", viaLAN, sel)
	}
	t.Logf("one boot, every check: %v", time.Since(start).Round(time.Second))
}
