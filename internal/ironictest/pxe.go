package ironictest

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/testenv"
)

// PXE is the network boot service of Ironic's ipxe boot interface, as the
// IPI bootstrap VM and Metal3's ironic image run it: Debian's dnsmasq
// answers the nodes' DHCP, hands PXE firmware that is not iPXE yet an iPXE
// binary by TFTP (Debian's ipxe package: snponly.efi for UEFI, undionly.kpxe
// for BIOS) and iPXE the boot script Ironic writes into its http_root
// (http://HOST:PORT/boot.ipxe), which chains to the node's iPXE
// configuration, whose kernel and initrd are the node's deploy_kernel and
// deploy_ramdisk. Ironic's own DHCP provider stays none: dnsmasq's
// configuration is static, the same for every node.
//
// As the subnet's DHCP server (Start and End), or with TFTPOnly, dnsmasq's
// configuration is the one Metal3's ironic-image writes
// (metal3DnsmasqConfig), the image the bootstrap VM runs on the
// provisioning network; as a proxyDHCP server beside another DHCP server,
// it is this harness's own.
//
// The nodes reach Ironic's HTTP server at Options.Host, so Host must be an
// address on (or routed from) the nodes' network.
type PXE struct {
	// Interface is the link, in Options.Namespace, that the nodes' DHCP
	// broadcasts reach.
	Interface string
	// Subnet is the nodes' subnet on that link.
	Subnet netip.Prefix
	// Start and End, when set, make dnsmasq the subnet's DHCP server,
	// handing out these addresses (a provisioning network of its own,
	// where no other DHCP server runs). Unset, dnsmasq is a proxyDHCP
	// server: the network's own DHCP server hands out the addresses (a
	// lab's machine network, where libvirt's dnsmasq does) and dnsmasq
	// adds only the boot information.
	Start, End netip.Addr
	// TFTPOnly runs ironic-image's configuration without a DHCP range
	// (DHCP_RANGE empty, as on an Unmanaged provisioning network, whose
	// DHCP server is the site's): dnsmasq serves TFTP only.
	TFTPOnly bool
	// DHCPv6 is, on an IPv6 subnet, the version of ironic-image's DHCPv6
	// section (Metal3DHCPv6Current, or an earlier one: Metal3DHCPv6*).
	DHCPv6 string
	// RAPrefix, when set (an IPv6 /64 the interface holds an address
	// in), makes dnsmasq answer router solicitations on the link with
	// router advertisements for it (ra-only: SLAAC, no default route), as
	// a dual-stack network's router does. iPXE configures IPv6 beside
	// DHCP and waits for a router advertisement before it boots: without
	// one it gives up only after about 16 s of solicitations.
	RAPrefix netip.Prefix
}

func (p PXE) validate() error {
	if p.Interface == "" || !p.Subnet.IsValid() {
		return fmt.Errorf("PXE needs an interface and a subnet (got %q, %s)", p.Interface, p.Subnet)
	}
	if p.Subnet.Addr().Is6() && !p.Start.IsValid() && !p.TFTPOnly {
		return fmt.Errorf("PXE: %s is IPv6; a proxyDHCP server here is IPv4 only: give Start and End (ironic-image's DHCPv6 server) or TFTPOnly", p.Subnet)
	}
	if p.Start.IsValid() != p.End.IsValid() {
		return fmt.Errorf("PXE: give both Start and End, or neither (proxyDHCP)")
	}
	if p.TFTPOnly && p.Start.IsValid() {
		return fmt.Errorf("PXE: TFTPOnly runs no DHCP; drop Start and End")
	}
	if p.RAPrefix.IsValid() && (!p.RAPrefix.Addr().Is6() || p.RAPrefix.Addr().Is4In6() || p.RAPrefix.Bits() != 64) {
		return fmt.Errorf("PXE: RAPrefix %s is not an IPv6 /64 (SLAAC's)", p.RAPrefix)
	}
	if p.Start.IsValid() && (!p.Subnet.Contains(p.Start) || !p.Subnet.Contains(p.End) || p.End.Less(p.Start)) {
		return fmt.Errorf("PXE: range %s-%s is not within %s", p.Start, p.End, p.Subnet)
	}
	return nil
}

// The iPXE binaries, by the PXE client architecture (option 93) dnsmasq
// hands them to: 0 BIOS, 7 and 9 x86_64 UEFI; metal3IPXE is the UEFI one
// as ironic-image names it in its TFTP root (SNP_BASENAME-x86_64.efi).
const (
	biosIPXE   = "undionly.kpxe"
	uefiIPXE   = "snponly.efi"
	metal3IPXE = "snponly-x86_64.efi"
)

