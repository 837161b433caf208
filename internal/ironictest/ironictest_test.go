package ironictest

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/netplumb/netnstest"
	"github.com/bmlab/bmlab/internal/testenv"
)

// TestSushyRegistriesOverlay: Debian's python3-sushy 4.3.3 cannot list
// its standard message registries (the directory is missing: every task
// monitor Ironic polls died with FileNotFoundError); through the overlay
// on PYTHONPATH it lists vbmcd's Base and Update registries, and Debian's
// package directory is left as it was.
func TestSushyRegistriesOverlay(t *testing.T) {
	testenv.Integration(t)
	py := testenv.Python(t, "sushy")
	const list = `import sushy.main as m
regs = m.Sushy._get_standard_message_registry_collection(None)
print(" ".join(sorted(r.identity for r in regs)))`
	where, err := exec.Command(py, "-c", "import os, sushy; print(os.path.dirname(sushy.__file__))").Output()
	if err != nil {
		t.Fatal(err)
	}
	debian := filepath.Join(strings.TrimSpace(string(where)), registriesDir)
	_, statErr := os.Stat(debian)
	shipped := statErr == nil
	out, err := exec.Command(py, "-c", list).CombinedOutput()
	if !shipped && (err == nil || !strings.Contains(string(out), "FileNotFoundError")) {
		t.Errorf("without %s sushy lists its registries anyway (%v): %s", debian, err, out)
	}
	dir := t.TempDir()
	if err := sushyOverlay(install{release: Ironic21}, dir); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-c", list)
	cmd.Env = append(cleanEnv(), "PYTHONPATH="+dir)
	got, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(got), "Base.") || !strings.Contains(string(got), "Update.") {
		t.Fatalf("sushy's standard registries through the overlay: %v\n%s", err, got)
	}
	if _, err := os.Stat(debian); !shipped && err == nil {
		t.Errorf("the overlay made %s in Debian's package", debian)
	}
}

// TestStepErrorSaysWhichStepAndWhy: a node whose BMC does not answer
// fails manage; Wait says the step, where the node is and Ironic's
// last_error. Ironic runs in a network namespace of the test's own, as on
// a lab's machine network. Each release.
func TestStepErrorSaysWhichStepAndWhy(t *testing.T) {
	testenv.Integration(t)
	for _, r := range Releases {
		t.Run(r.Short(), func(t *testing.T) { stepErrorSaysWhichStepAndWhy(t, r) })
	}
}

func stepErrorSaysWhichStepAndWhy(t *testing.T, r Release) {
	ns, _ := netnstest.New(t)
	ir := Start(t, Options{Namespace: ns, Release: r})
	if _, err := ir.Enroll(NodeSpec{Name: "nobody", Driver: "redfish", DriverInfo: map[string]any{
		"redfish_address": "https://127.0.0.1:9", "redfish_username": "u", "redfish_password": "p", "redfish_verify_ca": "false",
	}}); err != nil {
		t.Fatal(err)
	}
	if err := ir.Provision("nobody", "manage", nil); err != nil {
		t.Fatal(err)
	}
	_, err := ir.Wait("manage", "nobody", "manageable", 3*time.Minute)
	var se *StepError
	if !errors.As(err, &se) {
		t.Fatalf("manage of a node whose BMC does not answer: %v, want a StepError", err)
	}
	msg := err.Error()
	for _, want := range []string{"manage:", `provision state "enroll"`, "last_error:", "127.0.0.1:9"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the step's error does not say %q:\n%s", want, msg)
		}
	}
	if _, err := ir.Node("no-such-node"); err == nil {
		t.Errorf("a node that does not exist was found")
	}
}

