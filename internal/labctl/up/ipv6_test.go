package up_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"libvirt.org/go/libvirtxml"
	"sigs.k8s.io/yaml"

	"github.com/bmlab/bmlab/internal/agent"
	"github.com/bmlab/bmlab/internal/installertest"
	"github.com/bmlab/bmlab/internal/ipi"
	"github.com/bmlab/bmlab/internal/lab/agentmode"
	"github.com/bmlab/bmlab/internal/lab/ipimode"
	"github.com/bmlab/bmlab/internal/labvirt"
	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/testenv"
)

// TestUpIPv6AndDualStack brings up, on the real libvirtd (in labci), an
// IPv6-only IPI lab and a dual-stack agent lab with static addresses, each
// up to its installer's files (network, storage, nodes, BMCs, install-config
// and agent-config), one after the other (both use the baremetal bridge):
//   - the lab's NAT network holds each node's DHCPv6 reservation (by DUID-LL
//     and name) and, for dual stack, its DHCPv4 one, and dnsmasq answers
//     AAAA (and A) for the nodes, api, api-int and *.apps, asked over IPv6
//     from inside labci;
//   - every BMC answers Redfish at its bracketed IPv6 address in
//     install-config, from inside labci, with a certificate the lab's CA
//     issued for that address; with IPMI BMCs (a third lab, IPv6-only with a
//     Managed provisioning network), ipmitool's lanplus session reaches each
//     one at its ipmi://[ADDR]:PORT from inside labci;
//   - install-config and agent-config are the installer's dual-stack or
//     IPv6 shape (and pass its rules: up validates them);
//   - net check finds no drift, a second up changes nothing, down leaves
//     nothing.
func TestUpIPv6AndDualStack(t *testing.T) {
	testenv.Libvirt(t)
	// v6only is an IPv6-only cluster's network in the /120 of prefix.
	v6only := func(prefix string) string {
		return strings.ReplaceAll(`  ipFamily: v6
  machineNetwork: PREFIX::/120
  dhcpRange: {start: "PREFIX::20", end: "PREFIX::60"}
  apiVIP: "PREFIX::5"
  ingressVIP: "PREFIX::4"
`, "PREFIX", prefix)
	}
	for _, tc := range []struct {
		name, mode, lab string
		port            int
		ipmi            bool
	}{
		{"v6", ipimode.Name, v6only("fd2e:6f44:5dd8:c961"), 18761, false},
		{"dual", agentmode.Name, `  ipFamily: dual
  machineNetwork: 10.198.62.0/24
  dhcpRange: {start: 10.198.62.20, end: 10.198.62.60}
  apiVIP: 10.198.62.5
  ingressVIP: 10.198.62.4
  machineNetworkV6: fd2e:6f44:5dd8:c962::/120
  dhcpRangeV6: {start: "fd2e:6f44:5dd8:c962::20", end: "fd2e:6f44:5dd8:c962::60"}
  apiVIPV6: "fd2e:6f44:5dd8:c962::5"
  ingressVIPV6: "fd2e:6f44:5dd8:c962::4"
  agent: {staticIPs: true}
  installer: INSTALLER
`, 18762, false},
		{"v6ipmi", ipimode.Name, v6only("fd2e:6f44:5dd8:c963"), 18763, true},
	} {
		t.Run(tc.name, func(t *testing.T) { upIPv6(t, "l"+tc.name, tc.mode, tc.lab, tc.port, tc.ipmi) })
	}
}

