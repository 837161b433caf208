package ironictest

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/netplumb/netnstest"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virttest"
)

// TestMetal3DHCPv6Boot boots an IPv6-only UEFI node over the network with
// the DHCPv6 section of Metal3's ironic-image (metal3DnsmasqConfig), and
// shows why metal3-io/ironic-image#916's section did not. Inside a bridge
// and a namespace of the test's own, in the libvirtd's namespace (labci): a
// qemu VM (OVMF with its IPv4 PXE turned off through fw_cfg,
// opt/org.tianocore/IPv4PXESupport=n, so it network-boots over IPv6 only)
// with one NIC on the bridge, without qemu's iPXE option ROM, so OVMF's own
// PXE client boots it as a server's NIC firmware does (an iPXE ROM asks as
// iPXE, which every version of the section answers); Debian's dnsmasq
// with the section's lines on the provisioning side (DHCPv6 of a range,
// router advertisements, TFTP of Debian's snponly.efi as
// snponly-x86_64.efi) and an HTTP server serving boot.ipxe (the deploy
// kernel: testenv.MarkerEFI, which prints its marker and powers off) at
// [fd00:1101::2].
//   - Today's section (option6:61): OVMF's PXEv6 client (vendor class
//     PXEClient, architecture 7 in option 61) is tagged amd64 and gets
//     tftp://[fd00:1101::2]/snponly-x86_64.efi, which it fetches by TFTP;
//     iPXE then asks again, as iPXE, and gets the boot script over HTTP; the
//     serial console shows the deploy kernel's marker.
//   - #916's section (option:client-arch, DHCPv4's option 93): dnsmasq puts
//     the match in its DHCPv4 list, which a DHCPv6 request never meets, so
//     the same client is not tagged amd64, its reply has no boot file (option
//     59), nothing is fetched by TFTP and the marker never shows: OVMF's
//     PXEv6 gives up.
//   - #917's first fix (option6:client-arch): Debian's dnsmasq 2.90 does not
//     know the name (Red Hat's carries a patch that adds it) and refuses the
//     configuration, which is why ironic-image went on to option6:61.
func TestMetal3DHCPv6Boot(t *testing.T) {
	dnsmasq := testenv.Command(t, "dnsmasq")
	// #917's first fix, to the letter: refused before anything runs.
	conf := filepath.Join(t.TempDir(), "917.conf")
	v6 := PXE{Interface: "eth0", Subnet: netip.MustParsePrefix("fd00:1101::/64"), Start: netip.MustParseAddr("fd00:1101::10"), End: netip.MustParseAddr("fd00:1101::ff"),
		DHCPv6: Metal3DHCPv6Fix917}
	if err := os.WriteFile(conf, []byte(metal3DnsmasqConfig(v6, t.TempDir(), "/srv/tftp", "http://[fd00:1101::2]:6180")), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(dnsmasq, "--test", "-C", conf).CombinedOutput(); err == nil || !strings.Contains(string(out), "bad dhcp-option") {
		t.Errorf("dnsmasq --test of #917's first fix: %v %s; want it refused (bad dhcp-option: Debian's dnsmasq knows no option6:client-arch)", err, out)
	}

	lab := virttest.New(t, "bmlab-v6pxe-")
	for _, tc := range []struct {
		name, version string
		boots         bool
	}{
		{"current", Metal3DHCPv6Current, true},
		{"issue-916", Metal3DHCPv6Issue916, false},
	} {
		t.Run(tc.name, func(t *testing.T) { dhcpv6Boot(t, lab, tc.name, tc.version, tc.boots) })
	}
}

func dhcpv6Boot(t *testing.T, lab *virttest.Lab, name, version string, boots bool) {
	const host = "fd00:1101::2"
	br := "v6p" + netnstest.Rand(4)
	netnstest.IP(t, "-n", "labci", "link", "add", br, "type", "bridge", "mcast_snooping", "0")
	t.Cleanup(func() { _ = exec.Command("ip", "-n", "labci", "link", "del", br).Run() })
	netnstest.IP(t, "-n", "labci", "link", "set", br, "up")
	ns, _ := netnstest.New(t)
	port := "v6q" + netnstest.Rand(4)
	netnstest.IP(t, "-n", "labci", "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
	netnstest.IP(t, "-n", "labci", "link", "set", port, "master", br, "up")
	netnstest.IP(t, "-n", ns, "addr", "add", host+"/64", "dev", "eth0", "nodad")
	netnstest.IP(t, "-n", ns, "link", "set", "eth0", "up")

	// The provisioning services' HTTP server: the boot script and the
	// deploy kernel it boots.
	var ln net.Listener
	if err := netplumb.InNamespace(ns, func() (err error) {
		ln, err = net.Listen("tcp", net.JoinHostPort(host, "6180"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	httpURL := "http://[" + host + "]:6180"
	kernel := testenv.MarkerEFI(t)
	fetched := make(chan string, 16)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched <- r.URL.Path
		switch r.URL.Path {
		case "/boot.ipxe":
			w.Write([]byte("#!ipxe\nkernel " + httpURL + "/deploy_kernel\nboot\n"))
		case "/deploy_kernel":
			http.ServeFile(w, r, kernel)
		default:
			http.NotFound(w, r)
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	dir := t.TempDir()
	log := startPXE(t, ns, PXE{Interface: "eth0", Subnet: netip.MustParsePrefix("fd00:1101::/64"),
		Start: netip.MustParseAddr("fd00:1101::10"), End: netip.MustParseAddr("fd00:1101::ff"), DHCPv6: version}, dir, httpURL)

	vm := lab.NewVM(t, "v6-"+name, virttest.VMOptions{UEFI: true, NoCD: true, MemoryMiB: 384, BootOrder: []string{"network"},
		Bridges: []string{br}, NoNICROM: true, FWCfg: map[string]string{"opt/org.tianocore/IPv4PXESupport": "n"}})
	began := time.Now()
	if err := lab.Service.Reset(context.Background(), vm.ID, machine.ResetOn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lab.Service.Reset(context.Background(), vm.ID, machine.ResetForceOff) })
	// dnsmasq's log, a DHCPv6 exchange at a time: the tags it gave the
	// client and the boot file it sent.
	type exchange struct{ tags, bootfile string }
	exchanges := func() []exchange {
		var out []exchange
		for _, l := range strings.Split(readLog(log), "\n") {
			if m := tagsLine.FindStringSubmatch(l); m != nil {
				out = append(out, exchange{tags: m[1]})
			} else if m := bootfileLine.FindStringSubmatch(l); m != nil && len(out) > 0 {
				out[len(out)-1].bootfile = m[1]
			}
		}
		return out
	}
	// The firmware's PXE client: tagged pxe6, not ipxe6.
	firmware := func(e exchange) bool { return hasTag(e.tags, "pxe6") && !hasTag(e.tags, "ipxe6") }
	tftpFile := "tftp://[" + host + "]/snponly-x86_64.efi"
	if boots {
		vm.WaitMarker(t, testenv.EFIMarker, 0, 4*time.Minute)
		t.Logf("the node booted the deploy kernel over IPv6 in %s", time.Since(began).Round(time.Second))
		var sawFirmware, sawIPXE bool
		for _, e := range exchanges() {
			switch {
			case firmware(e):
				sawFirmware = true
				if !hasTag(e.tags, "amd64") || e.bootfile != tftpFile {
					t.Errorf("the firmware's request: tags %q, boot file %q; want amd64 and %s", e.tags, e.bootfile, tftpFile)
				}
			case hasTag(e.tags, "ipxe6"):
				sawIPXE = true
				if e.bootfile != httpURL+"/boot.ipxe" {
					t.Errorf("iPXE's request: tags %q, boot file %q; want %s/boot.ipxe", e.tags, e.bootfile, httpURL)
				}
			}
		}
		if b := readLog(log); !sawFirmware || !sawIPXE || !tftpSent.MatchString(b) || !strings.Contains(b, "/snponly-x86_64.efi to fd00:1101::") {
			t.Errorf("want the firmware's DHCPv6 request (%v), its TFTP transfer of snponly-x86_64.efi, then iPXE's (%v):\n%s", sawFirmware, sawIPXE, tailText(b, 80))
		}
		return
	}
	// #916: the firmware asks and is answered without a boot file. Wait
	// until it has asked, then until its console says PXE gave up (or the
	// wait is over), and look: no amd64 tag, no boot file, no TFTP, no
	// marker.
	var ex []exchange
	if !testenv.WaitFor(4*time.Minute, func() bool { ex = exchanges(); return slices.ContainsFunc(ex, firmware) }) {
		t.Fatalf("the node's firmware sent no DHCPv6 request:\n%s", tailText(readLog(log), 40))
	}
	testenv.WaitFor(90*time.Second, func() bool { return strings.Contains(readLog(vm.SerialLog), "PXE-E") })
	for _, e := range exchanges() {
		if firmware(e) && (hasTag(e.tags, "amd64") || e.bootfile != "") {
			t.Errorf("#916's configuration: the firmware's request got tags %q and boot file %q; want no amd64 tag (the match is DHCPv4's) and no boot file", e.tags, e.bootfile)
		}
	}
	if b := readLog(log); tftpSent.MatchString(b) {
		t.Errorf("#916's configuration: a TFTP transfer:\n%s", tailText(b, 40))
	}
	if strings.Contains(readLog(vm.SerialLog), testenv.EFIMarker) {
		t.Error("the node booted the deploy kernel with #916's configuration")
	}
	select {
	case p := <-fetched:
		t.Errorf("the HTTP server was asked for %s with #916's configuration", p)
	default:
	}
	t.Logf("with #916's configuration, dnsmasq tagged the firmware's request %q and sent no boot file; OVMF's console ends:\n%s", ex[slices.IndexFunc(ex, firmware)].tags, tailText(readLog(vm.SerialLog), 8))
}

var (
	tftpSent     = regexp.MustCompile(`dnsmasq-tftp\[\d+\]: sent `)
	tagsLine     = regexp.MustCompile(`\d+ tags: (.*)$`)
	bootfileLine = regexp.MustCompile(`option: 59 bootfile-url\s+(\S+)`)
)

// hasTag says whether dnsmasq's "tags:" list has tag.
func hasTag(tags, tag string) bool {
	return slices.Contains(strings.Split(tags, ", "), tag)
}

func readLog(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func tailText(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
