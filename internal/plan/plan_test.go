package plan

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/labconfig"
	"github.com/bmlab/bmlab/internal/ocp"
	"github.com/bmlab/bmlab/internal/personality"
	"github.com/bmlab/bmlab/internal/testenv"
)

// resolveErr parses and resolves a lab that is to be refused and returns
// the error, the parser's or Resolve's.
func resolveErr(lab, mode string) error {
	cfg, err := labconfig.Parse([]byte(lab))
	if err != nil {
		return err
	}
	_, err = Resolve(cfg, Options{Modes: testModes, Dir: "/x", Mode: mode})
	return err
}

func resolve(t *testing.T, lab, profile, mode string) *Plan {
	t.Helper()
	cfg, err := labconfig.Parse([]byte(lab))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.ApplyProfile(profile); err != nil {
		t.Fatal(err)
	}
	p, err := Resolve(cfg, Options{Modes: testModes, Dir: "/labs/" + cfg.Name, Profile: profile, Mode: mode, Vbmcd: "/usr/local/bin/vbmcd", Netns: "labci"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestGolden pins the plans of the labs of plantest/labs.json (labvirt
// pins their provider's commands): the seed lab (provisioning network
// Disabled), its tiny profile, a lab of each other provisioning profile
// (Managed, Unmanaged), a lab with TLS off and IPMI BMCs, a hybrid lab (and one on libvirt's default
// network, shared, and a single node installed in place), a lab of x86_64
// masters and aarch64 workers, an aarch64 agent single node.
func TestGolden(t *testing.T) {
	b, err := os.ReadFile("plantest/labs.json")
	if err != nil {
		t.Fatal(err)
	}
	var labs []struct{ Name, Lab, Profile, Mode string }
	if err := json.Unmarshal(b, &labs); err != nil {
		t.Fatal(err)
	}
	for _, tt := range labs {
		t.Run(tt.Name, func(t *testing.T) {
			got, err := json.MarshalIndent(resolve(t, tt.Lab, tt.Profile, tt.Mode), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", tt.Name+".json")
			testenv.Golden(t, path, got)
		})
	}
}

// TestOneAddress: install-config's address, the System URL labctl checks
// and vbmcd's listener agree on scheme, host and port, with TLS on or off.
func TestOneAddress(t *testing.T) {
	for _, tls := range []string{"true", "false"} {
		p := resolve(t, "cluster: {bmc: {tls: "+tls+"}}\n", "", modeIPI)
		scheme := map[string]string{"true": "https", "false": "http"}[tls]
		if (scheme == "http") != p.Vbmcd.InsecureHTTP || p.Vbmcd.RedfishAddr != "192.168.111.1:8000" {
			t.Errorf("tls %s: vbmcd serves %s, insecure HTTP %v", tls, p.Vbmcd.RedfishAddr, p.Vbmcd.InsecureHTTP)
		}
		for _, n := range p.Nodes {
			if !strings.HasPrefix(n.BMC.Address, "redfish-virtualmedia+"+scheme+"://192.168.111.1:8000/") ||
				!strings.HasPrefix(n.BMC.SystemURL, scheme+"://192.168.111.1:8000/redfish/v1/Systems/"+n.UUID) {
				t.Errorf("tls %s: %s has %s and %s", tls, n.Name, n.BMC.Address, n.BMC.SystemURL)
			}
		}
	}
}

// TestBMCNetwork: with cluster.bmc.network every node's BMC has an address
// of its own there, after the lab host's: install-config's address (Redfish
// and IPMI, no port: the usual ones), the System URL labctl checks, vbmcd's
// pins and the bridge's addresses agree; each node's password fits IPMI
// (its BMC answers IPMI at port 623 whatever the kind). A subnet too
// small for every node, of a family the machine network lacks, or on the
// machine network is refused with the field and the fix (TestBadInput).
func TestBMCNetwork(t *testing.T) {
	p := resolve(t, "name: oob\ncluster: {bmc: {network: 192.168.125.0/24}}\n", "", modeIPI)
	var br []string
	for _, b := range p.Network.Topology.Bridges {
		if b.Name == "bmbmc-oob" {
			for _, a := range b.Addresses {
				br = append(br, a.String())
			}
		}
	}
	want := []string{"192.168.125.1/24"}
	for i, n := range p.Nodes {
		a := fmt.Sprintf("192.168.125.%d", i+2)
		want = append(want, a+"/24")
		if n.BMC.Addr.String() != a || n.BMC.Address != "redfish-virtualmedia+https://"+a+"/redfish/v1/Systems/"+n.UUID ||
			n.BMC.SystemURL != "https://"+a+"/redfish/v1/Systems/"+n.UUID || n.BMC.IPMIPort != 0 {
			t.Errorf("%s: %+v, want its BMC at %s", n.Name, n.BMC, a)
		}
		if len(n.BMC.Password) != 20 {
			t.Errorf("%s's BMC password is %d bytes; IPMI at its own address takes 20 at most", n.Name, len(n.BMC.Password))
		}
		if !slices.Contains(p.Vbmcd.BMCAddresses, NodeAddress{Node: n.Name, Addr: n.BMC.Addr}) {
			t.Errorf("vbmcd does not pin %s to %s: %v", n.Name, a, p.Vbmcd.BMCAddresses)
		}
	}
	if !slices.Equal(br, want) {
		t.Errorf("the BMC bridge's addresses: %v, want %v", br, want)
	}
	if p.Vbmcd.CACert != p.Paths.CACert || p.Vbmcd.CAKey != p.Paths.CAKey {
		t.Errorf("vbmcd does not get the lab's CA for its BMCs' certificates: %q, %q", p.Vbmcd.CACert, p.Vbmcd.CAKey)
	}
	ipmi := resolve(t, "name: oob\nnetwork: {provisioningNetwork: Managed}\ncluster: {bmc: {kind: ipmi, network: 'fd00:125::/64'}, ipFamily: dual}\n", "", modeIPI)
	if got := ipmi.Nodes[0].BMC.Address; got != "ipmi://[fd00:125::2]" {
		t.Errorf("an IPMI BMC of its own: %s, want ipmi://[fd00:125::2]", got)
	}
}

// TestPersonalitiesPerNode: a pool's personalities give its nodes a
// personality each (an empty entry, or a node past the list such as a
// worker added on day 2, takes the pool's); at a BMC of its own a vendor's
// System is named by the vendor's id in install-config's address and in
// the System URL labctl reads, a generic one by the node's UUID; on the
// shared listener every System is named by its UUID, whatever the vendor.
func TestPersonalitiesPerNode(t *testing.T) {
	const lab = "name: per\ncluster: {%smasters: {personality: ilo6, personalities: [idrac9, '', '']}, workers: {count: 1, personalities: [generic]}}\n"
	type want struct{ personality, vendor, scheme, system string }
	wants := map[string]want{
		"per-master-0": {"idrac9", "Dell Inc.", "idrac-virtualmedia", "System.Embedded.1"},
		"per-master-1": {"ilo6", "HPE", "redfish-virtualmedia", "1"},
		"per-master-2": {"ilo6", "HPE", "redfish-virtualmedia", "1"},
		"per-worker-0": {"generic", "bmlab", "redfish-virtualmedia", ""},
		"per-worker-1": {"", "", "redfish-virtualmedia", ""}, // added: past the list, the pool's (none)
	}
	for _, bmcNet := range []bool{true, false} {
		net := ""
		if bmcNet {
			net = "bmc: {network: 192.168.125.0/24}, "
		}
		cfg, err := labconfig.Parse(fmt.Appendf(nil, lab, net))
		if err != nil {
			t.Fatal(err)
		}
		p, err := Resolve(cfg, Options{Modes: testModes, Dir: "/labs/per", Mode: modeIPI, AddedWorkers: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Nodes) != len(wants) {
			t.Fatalf("%d nodes, want %d", len(p.Nodes), len(wants))
		}
		for _, n := range p.Nodes {
			w := wants[n.Name]
			system, host := n.UUID, "192.168.111.1:8000"
			if bmcNet {
				host = n.BMC.Addr.String()
				if w.system != "" {
					system = w.system
				}
			}
			url := "https://" + host + "/redfish/v1/Systems/" + system
			if n.BMC.Personality != w.personality || n.BMC.Vendor != w.vendor || n.BMC.Address != w.scheme+"+"+url || n.BMC.SystemURL != url {
				t.Errorf("BMC network %v: %s: %s (%s) at %s, %s; want %s (%s) at %s+%s", bmcNet, n.Name, n.BMC.Personality, n.BMC.Vendor, n.BMC.Address, n.BMC.SystemURL, w.personality, w.vendor, w.scheme, url)
			}
		}
	}
}

// TestSecretsOffTheCommandLine: the password is not in the plan's JSON,
// which holds everything vbmcd's command line is made of (labvirt's
// TestCommands checks the arguments themselves).
func TestSecretsOffTheCommandLine(t *testing.T) {
	p := resolve(t, "cluster: {bmc: {password: s3cret-pw}}\n", "", modeIPI)
	b, _ := json.Marshal(p)
	if strings.Contains(string(b), "s3cret-pw") {
		t.Errorf("the password leaks: %s", b)
	}
	if p.BMC.Password != "s3cret-pw" {
		t.Errorf("the plan lost the password")
	}
}

func TestNATBridgeNames(t *testing.T) {
	a, b := natBridge("averylonglabname-1"), natBridge("averylonglabname-2")
	if a == b || len(a) > 15 || len(b) > 15 {
		t.Errorf("natBridge: %q and %q", a, b)
	}
	if natBridge("seed") != "bmnat-seed" {
		t.Errorf("natBridge(seed) = %q", natBridge("seed"))
	}
}

// TestBadInput: a lab the plan cannot resolve is refused, each with the
// whole message (the field, the rule and the fix).
func TestBadInput(t *testing.T) {
	for _, tt := range []struct{ lab, mode, want string }{
		{"cluster: {masters: {count: 1}}\n", modeIPI, "cluster.masters.count: 1 (a single-node cluster) is installed by --mode agent (or hybrid); ipi-baremetal needs 3 masters"},
		{"cluster: {masters: {count: 2}, fencing: true, image: /i.qcow2}\n", modeHybrid, "cluster.fencing: a two-node control plane with fencing is installed by --mode agent, not hybrid"},
		{"cluster: {masters: {count: 2}, arbiter: {count: 1}}\n", modeIPI, "cluster.arbiter: a two-node control plane with an arbiter is installed by --mode agent, not ipi-baremetal"},
		{"cluster: {masters: {count: 1}, workers: {count: 2}}\n", modeAgent, "cluster.workers.count: a single-node cluster has no workers at install; add them afterwards (labctl add-node) or use 3 masters"},
		{"", modeHybrid, "cluster.image: the hybrid mode boots its nodes from an RHCOS qcow2; name it (a path or an http(s) URL) in the lab file"},
		{"cluster: {dhcpRange: {start: 192.168.111.20, end: 192.168.111.22}}\n", modeIPI, "cluster.dhcpRange: 192.168.111.20-192.168.111.22 has no room for 4 nodes; widen it"},
		// cluster.bmc.network (TestBMCNetwork): too small, of a family the
		// machine network lacks, on the machine network, host bits, no BMCs.
		{"cluster: {bmc: {network: 192.168.125.0/30}}\n", modeIPI, "cluster.bmc.network: 192.168.125.0/30 has 2 host addresses; the lab host and 5 BMCs need 6: use a larger subnet"},
		{"cluster: {bmc: {network: 'fd00:125::/64'}}\n", modeIPI, "cluster.bmc.network: fd00:125::/64 is IPv6, but the machine network (ipFamily v4) has no address of that family: the nodes could not reach their BMCs; use a subnet of the machine network's family"},
		{"cluster: {bmc: {network: 192.168.111.128/25}}\n", modeIPI, "cluster.bmc.network: 192.168.111.128/25 overlaps the machine network 192.168.111.0/24; the BMC network is a subnet of its own (for example 192.168.125.0/24, or fd2e:6f44:5dd8:c957::/120)"},
		{"cluster: {bmc: {network: 192.168.125.1/24}}\n", modeIPI, "cluster.bmc.network: 192.168.125.1/24 has host bits set; use 192.168.125.0/24"},
		{"cluster: {bmc: {network: 192.168.125.0/24}, image: /i.qcow2}\n", modeHybrid, "cluster.bmc.network: the hybrid mode's nodes have no BMC; drop cluster.bmc.network"},
	} {
		if err := resolveErr(tt.lab, tt.mode); err == nil || err.Error() != tt.want {
			t.Errorf("Resolve(%q, %s) = %v, want %q", tt.lab, tt.mode, err, tt.want)
		}
	}
}

// TestMultiHostPlacement: nodes spread round-robin unless placed; each host
// has its VXLAN links to the hub only; a lab on one host has every node
// local; bad hosts and placements name the field.
func TestMultiHostPlacement(t *testing.T) {
	p := resolve(t, "hosts:\n- {name: a, libvirtURI: 'qemu:///system', underlay: 10.254.0.1}\n"+
		"- {name: b, libvirtURI: 'qemu+ssh://root@b/system', underlay: 10.254.0.2}\n"+
		"- {name: c, libvirtURI: 'qemu+tls://c/system', underlay: 10.254.0.3}\n", "", modeIPI)
	var got []string
	for _, n := range p.Nodes {
		got = append(got, n.Host)
	}
	if d := cmp.Diff([]string{"a", "b", "c", "a", "b"}, got); d != "" {
		t.Errorf("placement (-want +got):\n%s", d)
	}
	if n := len(p.LocalNodes("a")); n != 2 {
		t.Errorf("LocalNodes(a): %d nodes, want 2", n)
	}
	links := map[string][]string{}
	for _, h := range p.Hosts {
		for _, x := range h.Topology.VXLANs {
			links[h.Name] = append(links[h.Name], x.Name+">"+x.Remote.String())
		}
		if err := h.Topology.Validate(); err != nil {
			t.Errorf("host %s: %v", h.Name, err)
		}
	}
	want := map[string][]string{"a": {"vxb-b>10.254.0.2", "vxb-c>10.254.0.3"}, "b": {"vxb-a>10.254.0.1"}, "c": {"vxb-a>10.254.0.1"}}
	if d := cmp.Diff(want, links); d != "" {
		t.Errorf("VXLAN links (-want +got):\n%s", d)
	}
	if h, ok := p.ForHost("b"); !ok || h.Hub || len(h.Topology.Veths) != 0 {
		t.Errorf("ForHost(b) = %+v, %v: want a spoke without the NAT veth", h, ok)
	}
	// b's part, as labctl on b builds it: b's nodes and links, no NAT.
	b, err := p.ForSpoke("b")
	if err != nil || b.LibvirtURI != "qemu+ssh://root@b/system" || len(b.Nodes) != 2 || b.Network.NAT != nil ||
		len(b.Hosts) != 0 || b.HubTopology().VXLANs[0].Name != "vxb-a" || b.Spoke != "b" {
		t.Errorf("ForSpoke(b) = %+v, %v", b, err)
	}
	for _, h := range []string{"a", "z"} {
		if _, err := p.ForSpoke(h); err == nil {
			t.Errorf("ForSpoke(%s) = nil error; want the hub and unknown hosts refused", h)
		}
	}
	if one := resolve(t, "", "", modeIPI); len(one.LocalNodes("anything")) != len(one.Nodes) {
		t.Errorf("a lab on one host: not every node is local")
	}
	for _, bad := range []struct{ lab, want string }{
		{"hosts:\n- {name: a, libvirtURI: 'qemu:///system', underlay: 10.254.0.1}\n- {name: b, libvirtURI: 'qemu+tcp://b/system'}\n", "hosts[1].underlay"},
		{"hosts:\n- {name: averyverylongname, libvirtURI: 'qemu:///system'}\n", "hosts[0].name"},
		{"hosts:\n- {name: a, libvirtURI: 'qemu:///system'}\ncluster: {masters: {placement: [a, z, a]}}\n", `cluster.masters.placement[1]: "z" is not in hosts`},
		{"hosts:\n- {name: a, libvirtURI: 'qemu:///system'}\ncluster: {masters: {placement: [a]}}\n", "cluster.masters.placement: 1 hosts for 3 nodes"},
		{"hosts:\n- {name: a, libvirtURI: 'qemu:///system', exec: [ssh, a]}\n", "hosts[0]: a is the hub, where labctl runs"},
		{"hosts:\n- {name: a, libvirtURI: 'qemu:///system', underlay: 10.254.0.1}\n- {name: b, libvirtURI: 'qemu+tcp://b/system', underlay: 10.254.0.2, exec: ['']}\n", "hosts[1].exec: the first word is a program"},
	} {
		if _, err := labconfig.Parse([]byte(bad.lab)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Parse(%q) = %v, want %q", bad.lab, err, bad.want)
		}
	}
}

// TestHybridSingleNode: one master and no workers is installed in place (no
// bootstrap, the VIPs are the node's in the lab network); one master with
// workers keeps the bootstrap flow, as kcli without sno.
func TestHybridSingleNode(t *testing.T) {
	p := resolve(t, "name: s\ncluster: {image: /i.iso, masters: {count: 1}}\n", "tiny", modeHybrid)
	if !p.SingleNode() || len(p.Nodes) != 1 || p.Nodes[0].Role != ocp.RoleMaster || p.Nodes[0].Disks[0].Backing != "" ||
		p.Network.NAT.APIVIP != p.Nodes[0].IP || p.Network.NAT.IngressVIP != p.Nodes[0].IP || p.Hybrid.InstallationDisk != "/dev/vda" {
		t.Errorf("masters 1, no workers: single node %v, nodes %+v, NAT %+v", p.SingleNode(), p.Nodes, p.Network.NAT)
	}
	p = resolve(t, "name: s\ncluster: {image: /i.qcow2, masters: {count: 1}, workers: {count: 1}}\n", "tiny", modeHybrid)
	if p.SingleNode() || len(p.Nodes) != 3 || p.Nodes[0].Role != ocp.RoleBootstrap || p.Network.NAT.APIVIP == p.Nodes[1].IP {
		t.Errorf("masters 1 with a worker: single node %v, nodes %+v", p.SingleNode(), p.Nodes)
	}
}

// TestHostResolver: the drop-in's server is the DNS of the network the
// lab's records are in (its NAT network's gateway, or the shared
// network's, where the dnsmasq drop-in answers *.apps itself); a lab that
// borrows a network without its records is refused; down's list holds the
// drop-in and the lab's name at both default places.
func TestHostResolver(t *testing.T) {
	p := resolve(t, "name: r\nnetwork: {hostResolver: resolved}\ncluster: {image: /i.qcow2}\n", "tiny", modeHybrid)
	want := &Resolver{Kind: "resolved", Path: "/etc/systemd/resolved.conf.d/bmlab-r.conf", Domain: "r." + labconfig.DefaultBaseDomain, DNS: p.Network.NAT.HostAddress}
	if p.Network.Resolver == nil || *want != *p.Network.Resolver {
		t.Errorf("resolved on a NAT network: %+v, want %+v", p.Network.Resolver, want)
	}
	if d := cmp.Diff([]string{"/etc/NetworkManager/dnsmasq.d/bmlab-r.conf", "/etc/systemd/resolved.conf.d/bmlab-r.conf"}, p.Network.ResolverDropIns); d != "" {
		t.Errorf("drop-ins down removes (-want +got):\n%s", d)
	}
	p = resolve(t, "name: r\nnetwork: {hostResolver: dnsmasq, hostResolverDir: /d, shared: default, bridges: [{name: bm-r}], veths: [{name: r-v0, master: bm-r, peer: r-v1, peerMaster: virbr0}]}\n"+
		"cluster: {image: /i.qcow2, machineNetwork: 192.168.122.0/24, dhcpRange: {start: 192.168.122.150, end: 192.168.122.159}, apiVIP: 192.168.122.145, ingressVIP: 192.168.122.146}\n", "tiny", modeHybrid)
	if r := p.Network.Resolver; r == nil || r.Path != "/d/bmlab-r.conf" || r.DNS.String() != "192.168.122.1" || r.Apps.String() != "192.168.122.146" || p.Network.ResolverDropIns[0] != "/d/bmlab-r.conf" {
		t.Errorf("dnsmasq on a shared network: %+v, %v", r, p.Network.ResolverDropIns)
	}
	if p := resolve(t, "name: r\ncluster: {image: /i.qcow2}\n", "tiny", modeHybrid); p.Network.Resolver != nil || p.Network.HostResolver != ResolverHosts {
		t.Errorf("the default: %q, %+v; want hosts and no drop-in", p.Network.HostResolver, p.Network.Resolver)
	}
	if err := resolveErr("name: r\nnetwork: {hostResolver: dnsmasq, libvirtBridge: br-other}\ncluster: {image: /i.qcow2}\n", modeHybrid); err == nil || !strings.Contains(err.Error(), "network.hostResolver: dnsmasq sends the cluster's names to the lab network's DNS, but this lab borrows the libvirt network on br-other") {
		t.Errorf("a borrowed network: %v", err)
	}
}

// TestVirtualMediaSchemes: a personality's own virtual media scheme
// (Personality.VirtualMediaScheme, which endpoint gives its nodes) is a
// BMC kind install-config's bmc.address is made for; the golden mixed
// racks show the iDRACs' nodes reached by it.
func TestVirtualMediaSchemes(t *testing.T) {
	seen := 0
	for _, name := range personality.Names() {
		p, err := personality.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if p.VirtualMediaScheme == "" {
			continue
		}
		seen++
		if _, err := ocp.BMCAddress(ocp.BMCEndpoint{Kind: p.VirtualMediaScheme, Host: "192.0.2.1", RedfishPort: 8000, TLS: true}, "1", 0); err != nil {
			t.Errorf("personality %s: virtual media scheme %q: %v", name, p.VirtualMediaScheme, err)
		}
	}
	if seen == 0 {
		t.Error("no personality has a virtual media scheme of its own: the iDRACs lost theirs")
	}
}