// TestDnsmasqConfig: the network boot service's configuration. As a
// proxyDHCP server (beside another DHCP server) dnsmasq offers no address,
// hands PXE firmware an iPXE binary by its architecture through the PXE
// menu and iPXE the boot script; as the subnet's own DHCP server it hands
// out the range and the same files by DHCP's file name. A bad PXE is
// refused.
func TestDnsmasqConfig(t *testing.T) {
	const script = "http://10.0.0.254:8080/boot.ipxe"
	proxy := dnsmasqConfig(PXE{Interface: "eth0", Subnet: netip.MustParsePrefix("10.0.0.0/24")}, "/d", "/d/tftpboot", script)
	for _, want := range []string{
		"port=0\n", "interface=eth0\n", "bind-interfaces\n", "enable-tftp\n", "tftp-root=/d/tftpboot\n",
		"dhcp-range=10.0.0.0,proxy,255.255.255.0\n",
		"dhcp-userclass=set:ipxe,iPXE\n", "dhcp-match=set:ipxe,175\n",
		"pxe-service=tag:!ipxe,x86-64_EFI,\"iPXE\",snponly.efi\n",
		"pxe-service=tag:!ipxe,BC_EFI,\"iPXE\",snponly.efi\n",
		"pxe-service=tag:!ipxe,x86PC,\"iPXE\",undionly.kpxe\n",
		"dhcp-boot=tag:ipxe," + script + "\n",
	} {
		if !strings.Contains(proxy, want) {
			t.Errorf("proxyDHCP configuration lacks %q:\n%s", want, proxy)
		}
	}
	if strings.Contains(proxy, "enable-ra") {
		t.Errorf("router advertisements without an RAPrefix:\n%s", proxy)
	}
	ra := dnsmasqConfig(PXE{Interface: "eth0", Subnet: netip.MustParsePrefix("10.0.0.0/24"), RAPrefix: netip.MustParsePrefix("fd00:1:2:3::/64")}, "/d", "/d/tftpboot", script)
	for _, want := range []string{"enable-ra\n", "dhcp-range=fd00:1:2:3::,ra-only,64\n", "ra-param=eth0,60,0\n", "dhcp-range=10.0.0.0,proxy,255.255.255.0\n"} {
		if !strings.Contains(ra, want) {
			t.Errorf("configuration with router advertisements lacks %q:\n%s", want, ra)
		}
	}
	if strings.Contains(proxy, "dhcp-authoritative") {
		t.Errorf("a proxyDHCP server claims the subnet:\n%s", proxy)
	}
	// As the subnet's DHCP server: ironic-image's template, its lines in
	// its order (IRONIC_IP the HTTP server's host).
	full := dnsmasqConfig(PXE{Interface: "prov0", Subnet: netip.MustParsePrefix("172.22.0.0/24"),
		Start: netip.MustParseAddr("172.22.0.10"), End: netip.MustParseAddr("172.22.0.100")}, "/d", "/d/tftpboot", "http://172.22.0.2:6180/boot.ipxe")
	if d := cmp.Diff(`interface=prov0
bind-dynamic
enable-tftp
tftp-root=/d/tftpboot
log-queries
dhcp-leasefile=/d/dnsmasq.leases
user=root
port=0
log-dhcp
dhcp-range=172.22.0.10,172.22.0.100
dhcp-option=6
dhcp-match=ipxe,175
dhcp-option=3
dhcp-match=set:efi,option:client-arch,7
dhcp-match=set:efi,option:client-arch,9
dhcp-boot=tag:efi,/snponly-x86_64.efi,172.22.0.2
dhcp-match=set:efi-arm64,option:client-arch,11
dhcp-boot=tag:efi-arm64,/snponly-arm64.efi,172.22.0.2
dhcp-boot=tag:!efi,tag:!efi-arm64,/undionly.kpxe,172.22.0.2
dhcp-boot=tag:ipxe,http://172.22.0.2:6180/boot.ipxe
`, full); d != "" {
		t.Errorf("ironic-image's configuration, IPv4 (-want +got):\n%s", d)
	}
	// TFTP only (an Unmanaged network: the site's DHCP server).
	if tftp := dnsmasqConfig(PXE{Interface: "prov0", Subnet: netip.MustParsePrefix("172.22.0.0/24"), TFTPOnly: true}, "/d", "/d/tftpboot", "http://172.22.0.2:6180/boot.ipxe"); strings.Contains(tftp, "dhcp-range") || !strings.Contains(tftp, "enable-tftp\n") {
		t.Errorf("TFTP only:\n%s", tftp)
	}
	// IPv6: today's section, and #916's.
	v6 := PXE{Interface: "prov0", Subnet: netip.MustParsePrefix("fd00:1101::/64"), Start: netip.MustParseAddr("fd00:1101::a"), End: netip.MustParseAddr("fd00:1101::ff")}
	cur := dnsmasqConfig(v6, "/d", "/d/tftpboot", "http://[fd00:1101::2]:6180/boot.ipxe")
	for _, want := range []string{"dhcp-range=fd00:1101::a,fd00:1101::ff,64\n", "enable-ra\nra-param=prov0,0,0\n",
		"dhcp-match=set:amd64,option6:61,7\n", "dhcp-option=tag:pxe6,tag:amd64,option6:bootfile-url,tftp://[fd00:1101::2]/snponly-x86_64.efi\n",
		"dhcp-option=tag:pxe6,tag:!amd64,tag:!arm64,option6:bootfile-url,tftp://[fd00:1101::2]/snponly-x86_64.efi\n",
		"dhcp-option=tag:ipxe6,option6:bootfile-url,http://[fd00:1101::2]:6180/boot.ipxe\n"} {
		if !strings.Contains(cur, want) {
			t.Errorf("ironic-image's DHCPv6 section lacks %q:\n%s", want, cur)
		}
	}
	v6.DHCPv6 = Metal3DHCPv6Issue916
	old := dnsmasqConfig(v6, "/d", "/d/tftpboot", "http://[fd00:1101::2]:6180/boot.ipxe")
	for _, want := range []string{"dhcp-match=set:amd64,option:client-arch,7\n", "dhcp-option=tag:!pxe6,option6:bootfile-url,tftp://[fd00:1101::2]/undionly.kpxe\n"} {
		if !strings.Contains(old, want) {
			t.Errorf("#916's DHCPv6 section lacks %q:\n%s", want, old)
		}
	}
	for _, bad := range []PXE{
		{Subnet: netip.MustParsePrefix("10.0.0.0/24")},
		{Interface: "eth0"},
		{Interface: "eth0", Subnet: netip.MustParsePrefix("fd00::/64")},
		{Interface: "eth0", Subnet: netip.MustParsePrefix("10.0.0.0/24"), TFTPOnly: true, Start: netip.MustParseAddr("10.0.0.10"), End: netip.MustParseAddr("10.0.0.20")},
		{Interface: "eth0", Subnet: netip.MustParsePrefix("10.0.0.0/24"), Start: netip.MustParseAddr("10.0.0.10")},
		{Interface: "eth0", Subnet: netip.MustParsePrefix("10.0.0.0/24"), Start: netip.MustParseAddr("10.0.0.10"), End: netip.MustParseAddr("10.0.1.10")},
		{Interface: "eth0", Subnet: netip.MustParsePrefix("10.0.0.0/24"), Start: netip.MustParseAddr("10.0.0.10"), End: netip.MustParseAddr("10.0.0.9")},
		{Interface: "eth0", Subnet: netip.MustParsePrefix("10.0.0.0/24"), RAPrefix: netip.MustParsePrefix("fd00::/48")},
		{Interface: "eth0", Subnet: netip.MustParsePrefix("10.0.0.0/24"), RAPrefix: netip.MustParsePrefix("10.1.0.0/16")},
	} {
		if err := bad.validate(); err == nil {
			t.Errorf("PXE %+v accepted", bad)
		}
	}
	if err := (PXE{Interface: "eth0", Subnet: netip.MustParsePrefix("10.0.0.0/24")}).validate(); err != nil {
		t.Errorf("a proxyDHCP PXE refused: %v", err)
	}
}