func upIPv6(t *testing.T, name, mode, family string, port int, ipmi bool) {
	dir := testenv.QemuDir(t)
	cfg := labFile(t, dir, name, port)
	lab := readFile(t, cfg)
	start := strings.Index(lab, "  machineNetwork:")
	end := strings.Index(lab, "  bmc:")
	family = strings.ReplaceAll(family, "INSTALLER", installertest.Installer(t))
	lab = lab[:start] + family + "  workers: {count: 0}\n" + lab[end:]
	if ipmi {
		lab = strings.Replace(lab, "cluster:\n", "network: {provisioningNetwork: Managed}\ncluster:\n", 1)
		lab = strings.Replace(lab, "  bmc: {", "  bmc: {kind: ipmi, ipmiPortBase: 16230, ", 1)
	}
	if err := os.WriteFile(cfg, []byte(lab), 0o644); err != nil {
		t.Fatal(err)
	}
	common := []string{"-f", cfg, "--netns", "labci", "--vbmcd", testenv.Binary(t, "vbmcd"), "--mode", mode, "--profile", "tiny"}
	up := append([]string{"up", "--until", "install-config"}, common...)
	began := time.Now()
	out := labUp(t, "install-config", common...)
	t.Logf("up --until install-config took %s", time.Since(began).Round(time.Second))
	for _, want := range []string{"✓ preflight", "✓ network", "✓ storage", "✓ nodes", "✓ bmcs", "✓ install-config"} {
		if !strings.Contains(out, want) {
			t.Errorf("up output lacks %q", want)
		}
	}
	p := resolvePlan(t, cfg, mode)
	dual := !p.Cluster.Secondary.IsZero()
	if len(p.Nodes) != 3 || dual != (name == "ldual") {
		t.Fatalf("plan: %d nodes, secondary family %v", len(p.Nodes), p.Cluster.Secondary)
	}

	// The libvirt network, as it runs: an <ip> per family, IPv4 first, the
	// reservations of each family.
	x, err := virsh(t, "net-dumpxml", p.Network.NAT.Name)
	if err != nil {
		t.Fatalf("net-dumpxml: %v\n%s", err, x)
	}
	var n libvirtxml.Network
	if err := n.Unmarshal(x); err != nil {
		t.Fatal(err)
	}
	if n.Forward == nil || n.Forward.NAT == nil || n.Forward.NAT.IPv6 != "yes" {
		t.Errorf("the NAT network does not NAT IPv6:\n%s", x)
	}
	var v6 *libvirtxml.NetworkIP
	for i, ip := range n.IPs {
		if ip.Family == "ipv6" {
			v6 = &n.IPs[i]
			if i != len(n.IPs)-1 {
				t.Errorf("the IPv6 <ip> is not last:\n%s", x)
			}
		}
	}
	if v6 == nil || len(n.IPs) != map[bool]int{false: 1, true: 2}[dual] {
		t.Fatalf("network has %d <ip>, IPv6 %v:\n%s", len(n.IPs), v6 != nil, x)
	}
	gw6 := v6.Address
	hosts := map[string]string{}
	for _, h := range v6.DHCP.Hosts {
		hosts[h.Name] = h.ID + " " + h.IP
	}
	aaaa, a := map[string]string{}, map[string]string{}
	for _, nd := range p.Nodes {
		ip6 := nd.IP
		if dual {
			ip6 = nd.SecondaryIP
			a[nd.Name+"."+p.Cluster.Domain] = nd.IP.String()
		}
		if got, want := hosts[nd.Name], labvirt.DUID(nd.MAC)+" "+ip6.String(); got != want {
			t.Errorf("%s: IPv6 reservation %q, want %q", nd.Name, got, want)
		}
		aaaa[nd.Name+"."+p.Cluster.Domain] = ip6.String()
	}
	api6, ingress6 := p.Cluster.APIVIP, p.Cluster.IngressVIP
	if dual {
		api6, ingress6 = p.Cluster.Secondary.APIVIP, p.Cluster.Secondary.IngressVIP
		a[p.Cluster.APIIntName] = p.Cluster.APIVIP.String()
		a[p.Cluster.ConsoleHost] = p.Cluster.IngressVIP.String()
		if len(n.IPs[0].DHCP.Hosts) != len(p.Nodes) || n.IPs[0].DHCP.Hosts[0].MAC != p.Nodes[0].MAC {
			t.Errorf("IPv4 reservations: %+v", n.IPs[0].DHCP.Hosts)
		}
	}
	aaaa[p.Cluster.APIName], aaaa[p.Cluster.APIIntName] = api6.String(), api6.String()
	aaaa[p.Cluster.ConsoleHost], aaaa[p.Cluster.OAuthHost] = ingress6.String(), ingress6.String()
	resolveFamilyIn(t, gw6, "ip6", aaaa)
	if dual {
		resolveFamilyIn(t, gw6, "ip4", a)
	}

	// A node's DHCPv6 client that sends the DUID-LL of its MAC is offered
	// its reserved address; another client an address of the range; and
	// the router advertisements give the network a default route.
	solicit, probeNS := dhcp6Probe(t, p.Network.NAT.Bridge)
	node := p.Nodes[1]
	wantIP := node.IP
	if dual {
		wantIP = node.SecondaryIP
	}
	if got, err := solicit(duidLL(node.MAC)); err != nil || got != wantIP {
		t.Errorf("DHCPv6 with %s's DUID-LL: %v, %v; want its reservation %s", node.Name, got, err, wantIP)
	}
	rng := p.Cluster.DHCPRange
	if dual {
		rng = p.Cluster.Secondary.DHCPRange
	}
	if got, err := solicit(duidLL("52:54:00:fe:ed:01")); err != nil || !rng.Contains(got) || got == wantIP {
		t.Errorf("DHCPv6 with an unknown DUID-LL: %v, %v; want an address of %s", got, err, rng)
	}
	var route []byte
	if !testenv.WaitFor(30*time.Second, func() bool {
		route, _ = exec.Command("ip", "-n", probeNS, "-6", "route", "show", "default").Output()
		return strings.Contains(string(route), "via fe80::")
	}) {
		t.Errorf("no IPv6 default route from router advertisements in the probe namespace: %q", route)
	}

	// install-config (and agent-config): the installer's shape.
	ic := installConfig(t, dir)
	nw := ic.Networking
	want := []string{p.Cluster.MachineNetwork.String(), "fd01::/48", "fd02::/112", api6.String()}
	got := []string{nw.MachineNetwork[0].CIDR, nw.ClusterNetwork[0].CIDR, nw.ServiceNetwork[0], ic.Platform.BareMetal.APIVIPs[0]}
	if dual {
		want = []string{"10.198.62.0/24", "fd2e:6f44:5dd8:c962::/120", "10.128.0.0/14", "fd01::/48", "172.30.0.0/16", "fd02::/112",
			"10.198.62.5", api6.String(), "10.198.62.4", ingress6.String()}
		got = []string{nw.MachineNetwork[0].CIDR, nw.MachineNetwork[1].CIDR, nw.ClusterNetwork[0].CIDR, nw.ClusterNetwork[1].CIDR,
			nw.ServiceNetwork[0], nw.ServiceNetwork[1]}
		got = append(append(got, ic.Platform.BareMetal.APIVIPs...), ic.Platform.BareMetal.IngressVIPs...)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("install-config networks and VIPs:\n got %v\nwant %v", got, want)
	}
	if dual {
		var ac agent.Config
		if err := yaml.Unmarshal([]byte(readFile(t, filepath.Join(dir, "install", "agent-config.yaml"))), &ac); err != nil {
			t.Fatal(err)
		}
		nic := ac.Hosts[0].NetworkConfig.Interfaces[0]
		if ac.RendezvousIP != p.Nodes[0].IP.String() || nic.IPv6 == nil || nic.IPv6.Address[0].IP != p.Nodes[0].SecondaryIP.String() ||
			nic.IPv4.Address[0].IP != p.Nodes[0].IP.String() || len(ac.Hosts[0].NetworkConfig.Routes.Config) != 2 {
			t.Errorf("agent-config: rendezvous %s, first host %+v", ac.RendezvousIP, ac.Hosts[0].NetworkConfig)
		}
	}

	// Every BMC answers at its install-config address, from inside labci,
	// over IPv6 when the lab's BMC address is IPv6, with the lab CA's
	// certificate for it.
	hc := labClient("labci", 10*time.Second, &tls.Config{RootCAs: labCA(t, p.Paths.CACert)})
	bmcHost := p.Cluster.HostAddress // the default bmc.address: the first of machineNetwork
	if len(ic.Platform.BareMetal.Hosts) != 3 {
		t.Fatalf("install-config has %d hosts", len(ic.Platform.BareMetal.Hosts))
	}
	for i, h := range ic.Platform.BareMetal.Hosts {
		prefix := fmt.Sprintf("redfish-virtualmedia+https://%s/redfish/v1/Systems/", net.JoinHostPort(bmcHost.String(), fmt.Sprint(port)))
		if ipmi {
			prefix = "ipmi://" + net.JoinHostPort(bmcHost.String(), fmt.Sprint(16230+i))
			if h.BMC.Address != prefix {
				t.Errorf("%s: BMC address %s, want %s", h.Name, h.BMC.Address, prefix)
			}
			out, err := exec.Command("ip", "netns", "exec", "labci", testenv.Command(t, "ipmitool"), "-I", "lanplus",
				"-H", bmcHost.String(), "-p", fmt.Sprint(16230+i), "-U", h.BMC.Username, "-P", h.BMC.Password, "chassis", "power", "status").CombinedOutput()
			if err != nil || !strings.Contains(string(out), "Chassis Power is off") {
				t.Errorf("%s: ipmitool at %s from labci: %v: %s", h.Name, h.BMC.Address, err, out)
			}
			// Redfish too, at the node's System.
			n, _ := p.Node(h.Name)
			prefix, h.BMC.Address = "https://", "redfish-virtualmedia+"+n.BMC.SystemURL
		} else if !strings.HasPrefix(h.BMC.Address, prefix) {
			t.Errorf("%s: BMC address %s, want %s...", h.Name, h.BMC.Address, prefix)
		}
		uuid := h.BMC.Address[strings.LastIndex(h.BMC.Address, "/")+1:]
		code, body := redfishSend(t, hc, http.MethodGet, strings.TrimPrefix(h.BMC.Address, "redfish-virtualmedia+"), h.BMC.Username, h.BMC.Password, "")
		var sys struct{ UUID string }
		_ = json.Unmarshal(body, &sys)
		if code != 200 || !strings.EqualFold(sys.UUID, uuid) {
			t.Errorf("%s: BMC answered %d with UUID %q, want %s", h.Name, code, sys.UUID, uuid)
		}
	}
	if !dual && !strings.Contains(h0(ic), "["+bmcHost.String()+"]") {
		t.Errorf("the IPv6 BMC address is not bracketed: %s", h0(ic))
	}

	// status shows a dual-stack node's two addresses.
	var st struct {
		Nodes []struct{ Name, IP, SecondaryIP string }
	}
	if statusJSON(t, &st, common...); len(st.Nodes) != 3 {
		t.Fatalf("status -o json: %d nodes, want 3", len(st.Nodes))
	}
	if n := st.Nodes[0]; n.IP != p.Nodes[0].IP.String() || dual != (n.SecondaryIP == p.Nodes[0].SecondaryIP.String() && n.SecondaryIP != "") {
		t.Errorf("status of %s: ip %q secondaryIP %q", n.Name, n.IP, n.SecondaryIP)
	}

	netCheck := append([]string{"net", "check"}, common...)
	if out, err := labctlRun(t, netCheck...); err != nil {
		t.Errorf("net check right after up = %v:\n%s", err, out)
	}
	if out, err = labctlRun(t, up...); err != nil || strings.Count(out, "(no change)") != 6 {
		t.Errorf("second up = %v (want no change):\n%s", err, out)
	}

	if _, err := labctlRun(t, append([]string{"down"}, common...)...); err != nil {
		t.Fatalf("down: %v", err)
	}
	nets, _ := virsh(t, "net-list", "--all", "--name")
	doms, _ := virsh(t, "list", "--all", "--name")
	for _, s := range []string{nets, doms} {
		if strings.Contains(s, name+"-") {
			t.Errorf("down left %s's objects:\n%s", name, s)
		}
	}
}

