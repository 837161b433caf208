package ironictest

import (
	"fmt"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
)

// Versions of the IPv6 section of ironic-image's dnsmasq.conf.j2 (PXE's
// DHCPv6), each named by the commit it came with:
const (
	// Metal3DHCPv6Current matches the client's architecture with
	// option6:61 (48251306, 2026-02-19, "Play it safe with option6:61"):
	// RFC 5970's option 61 by number, which every dnsmasq knows.
	Metal3DHCPv6Current = ""
	// Metal3DHCPv6Issue916 is the section metal3-io/ironic-image#916
	// reported (803573db and 641bbad6, 2025-11 and 12): it matches with
	// option:client-arch, DHCPv4's option 93, which dnsmasq keeps in its
	// DHCPv4 match list and never tries on a DHCPv6 request, so no PXE
	// client gets a boot file.
	Metal3DHCPv6Issue916 = "641bbad6"
	// Metal3DHCPv6Fix917 is #917's first fix (5810188d, 2026-02-16):
	// option6:client-arch, a name only Red Hat's patched dnsmasq knows;
	// upstream's (Debian's 2.90) refuses the configuration ("bad
	// dhcp-option") and does not start.
	Metal3DHCPv6Fix917 = "5810188d"
)

// metal3DnsmasqConfig is dnsmasq's configuration as Metal3's ironic-image
// renders it (metal3-io/ironic-image ironic-config/dnsmasq.conf.j2, read at
// db962c9 of 2026-08-21), the one the IPI bootstrap VM and the cluster's
// metal3 pod run on the provisioning network: its lines in its order, for
// PROVISIONING_INTERFACE=p.Interface, IRONIC_IP the host of httpURL (the
// Ironic HTTP server, IRONIC_HTTP_URL), DNS_PORT=0, no DNS_IP, GATEWAY_IP
// or DHCP_OPTIONS, SNP_BASENAME=snponly, IPXE_TLS_SETUP off, and
// DHCP_RANGE p.Start,p.End (IPv6: with the subnet's prefix length) or
// empty (TFTPOnly). IPV follows the subnet's family.
//
// The lines that are not the template's are marked: the harness's files
// (the TFTP root, the lease file in the test's directory, dnsmasq run as
// root, since that directory is root's), and with RAPrefix on an IPv4
// subnet the router advertisements that end iPXE's IPv6 wait. The IPv6
// section is the template's as of p.DHCPv6 (Metal3DHCPv6*): today's, or
// an earlier one, to show what it did.
func metal3DnsmasqConfig(p PXE, dir, tftpRoot, httpURL string) string {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	ironicIP := ""
	if u, err := url.Parse(httpURL); err == nil {
		ironicIP = u.Hostname()
	}
	urlHost := ironicIP
	if a, err := netip.ParseAddr(ironicIP); err == nil && a.Is6() {
		urlHost = "[" + ironicIP + "]"
	}
	v6 := p.Subnet.Addr().Is6()
	line("interface=%s", p.Interface)
	line("bind-dynamic")
	line("enable-tftp")
	line("tftp-root=%s", tftpRoot) // harness: the template's /shared/tftpboot
	line("log-queries")
	line("dhcp-leasefile=%s", filepath.Join(dir, "dnsmasq.leases")) // harness: DNSMASQ_DATA_DIR
	line("user=root")                                               // harness: not the template's
	line("port=0")                                                  // DNS_PORT=0
	if p.Start.IsValid() {
		line("log-dhcp")
		if v6 {
			line("dhcp-range=%s,%s,%d", p.Start, p.End, p.Subnet.Bits())
		} else {
			line("dhcp-range=%s,%s", p.Start, p.End)
		}
	}
	line("dhcp-option=6") // no DNS_IP: no DNS server over the provisioning network
	if !v6 {
		line("dhcp-match=ipxe,175")
		line("dhcp-option=3") // no GATEWAY_IP: no default router
		line("dhcp-match=set:efi,option:client-arch,7")
		line("dhcp-match=set:efi,option:client-arch,9")
		line("dhcp-boot=tag:efi,/%s,%s", metal3IPXE, ironicIP)
		line("dhcp-match=set:efi-arm64,option:client-arch,11")
		line("dhcp-boot=tag:efi-arm64,/snponly-arm64.efi,%s", ironicIP)
		line("dhcp-boot=tag:!efi,tag:!efi-arm64,/%s,%s", biosIPXE, ironicIP)
		line("dhcp-boot=tag:ipxe,%s/boot.ipxe", httpURL)
		if p.RAPrefix.IsValid() { // harness: not the template's
			line("enable-ra")
			line("dhcp-range=%s,ra-only,64", p.RAPrefix.Masked().Addr())
			line("ra-param=%s,60,0", p.Interface)
		}
		return b.String()
	}
	arch := map[string]string{Metal3DHCPv6Current: "option6:61", Metal3DHCPv6Issue916: "option:client-arch", Metal3DHCPv6Fix917: "option6:client-arch"}[p.DHCPv6]
	tftpURL := "tftp://" + urlHost // IRONIC_TFTP_URL
	line("enable-ra")
	line("ra-param=%s,0,0", p.Interface)
	line("dhcp-vendorclass=set:pxe6,enterprise:343,PXEClient")
	line("dhcp-userclass=set:ipxe6,iPXE")
	line("dhcp-match=set:amd64,%s,7", arch)
	line("dhcp-match=set:amd64,%s,9", arch)
	line("dhcp-option=tag:pxe6,tag:amd64,option6:bootfile-url,%s/%s", tftpURL, metal3IPXE)
	line("dhcp-match=set:arm64,%s,11", arch)
	line("dhcp-option=tag:pxe6,tag:arm64,option6:bootfile-url,%s/snponly-arm64.efi", tftpURL)
	if p.DHCPv6 != Metal3DHCPv6Issue916 {
		// Since 5810188d (#917): an x86_64 binary for a PXE client whose
		// architecture was not told. Before it (#916's configuration),
		// a BIOS fallback for !pxe6 only.
		line("dhcp-option=tag:pxe6,tag:!amd64,tag:!arm64,option6:bootfile-url,%s/%s", tftpURL, metal3IPXE)
	} else {
		line("dhcp-option=tag:!pxe6,option6:bootfile-url,%s/%s", tftpURL, biosIPXE)
	}
	line("dhcp-option=tag:ipxe6,option6:bootfile-url,%s/boot.ipxe", httpURL)
	return b.String()
}