// TestIronic29PatchMakesNodeItsOwnParent: why the tests give instance_info
// at enrollment (Patch's note). Ironic 29.0.5 makes a node its own
// parent_node on a PATCH that does not touch parent_node; a node enrolled
// with its instance_info has none. Should Debian's Ironic 29 lose the bug,
// this fails, and the enrollment-time instance_info may go.
func TestIronic29PatchMakesNodeItsOwnParent(t *testing.T) {
	testenv.Integration(t)
	ir := Start(t, Options{Release: Ironic29})
	spec := NodeSpec{Name: "n", Driver: "redfish", InstanceInfo: map[string]any{"image_source": "http://127.0.0.1:9/i.img"},
		DriverInfo: map[string]any{"redfish_address": "https://127.0.0.1:9", "redfish_username": "u", "redfish_password": "p"}}
	n, err := ir.Enroll(spec)
	if err != nil {
		t.Fatal(err)
	}
	parent := func() string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, ir.URL+"/v1/nodes/"+n.UUID+"?fields=parent_node", nil)
		req.Header.Set("X-OpenStack-Ironic-API-Version", "1.83")
		resp, err := ir.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v struct {
			Parent *string `json:"parent_node"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET the node's parent_node: %s %v", resp.Status, err)
		}
		return str(v.Parent)
	}
	if p := parent(); p != "" {
		t.Fatalf("enrolled with its instance_info, the node has parent_node %q, want none", p)
	}
	if err := ir.Patch("n", map[string]any{"op": "add", "path": "/description", "value": "patched"}); err != nil {
		t.Fatal(err)
	}
	if p := parent(); p != n.UUID {
		t.Errorf("after a PATCH of its description the node's parent_node is %q; Ironic 29.0.5 makes it the node itself (%s): has the bug gone?", p, n.UUID)
	}
}

// TestLogTimes: the times of the log lines that name a node's heartbeat,
// from Ironic's own line format, and no others.
func TestLogTimes(t *testing.T) {
	log := `2026-11-28 19:53:18.509 10639 DEBUG ironic.conductor.manager [None req-39e - - - - - -] RPC continue_inspection called for the node 451a
2026-11-28 19:53:19.186 10639 DEBUG ironic.conductor.manager [None req-884 - - - - - -] RPC heartbeat called for node 451a heartbeat /usr/lib/python3/dist-packages/ironic/conductor/manager.py:3252
2026-11-28 19:53:20.001 10639 DEBUG ironic.conductor.manager [None req-885 - - - - - -] RPC heartbeat called for node 9999 heartbeat
garbage RPC heartbeat called for node 451a
2026-11-28 19:54:04.066 10639 DEBUG ironic.conductor.manager [None req-886 - - - - - -] RPC heartbeat called for node 451a heartbeat`
	got := logTimes(log, "RPC heartbeat called for node 451a")
	want := []time.Time{
		time.Date(2026, 11, 28, 19, 53, 19, 186e6, time.Local),
		time.Date(2026, 11, 28, 19, 54, 4, 66e6, time.Local),
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("logTimes (-want +got):\n%s", d)
	}
}

// TestBootUptimes: each boot's init line gives the kernel's uptime, in
// order; other lines are not taken.
func TestBootUptimes(t *testing.T) {
	log := "[    0.000000] Linux version 6.12\r\n" + AgentBootLine + "21.61 s after the kernel started\r\n" +
		"bmlab-ipa: devices settled at 30.2 s\r\n" + AgentBootLine + "9.5 s after the kernel started\r\n"
	if d := cmp.Diff([]time.Duration{21610 * time.Millisecond, 9500 * time.Millisecond}, bootUptimes(log)); d != "" {
		t.Errorf("bootUptimes (-want +got):\n%s", d)
	}
}