func h0(ic ipi.InstallConfig) string { return ic.Platform.BareMetal.Hosts[0].BMC.Address }

// resolveFamilyIn asks server, from inside labci, for each name's
// addresses of one family ("ip4": A, "ip6": AAAA), waiting a bounded time
// for dnsmasq to answer on a new address.
func resolveFamilyIn(t *testing.T, server, network string, want map[string]string) {
	t.Helper()
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return netplumb.DialContextIn("labci")(ctx, "udp", net.JoinHostPort(server, "53"))
	}}
	for name, ip := range want {
		var addrs []netip.Addr
		var err error
		testenv.WaitFor(20*time.Second, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			addrs, err = r.LookupNetIP(ctx, network, name)
			return err == nil
		})
		if err != nil || len(addrs) != 1 || addrs[0].String() != ip {
			t.Errorf("%s (%s) at %s: %v, %v; want %s", name, network, server, addrs, err, ip)
		}
	}
}

// dhcp6Probe plugs a throwaway namespace into bridge (in labci) and
// returns a DHCPv6 client: it solicits (RFC 8415 §16.2) with the client
// identifier duid and an IA_NA, and returns the address the server
// advertises. It also returns the namespace, whose IPv6 default route
// comes from the router advertisements on the bridge.
func dhcp6Probe(t *testing.T, bridge string) (func(duid []byte) (netip.Addr, error), string) {
	t.Helper()
	ns := probeNamespace(t, bridge, "l6p", true)
	return func(duid []byte) (netip.Addr, error) {
		conn, err := dhcpSocket(ns, "udp6", "[::]:546")
		if err != nil {
			return netip.Addr{}, err
		}
		defer conn.Close()
		xid := []byte{0x6a, duid[len(duid)-2], duid[len(duid)-1]}
		opt := func(code uint16, data []byte) []byte {
			return append(binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, code), uint16(len(data))), data...)
		}
		// SOLICIT: Client Identifier (1), IA_NA (3: IAID, T1, T2), Elapsed
		// Time (8).
		pkt := append([]byte{1}, xid...)
		pkt = append(pkt, opt(1, duid)...)
		pkt = append(pkt, opt(3, make([]byte, 12))...)
		pkt = append(pkt, opt(8, []byte{0, 0})...)
		ifi, err := netIndexIn(ns, "eth0")
		if err != nil {
			return netip.Addr{}, err
		}
		to := &net.UDPAddr{IP: net.ParseIP("ff02::1:2"), Port: 547, Zone: ifi}
		var a netip.Addr
		err = dhcpExchange(conn, pkt, to, 15*time.Second, func(buf []byte) (bool, error) {
			n := len(buf)
			if n < 4 || buf[0] != 2 || !bytes.Equal(buf[1:4], xid) { // ADVERTISE
				return false, nil
			}
			for i := 4; i+4 <= n; {
				code, l := binary.BigEndian.Uint16(buf[i:]), int(binary.BigEndian.Uint16(buf[i+2:]))
				body := buf[i+4 : min(n, i+4+l)]
				i += 4 + l
				if code != 3 || len(body) < 12 { // IA_NA
					continue
				}
				for j := 12; j+4 <= len(body); {
					sc, sl := binary.BigEndian.Uint16(body[j:]), int(binary.BigEndian.Uint16(body[j+2:]))
					if sc == 5 && sl >= 24 && j+4+16 <= len(body) { // IA Address
						a, _ = netip.AddrFromSlice(body[j+4 : j+20])
						return true, nil
					}
					if sc == 13 { // Status Code
						return true, fmt.Errorf("DHCPv6 status %q", body[min(len(body), j+6):min(len(body), j+4+sl)])
					}
					j += 4 + sl
				}
			}
			return false, nil
		})
		if err != nil {
			return netip.Addr{}, fmt.Errorf("DHCPv6 ADVERTISE: %w", err)
		}
		return a, nil
	}, ns
}

// netIndexIn is a link's index in a namespace, as an IPv6 zone.
func netIndexIn(ns, link string) (string, error) {
	out, err := exec.Command("ip", "-n", ns, "-o", "link", "show", link).Output()
	if err != nil {
		return "", fmt.Errorf("ip -n %s link show %s: %w", ns, link, err)
	}
	i, _, _ := strings.Cut(string(out), ":")
	return strings.TrimSpace(i), nil
}

// duidLL is a DUID-LL (RFC 8415 §11.4) of a MAC.
func duidLL(mac string) []byte {
	hw, _ := net.ParseMAC(mac)
	return append([]byte{0, 3, 0, 1}, hw...)
}