// dnsmasqConfig is dnsmasq's configuration for p: ironic-image's as a
// DHCP server or TFTP only; as a proxyDHCP server, the harness's: no DNS,
// proxyDHCP on p.Interface only, TFTP from tftpRoot, and for clients
// already running iPXE (user class iPXE, or iPXE's option 175) the boot
// script at bootScript.
func dnsmasqConfig(p PXE, dir, tftpRoot, bootScript string) string {
	if p.Start.IsValid() || p.TFTPOnly {
		return metal3DnsmasqConfig(p, dir, tftpRoot, strings.TrimSuffix(bootScript, "/boot.ipxe"))
	}
	netmask := netip.AddrFrom4([4]byte(net.CIDRMask(p.Subnet.Bits(), 32)))
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	line("# written by internal/ironictest for Ironic's ipxe boot interface")
	line("port=0")
	line("interface=%s", p.Interface)
	line("bind-interfaces")
	line("user=root")
	line("log-dhcp")
	line("dhcp-leasefile=%s", filepath.Join(dir, "dnsmasq.leases"))
	line("enable-tftp")
	line("tftp-root=%s", tftpRoot)
	line("dhcp-userclass=set:ipxe,iPXE")
	line("dhcp-match=set:ipxe,175")
	if p.RAPrefix.IsValid() {
		line("enable-ra")
		line("dhcp-range=%s,ra-only,64", p.RAPrefix.Masked().Addr())
		line("ra-param=%s,60,0", p.Interface) // not a default router
	}
	// proxyDHCP: PXE firmware learns its boot file from the PXE menu's
	// one entry (no prompt), iPXE from the file name.
	line("dhcp-range=%s,proxy,%s", p.Subnet.Masked().Addr(), netmask)
	line("pxe-prompt=\"bmlab\",0")
	line("pxe-service=tag:!ipxe,x86PC,\"iPXE\",%s", biosIPXE)
	line("pxe-service=tag:!ipxe,x86-64_EFI,\"iPXE\",%s", uefiIPXE)
	line("pxe-service=tag:!ipxe,BC_EFI,\"iPXE\",%s", uefiIPXE)
	line("dhcp-boot=tag:ipxe,%s", bootScript)
	return b.String()
}

// startPXE runs dnsmasq for p in ns until the test ends, its TFTP root
// holding Debian's iPXE binaries, and waits until it serves.
func startPXE(t testing.TB, ns string, p PXE, dir, httpURL string) (log string) {
	t.Helper()
	if err := p.validate(); err != nil {
		t.Fatalf("ironictest: %v", err)
	}
	dnsmasq := testenv.Command(t, "dnsmasq")
	tftp := filepath.Join(dir, "tftpboot")
	if err := os.MkdirAll(tftp, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]string{biosIPXE: biosIPXE, uefiIPXE: uefiIPXE, metal3IPXE: uefiIPXE} {
		src := filepath.Join("/usr/lib/ipxe", f)
		testenv.Require(t, fileExists(src), src+" (Debian's ipxe package, hack/install-deps.sh)")
		if err := os.Symlink(src, filepath.Join(tftp, name)); err != nil {
			t.Fatal(err)
		}
	}
	conf := filepath.Join(dir, "dnsmasq.conf")
	log = filepath.Join(dir, "dnsmasq.log")
	if err := os.WriteFile(conf, []byte(dnsmasqConfig(p, dir, tftp, httpURL+"/boot.ipxe")), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{dnsmasq, "--keep-in-foreground", "--conf-file=" + conf, "--pid-file=" + filepath.Join(dir, "dnsmasq.pid"), "--log-facility=" + log}
	if ns != "" {
		args = append([]string{testenv.Command(t, "ip"), "netns", "exec", ns}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("ironictest: start dnsmasq: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("ironictest: the last lines of dnsmasq's log (%s):\n%s", log, tail(log, 40))
			http := filepath.Join(dir, "http.log")
			t.Logf("ironictest: the last requests to Ironic's HTTP server (%s):\n%s", http, tail(http, 20))
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})
	// dnsmasq logs its TFTP root once its sockets are bound.
	if !testenv.WaitFor(20*time.Second, func() bool {
		select {
		case <-exited:
			t.Fatalf("ironictest: dnsmasq exited at start: %s\n%s", out, tail(log, 20))
		default:
		}
		b, _ := os.ReadFile(log)
		return strings.Contains(string(b), "TFTP root is")
	}) {
		t.Fatalf("ironictest: dnsmasq did not start within 20 s: %s\n%s", out, tail(log, 20))
	}
	return log
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// tail is the last n lines of the file at path.
func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
