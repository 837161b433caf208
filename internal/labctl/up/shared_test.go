package up_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/netplumb/netnstest"
	"github.com/bmlab/bmlab/internal/ocp"
	"github.com/bmlab/bmlab/internal/plan"
	"github.com/bmlab/bmlab/internal/plan/plantest"
	"github.com/bmlab/bmlab/internal/testenv"
)

// sharedNetXML is a user's NAT network 10.198.96.0/24 with a dynamic range
// at its top, as libvirt's default is.
func sharedNetXML(name, bridge string) string {
	return fmt.Sprintf(`<network><name>%s</name><forward mode="nat"/><bridge name="%s" stp="on" delay="0"/>
<ip address="10.198.96.1" prefix="24"><dhcp><range start="10.198.96.200" end="10.198.96.250"/></dhcp></ip></network>`, name, bridge)
}

// virsh runs virsh on the system libvirtd.
func virsh(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(testenv.Command(t, "virsh"), append([]string{"-c", "qemu:///system"}, args...)...).CombinedOutput()
	return string(out), err
}

// sharedLab writes a lab on the shared network with addresses .<block>
// to .<block+9> and the given VIPs (and, for an IPI lab, its provisioning
// IPs at .<api+50> and .<api+51>).
func sharedLab(t *testing.T, dir, name, network, bridge string, block, api, ingress int, hybrid bool) string {
	t.Helper()
	a := func(i int) string { return fmt.Sprintf("10.198.96.%d", i) }
	net := fmt.Sprintf("network:\n  shared: %s\n  libvirtBridge: %s\n  bridges: [{name: bm-%s}]\n  veths: [{name: %s-v0, master: bm-%s, peer: %s-v1, peerMaster: %s}]\n",
		network, bridge, name, name, name, name, bridge)
	var cfg string
	if hybrid {
		cfg, _ = hybridLab(t, dir, name, "10.198.96")
	} else {
		cfg = labFile(t, dir, name, 18730)
	}
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, r := range [][2]string{
		{"10.198.61.", "10.198.96."}, // labFile's network
		{"clusterName: ocp", "clusterName: " + name},
	} {
		s = strings.ReplaceAll(s, r[0], r[1])
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		switch k, _, _ := strings.Cut(strings.TrimSpace(l), ":"); k {
		case "dhcpRange":
			lines[i] = fmt.Sprintf("  dhcpRange: {start: %s, end: %s}", a(block), a(block+9))
		case "apiVIP":
			lines[i] = "  apiVIP: " + a(api)
		case "ingressVIP":
			lines[i] = "  ingressVIP: " + a(ingress)
			if !hybrid {
				// Its provisioning network is Disabled: the provisioning
				// IPs are on this network, away from the other labs'
				// addresses (the default .7 and .8 are theirs).
				lines[i] += fmt.Sprintf("\n  bootstrapProvisioningIP: %s\n  clusterProvisioningIP: %s", a(api+50), a(api+51))
			}
		}
	}
	s = strings.Join(lines, "\n") + net
	if err := os.WriteFile(cfg, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestSharedNetworkThreeLabs is the evidence for several clusters on one
// network: two hybrid labs (up to their control plane, nodes running) and
// one IPI lab (up to install-config: nodes defined, BMCs answering) share a
// user's libvirt network. Each lab's nodes get their planned addresses
// (dnsmasq's hosts file, and a DHCP DISCOVER with each node's MAC, sent
// from a namespace on the network's bridge, is offered the planned
// address), the network's dnsmasq answers every name of every lab, the
// second lab's ignition agrees with the network (keepalived's
// unicast_src_ip, coredns's hosts and upstream), `net check` reports a
// lost entry and `net repair` restores it, a fourth lab whose range and
// VIP are the first's and whose other VIP is leased is refused before
// anything exists, and one lab's `down --lab` (no lab file)
// removes its entries and nodes and leaves the others' untouched.
func TestSharedNetworkThreeLabs(t *testing.T) {
	testenv.Libvirt(t)
	id := netnstest.Rand(2)
	network, bridge := "sh24-"+id, "sh24br"+id
	xmlFile := filepath.Join(t.TempDir(), "net.xml")
	if err := os.WriteFile(xmlFile, []byte(sharedNetXML(network, bridge)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := virsh(t, "net-define", xmlFile); err != nil {
		t.Fatalf("net-define: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		_, _ = virsh(t, "net-destroy", network)
		if out, err := virsh(t, "net-undefine", network); err != nil {
			t.Errorf("net-undefine %s: %v\n%s", network, err, out)
		}
	})
	if out, err := virsh(t, "net-start", network); err != nil {
		t.Fatalf("net-start: %v\n%s", err, out)
	}

	type lab struct {
		name   string
		cfg    string
		args   []string
		hybrid bool
	}
	labs := []*lab{{name: "shh1", hybrid: true}, {name: "shh2", hybrid: true}, {name: "shi3"}}
	blocks := [][3]int{{20, 5, 4}, {30, 7, 6}, {40, 9, 8}}
	for i, l := range labs {
		dir := testenv.QemuDir(t)
		l.cfg = sharedLab(t, dir, l.name, network, bridge, blocks[i][0], blocks[i][1], blocks[i][2], l.hybrid)
		mode := "ipi-baremetal"
		if l.hybrid {
			mode = "hybrid"
		}
		l.args = []string{"--mode", mode, "--profile", "tiny", "-f", l.cfg, "--netns", "labci"}
		if !l.hybrid {
			l.args = append(l.args, "--vbmcd", testenv.Binary(t, "vbmcd"))
		}
		t.Cleanup(func() { _, _ = labctlRun(t, append([]string{"down"}, l.args...)...) })
	}
	until := map[bool]string{true: "control-plane", false: "install-config"}
	for _, l := range labs {
		start := time.Now()
		if out, err := labctlRun(t, append([]string{"up", "--until", until[l.hybrid]}, l.args...)...); err != nil {
			t.Fatalf("up %s: %v\n%s", l.name, err, out)
		}
		t.Logf("up %s --until %s: %v", l.name, until[l.hybrid], time.Since(start).Round(time.Millisecond))
	}
	plans := map[string]*plan.Plan{}
	for _, l := range labs {
		plans[l.name] = resolvePlan(t, l.cfg, l.args[1])
	}

	// Every lab's reservations are in dnsmasq's hosts file, and a DISCOVER
	// with a node's MAC is offered its planned address.
	probe := dhcpProbe(t, bridge)
	hostsfile := readFile(t, "/var/lib/libvirt/dnsmasq/"+network+".hostsfile")
	for _, l := range labs {
		for _, n := range plans[l.name].Nodes {
			if want := strings.ToLower(n.MAC) + "," + n.IP.String() + "," + n.Name; !strings.Contains(hostsfile, want) {
				t.Errorf("dnsmasq hosts file lacks %s:\n%s", want, hostsfile)
			}
			if got, err := probe(n.MAC, false); err != nil || got != n.IP {
				t.Errorf("DHCP offer for %s (%s) = %v, %v; want its planned %s", n.Name, n.MAC, got, err, n.IP)
			}
		}
	}
	// The IPI lab's provisioning IPs (Disabled: on this network) are
	// reserved too, so that the network leases them to nobody.
	for _, ip := range []string{"10.198.96.59,shi3-bootstrap-provisioning-ip", "10.198.96.60,shi3-cluster-provisioning-ip"} {
		if !strings.Contains(hostsfile, ip) {
			t.Errorf("dnsmasq hosts file lacks %s:\n%s", ip, hostsfile)
		}
	}
	// The probe is honest: a MAC nobody reserved gets a dynamic address.
	// It takes a lease, which the fourth lab below must not pick.
	leased, err := probe("52:54:00:ff:ff:01", true)
	if err != nil || !netip.MustParsePrefix("10.198.96.192/26").Contains(leased) || leased.Less(netip.MustParseAddr("10.198.96.200")) {
		t.Fatalf("DHCP lease for an unknown MAC = %v, %v; want one of the range 10.198.96.200-250", leased, err)
	}
	// The network's DNS answers every name of every lab.
	names := func(name string) map[string]string {
		sh := plans[name].Network.Shared
		want := map[string]string{}
		for _, r := range sh.Records {
			for _, nm := range r.Names {
				want[nm] = r.IP.String()
			}
		}
		return want
	}
	for _, l := range labs {
		resolveIn(t, "labci", "10.198.96.1", names(l.name))
	}

	// The second lab's ignition agrees with the network: keepalived's
	// unicast_src_ip is the master's reservation, coredns's hosts are the
	// reservations and the VIPs, and it forwards to the network's dnsmasq.
	p2 := plans["shh2"]
	for _, n := range p2.Nodes {
		if n.Role == ocp.RoleWorker {
			continue
		}
		files := ignitionFiles(t, n.Ignition)
		if n.Role == ocp.RoleMaster || n.Role == ocp.RoleBootstrap {
			if k := files["/etc/kubernetes/static-pod-resources/bmlab/keepalived/keepalived.conf.tmpl"]; !strings.Contains(k, "unicast_src_ip "+n.IP.String()+"\n") {
				t.Errorf("%s's keepalived lacks unicast_src_ip %s:\n%s", n.Name, n.IP, k)
			}
		}
		core := files["/etc/kubernetes/static-pod-resources/bmlab/coredns/Corefile"]
		for _, m := range p2.Nodes {
			if want := m.IP.String() + " " + m.Name + " "; !strings.Contains(core, want) {
				t.Errorf("%s's Corefile lacks %q:\n%s", n.Name, want, core)
			}
		}
		if want := p2.Cluster.APIVIP.String() + " api."; !strings.Contains(core, want) || !strings.Contains(core, "forward . 10.198.96.1\n") {
			t.Errorf("%s's Corefile: want %q and forward to 10.198.96.1:\n%s", n.Name, want, core)
		}
	}

	// A lost reservation: net check says so, net repair restores it.
	m0 := p2.Nodes[1]
	if out, err := virsh(t, "net-update", network, "delete", "ip-dhcp-host", fmt.Sprintf(`<host mac="%s" ip="%s" name="%s"/>`, strings.ToLower(m0.MAC), m0.IP, m0.Name), "--live", "--config"); err != nil {
		t.Fatalf("net-update delete: %v\n%s", err, out)
	}
	out, err := labctlRun(t, append([]string{"net", "check"}, labs[1].args...)...)
	if err == nil || !strings.Contains(out, "libvirt network "+network+" (shared)") || !strings.Contains(out, m0.Name) {
		t.Errorf("net check with a lost reservation: %v\n%s", err, out)
	}
	if out, err := labctlRun(t, append([]string{"net", "repair"}, labs[1].args...)...); err != nil {
		t.Errorf("net repair: %v\n%s", err, out)
	}
	if out, err := labctlRun(t, append([]string{"net", "check"}, labs[1].args...)...); err != nil {
		t.Errorf("net check after repair: %v\n%s", err, out)
	}
	if got, err := probe(m0.MAC, false); err != nil || got != m0.IP {
		t.Errorf("DHCP offer for %s after repair = %v, %v", m0.Name, got, err)
	}

	// A fourth lab whose range and VIP are the first's is refused in
	// preflight, with nothing created.
	dir4 := testenv.QemuDir(t)
	cfg4 := sharedLab(t, dir4, "shh4", network, bridge, 25, 5, int(leased.As4()[3]), true)
	args4 := []string{"--mode", "hybrid", "--profile", "tiny", "-f", cfg4, "--netns", "labci"}
	t.Cleanup(func() { _, _ = labctlRun(t, append([]string{"down"}, args4...)...) })
	_, err = labctlRun(t, append([]string{"up"}, args4...)...)
	for _, want := range []string{
		`cluster.dhcpRange: 10.198.96.25-10.198.96.34 overlaps lab "shh1"'s addresses 10.198.96.20-10.198.96.29 on the shared network ` + network,
		`cluster.apiVIP: 10.198.96.5 is lab "shh1"'s (shh1-api-vip)`,
		`cluster.ingressVIP: ` + leased.String() + ` is leased to 52:54:00:ff:ff:01`,
		"nothing was created",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the clashing lab: %v\nwant %q", err, want)
		}
	}
	if out, _ := virsh(t, "list", "--all", "--name"); strings.Contains(out, "shh4-") {
		t.Errorf("the refused lab has domains:\n%s", out)
	}

	// down --lab shh2, without its lab file: its entries and nodes go, the
	// others' stay, their running nodes untouched.
	before, _ := virsh(t, "list", "--name")
	if out, err := labctlRun(t, "down", "--lab", "shh2", "--netns", "labci"); err != nil {
		t.Fatalf("down --lab shh2: %v\n%s", err, out)
	}
	after, _ := virsh(t, "list", "--name")
	for _, name := range strings.Fields(before) {
		// Only this test's labs: other tests' domains come and go.
		if !strings.HasPrefix(name, "shh1-") && !strings.HasPrefix(name, "shh2-") && !strings.HasPrefix(name, "shi3-") {
			continue
		}
		if strings.HasPrefix(name, "shh2-") == slices.Contains(strings.Fields(after), name) {
			t.Errorf("domain %s: running before down --lab shh2, running after %v", name, strings.Contains(after, name))
		}
	}
	hostsfile = readFile(t, "/var/lib/libvirt/dnsmasq/"+network+".hostsfile")
	for _, l := range labs {
		for _, n := range plans[l.name].Nodes {
			if strings.Contains(hostsfile, strings.ToLower(n.MAC)) != (l.name != "shh2") {
				t.Errorf("after down --lab shh2, %s's reservation in the hosts file: %v", n.Name, !(l.name != "shh2"))
			}
		}
	}
	resolveIn(t, "labci", "10.198.96.1", names("shh1"))
	resolveIn(t, "labci", "10.198.96.1", names("shi3"))
	for name := range names("shh2") {
		if addrs, err := lookupIn("labci", "10.198.96.1", name); err == nil {
			t.Errorf("%s still resolves after its lab's down: %v", name, addrs)
		}
	}
	if x, _ := virsh(t, "net-dumpxml", "--inactive", network); strings.Contains(x, `name="shh2"`) || !strings.Contains(x, `name="shh1"`) {
		t.Errorf("the network's list after down --lab shh2:\n%s", x)
	}
	for _, l := range []*lab{labs[0], labs[2]} {
		start := time.Now()
		if out, err := labctlRun(t, append([]string{"down"}, l.args...)...); err != nil {
			t.Errorf("down %s: %v\n%s", l.name, err, out)
		}
		t.Logf("down %s: %v", l.name, time.Since(start).Round(time.Millisecond))
	}
	if x, _ := virsh(t, "net-dumpxml", "--inactive", network); strings.Contains(x, "bmlab.dev/xmlns/shared") || strings.Contains(x, "<host") {
		t.Errorf("the network after every lab's down:\n%s", x)
	}
}

// readFile is the file at path; one that cannot be read fails the test.
var readFile = testenv.ReadFile

// resolvePlan is the lab's plan as a later labctl command makes it from the
// lab file and mode, with no --profile: the plan takes the profile the
// lab's state records, so its nodes are the ones up made.
func resolvePlan(t *testing.T, cfg, mode string) *plan.Plan {
	t.Helper()
	p, err := plan.Load(plan.Options{Modes: plantest.Modes(), ConfigPath: cfg, ConfigSet: true, Mode: mode, Netns: "labci"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func lookupIn(ns, server, name string) ([]string, error) {
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return netplumb.DialContextIn(ns)(ctx, "udp", net.JoinHostPort(server, "53"))
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return r.LookupHost(ctx, name)
}

// resolveIn asks the DNS server at server, from the namespace ns, for each
// name's address.
func resolveIn(t *testing.T, ns, server string, want map[string]string) {
	t.Helper()
	for name, ip := range want {
		addrs, err := lookupIn(ns, server, name)
		if err != nil || strings.Join(addrs, ",") != ip {
			t.Errorf("%s at %s: %v, %v; want %s", name, server, addrs, err, ip)
		}
	}
}

// ignitionFiles are an ignition config's files by path, decoded.
func ignitionFiles(t *testing.T, path string) map[string]string {
	t.Helper()
	var ign struct {
		Storage struct {
			Files []struct {
				Path     string
				Contents struct{ Source string }
			}
		}
	}
	if err := json.Unmarshal([]byte(readFile(t, path)), &ign); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string]string{}
	for _, f := range ign.Storage.Files {
		_, data, ok := strings.Cut(f.Contents.Source, ";base64,")
		if !ok {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			t.Fatalf("%s: %s: %v", path, f.Path, err)
		}
		out[f.Path] = string(b)
	}
	return out
}

// dhcpProbe makes a namespace whose eth0 is a port of bridge (in labci)
// and returns a function that sends a DHCPDISCOVER with a client MAC from
// it and returns the address offered; with lease, it then requests that
// address (DHCPREQUEST) and returns it once acknowledged, so that dnsmasq
// holds a lease for the MAC. dnsmasq matches a reservation on the packet's
// client hardware address (chaddr), so one port asks for every node.
func dhcpProbe(t *testing.T, bridge string) func(mac string, lease bool) (netip.Addr, error) {
	t.Helper()
	ns := probeNamespace(t, bridge, "shp", false)
	return func(mac string, lease bool) (netip.Addr, error) {
		hw, err := net.ParseMAC(mac)
		if err != nil {
			return netip.Addr{}, err
		}
		conn, err := dhcpSocket(ns, "udp4", "0.0.0.0:68")
		if err != nil {
			return netip.Addr{}, err
		}
		defer conn.Close()
		xid := binary.BigEndian.Uint32(hw[2:])
		// A BOOTREQUEST (RFC 2131 §2), broadcast flag set, with option 53
		// (RFC 2132 §9.6) and the options given.
		request := func(kind byte, opts ...byte) []byte {
			pkt := make([]byte, 240, 300)
			pkt[0], pkt[1], pkt[2] = 1, 1, 6
			binary.BigEndian.PutUint32(pkt[4:], xid)
			pkt[10] = 0x80
			copy(pkt[28:], hw)
			copy(pkt[236:], []byte{99, 130, 83, 99})
			pkt = append(pkt, 53, 1, kind)
			return append(append(pkt, opts...), 255)
		}
		// exchange sends pkt until a reply of type want comes, and returns
		// the address in it (yiaddr) and its options.
		exchange := func(pkt []byte, want byte) (ip netip.Addr, opts map[byte][]byte, err error) {
			err = dhcpExchange(conn, pkt, &net.UDPAddr{IP: net.IPv4bcast, Port: 67}, 10*time.Second, func(buf []byte) (bool, error) {
				n := len(buf)
				if n < 240 || buf[0] != 2 || binary.BigEndian.Uint32(buf[4:]) != xid {
					return false, nil
				}
				opts = map[byte][]byte{}
				for i := 240; i+1 < n && buf[i] != 255; {
					if buf[i] == 0 { // pad
						i++
						continue
					}
					end := i + 2 + int(buf[i+1])
					if end > n {
						break
					}
					opts[buf[i]] = buf[i+2 : end]
					i = end
				}
				if len(opts[53]) != 1 || opts[53][0] != want {
					return false, nil
				}
				ip, _ = netip.AddrFromSlice(buf[16:20])
				return true, nil
			})
			if err != nil {
				return netip.Addr{}, nil, fmt.Errorf("DHCP reply of type %d: %w", want, err)
			}
			return ip, opts, nil
		}
		offered, opts, err := exchange(request(1), 2) // DISCOVER, OFFER
		if err != nil || !lease {
			return offered, err
		}
		ip4 := offered.As4()
		server := opts[54]
		req := append([]byte{50, 4}, ip4[:]...)
		req = append(append(req, 54, byte(len(server))), server...)
		acked, _, err := exchange(request(3, req...), 5) // REQUEST, ACK
		return acked, err
	}
}

// probeNamespace makes a throwaway namespace whose eth0 is a port of bridge
// (in labci), the port named prefix and three random letters; with noDAD,
// eth0 does no duplicate address detection, so that its IPv6 link-local
// address is usable at once.
func probeNamespace(t *testing.T, bridge, prefix string, noDAD bool) string {
	t.Helper()
	ns, _ := netnstest.New(t)
	port := prefix + netnstest.Rand(3)
	netnstest.IP(t, "-n", "labci", "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "-n", "labci", "link", "del", port).Run() })
	if noDAD {
		if out, err := exec.Command("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.eth0.accept_dad=0").CombinedOutput(); err != nil {
			t.Fatalf("sysctl: %v: %s", err, out)
		}
	}
	netnstest.IP(t, "-n", "labci", "link", "set", port, "master", bridge, "up")
	netnstest.IP(t, "-n", ns, "link", "set", "eth0", "up")
	return ns
}

// dhcpExchange is a DHCP client's retransmission (RFC 2131 §4.1, RFC 8415
// §15): it sends pkt to `to` and hands each datagram that comes back to
// reply, sending again after 2 s of silence, until reply says it was the
// answer (done, or an error) or timeout has passed.
func dhcpExchange(conn net.PacketConn, pkt []byte, to net.Addr, timeout time.Duration, reply func(b []byte) (bool, error)) error {
	deadline := time.Now().Add(timeout)
	buf := make([]byte, 1500)
	for time.Now().Before(deadline) {
		if _, err := conn.WriteTo(pkt, to); err != nil {
			return fmt.Errorf("send: %w", err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		for {
			n, _, err := conn.ReadFrom(buf)
			if err != nil {
				break // resend
			}
			if done, err := reply(buf[:n]); done || err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("no answer in %s", timeout)
}

// dhcpSocket is a DHCP client's socket in netns ns: listening on addr of
// network (udp4 or udp6), bound to the namespace's eth0, broadcast allowed
// for DHCPv4.
func dhcpSocket(ns, network, addr string) (net.PacketConn, error) {
	var conn net.PacketConn
	err := netplumb.InNamespace(ns, func() error {
		lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				if network == "udp4" {
					serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_BROADCAST, 1)
				}
				serr = errors.Join(serr, syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1),
					syscall.BindToDevice(int(fd), "eth0"))
			})
			return errors.Join(err, serr)
		}}
		var err error
		conn, err = lc.ListenPacket(context.Background(), network, addr)
		return err
	})
	return conn, err
}
