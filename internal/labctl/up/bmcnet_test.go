package up_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
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

	"sigs.k8s.io/yaml"

	"github.com/bmlab/bmlab/internal/agent"
	"github.com/bmlab/bmlab/internal/installertest"
	"github.com/bmlab/bmlab/internal/ipi"
	"github.com/bmlab/bmlab/internal/ironictest"
	"github.com/bmlab/bmlab/internal/lab/agentmode"
	"github.com/bmlab/bmlab/internal/lab/ipimode"
	"github.com/bmlab/bmlab/internal/labconfig"
	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/netplumb/netnstest"
	"github.com/bmlab/bmlab/internal/ocp"
	"github.com/bmlab/bmlab/internal/plan"
	"github.com/bmlab/bmlab/internal/testenv"
)

// TestUpBMCNetwork brings up, on the real libvirtd (in labci), a lab whose
// BMCs are on a network of their own (cluster.bmc.network), up to its
// installer's files: an IPv4 IPI lab with Redfish BMCs booted from virtual
// media, one booted from a Managed provisioning network by Redfish (its
// first master an iLO 6), one with IPMI BMCs on an Unmanaged one, and an
// IPv6 agent lab of two masters with fencing (Redfish), all four at once
// (the Managed lab on the default bridges, baremetal and provisioning, and
// 172.22.0.0/24; the others on bridges and a veth pair of their own, the
// Unmanaged one's provisioning network 172.23.0.0/24). For each:
//   - install-config names one address per BMC on the BMC network, without
//     a port, and install-config's fencing credentials the same addresses
//     (redfish+https);
//   - from a namespace plugged into the machine network as a node is (an
//     address there, its default route the lab host), every BMC answers:
//     https://ADDR/redfish/v1/Systems lists that node alone, with a
//     certificate for ADDR the lab's CA issued (curl verifies it), and in
//     the IPMI lab ipmitool at ADDR (port 623) reaches the same node;
//   - net check is clean; an address taken off the BMC bridge is reported,
//     net repair puts it back and net check is clean again;
//   - Ironic, started in that namespace as in the bootstrap VM, takes
//     each host of install-config (its BMC address, credentials and
//     bmcVerifyCA as given; the ipmi and the redfish hardware types) to
//     manageable and powers it on and off, as libvirt sees; inspects each
//     Redfish host through its BMC (CPUs and memory as the lab made them);
//     in the IPv4 Redfish lab Ironic is 29 (with fast_track, as the
//     bootstrap's) and the first master, an iDRAC 9
//     (masters.personalities; install-config's idrac-virtualmedia+https
//     address, enrolled as Metal3's baremetal-operator maps it: the idrac
//     hardware type, idrac-redfish-virtual-media, Dell's OEM through
//     sushy-oem-idrac), goes through the real agent
//     (ironic-python-agent 10.2.0 from Debian 13, by virtual media):
//     inspection, automated cleaning, the deploy of an OS image, which the
//     master then boots from its disk and which its disk holds (read from
//     the lab host); so is the Managed lab's (Ironic 29, fast_track), whose
//     first master, an iLO 6 (install-config's ilo5://ADDR, enrolled as
//     the baremetal-operator maps it: the ilo5 hardware type, ilo-ipxe,
//     proliantutils' RIBCL, which Ironic's log shows posted to its BMC),
//     boots the agent through its provisioning NIC; the other labs run
//     Ironic 21.4;
//   - the labs with a provisioning network are booted as the bootstrap VM
//     boots them: the namespace also joins the provisioning bridge at
//     bootstrapProvisioningIP, where Ironic runs, and the first master
//     boots the real agent through its provisioning NIC (the ipxe boot
//     interface, or the iLO's ilo-ipxe: the NIC's iPXE ROM, Ironic's
//     boot.ipxe, the deploy kernel and ramdisk) for automated cleaning (in
//     the Unmanaged lab its serial console showing the ramdisk's init
//     once), and its boot MAC leased an address of
//     provisioningDHCPRange: on a Managed network by Debian's dnsmasq with
//     the configuration Metal3's ironic-image writes (the DHCP server of
//     that range, TFTP of iPXE), on an Unmanaged one by the lab's own DHCP
//     server (status says it runs), the bootstrap's dnsmasq serving TFTP
//     only and answering no DHCP;
//   - those labs' nodes have two NICs, the provisioning one first
//     (libvirt's definition), as labctl status shows them;
//   - in the two-node lab, fence_redfish and fence_ipmilan, with the
//     fencing credentials install-config carries, power each master on
//     and off (libvirt's view checked); a wrong password is refused;
//   - down leaves no BMC bridge.
func TestUpBMCNetwork(t *testing.T) {
	testenv.Libvirt(t)
	for _, tc := range []struct {
		name, mode, lab string
		port            int
		bmcNet          string
		kind, prov      string // bmc.kind and network.provisioningNetwork ("": the defaults)
		// links: the lab's own bridges and veth pair (ownLinks; lbni
		// keeps the defaults: baremetal, provisioning, bmlab-veth0), so
		// no two labs share a link in labci.
		links     string
		realAgent bool
	}{
		{"lbn4", ipimode.Name, `  machineNetwork: 10.198.64.0/24
  dhcpRange: {start: 10.198.64.20, end: 10.198.64.60}
  apiVIP: 10.198.64.5
  ingressVIP: 10.198.64.4
  masters: {personalities: [idrac9]}
  workers: {count: 0}
`, 18764, "10.198.164.0/24", "", "", ownLinks("lbn4", false), true},
		{"lbni", ipimode.Name, `  machineNetwork: 10.198.66.0/24
  dhcpRange: {start: 10.198.66.20, end: 10.198.66.60}
  apiVIP: 10.198.66.5
  ingressVIP: 10.198.66.4
  masters: {personalities: [ilo6]}
  workers: {count: 0}
`, 18766, "10.198.166.0/24", ocp.BMCRedfish, ocp.ProvisioningManaged, "", true},
		{"lbnu", ipimode.Name, `  machineNetwork: 10.198.67.0/24
  dhcpRange: {start: 10.198.67.20, end: 10.198.67.60}
  apiVIP: 10.198.67.5
  ingressVIP: 10.198.67.4
  provisioningNetworkCIDR: 172.23.0.0/24
  workers: {count: 0}
`, 18767, "10.198.167.0/24", ocp.BMCIPMI, ocp.ProvisioningUnmanaged, ownLinks("lbnu", true), false},
		{"lbn6", agentmode.Name, `  ipFamily: v6
  machineNetwork: fd2e:6f44:5dd8:c964::/120
  dhcpRange: {start: "fd2e:6f44:5dd8:c964::20", end: "fd2e:6f44:5dd8:c964::60"}
  apiVIP: "fd2e:6f44:5dd8:c964::5"
  ingressVIP: "fd2e:6f44:5dd8:c964::4"
  masters: {count: 2}
  workers: {count: 0}
  fencing: true
  agent: {staticIPs: true}
  installer: INSTALLER
`, 18765, "fd2e:6f44:5dd8:c965::/120", "", "", ownLinks("lbn6", false), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The four labs run at once: each has its own name, machine,
			// BMC and provisioning networks, Redfish port, bridges and
			// veth pair in labci, its own Ironic in namespaces of its own,
			// and its own files (at once 293 s, one after another 550 s:
			// docs/tests.md; CI's -parallel 4 lets all four run).
			t.Parallel()
			upBMCNetwork(t, tc.name, tc.mode, tc.lab, tc.port, tc.bmcNet, tc.kind, tc.prov, tc.links, tc.realAgent)
		})
	}
}

func upBMCNetwork(t *testing.T, name, mode, cluster string, port int, bmcNet, kind, prov, links string, realAgent bool) {
	dir := testenv.QemuDir(t)
	cfg := labFile(t, dir, name, port)
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lab := string(b)
	cluster = strings.ReplaceAll(cluster, "INSTALLER", installertest.Installer(t))
	lab = lab[:strings.Index(lab, "  machineNetwork:")] + cluster + lab[strings.Index(lab, "  bmc:"):]
	lab = strings.Replace(lab, "  bmc: {", "  bmc: {network: '"+bmcNet+"', ", 1)
	// Small masters, but 1.5 GiB each (not the tiny profile's 512 MiB:
	// masterMiB) with a 4 GiB disk (the least ironic-python-agent takes
	// for a root device); qemu touches only what the guest uses, and the
	// disks are sparse.
	size := fmt.Sprintf("vcpus: 1, memoryMiB: %d, diskGiB: 4", masterMiB)
	if strings.Contains(lab, "  masters: {") {
		lab = strings.Replace(lab, "  masters: {", "  masters: {"+size+", ", 1)
	} else {
		lab = strings.Replace(lab, "  workers: {", "  masters: {"+size+"}\n  workers: {", 1)
	}
	var network []string
	if prov != "" {
		network = append(network, "provisioningNetwork: "+prov)
	}
	if links != "" {
		network = append(network, links)
	}
	if len(network) > 0 {
		lab = strings.Replace(lab, "cluster:\n", "network: {"+strings.Join(network, ", ")+"}\ncluster:\n", 1)
	}
	if kind != "" {
		lab = strings.Replace(lab, "  bmc: {", "  bmc: {kind: "+kind+", ", 1)
	}
	ipmi := kind == ocp.BMCIPMI
	if err := os.WriteFile(cfg, []byte(lab), 0o644); err != nil {
		t.Fatal(err)
	}
	common := []string{"-f", cfg, "--netns", "labci", "--vbmcd", testenv.Binary(t, "vbmcd"), "--mode", mode}
	t.Cleanup(func() { _, _ = labctlRun(t, append([]string{"down"}, common...)...) })
	began := time.Now()
	out, err := labctlRun(t, append([]string{"up", "--until", "install-config"}, common...)...)
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	t.Logf("up --until install-config took %s", time.Since(began).Round(time.Second))
	for _, want := range []string{"✓ network", "✓ nodes", "✓ bmcs", "✓ install-config"} {
		if !strings.Contains(out, want) {
			t.Errorf("up output lacks %q", want)
		}
	}
	p := resolvePlan(t, cfg, mode)
	// The lab's bridges: its own (ownLinks) or the defaults.
	node, provBridge := labconfig.BaremetalBridge, labconfig.ProvisioningBridge
	if links != "" {
		node, provBridge = "bm-"+name, "pr-"+name
	}
	if p.Network.NodeNetwork != node || (prov != "" && p.Cluster.ProvisioningBridge != provBridge) {
		t.Fatalf("plan: node network %q, provisioning bridge %q; want %s and %s", p.Network.NodeNetwork, p.Cluster.ProvisioningBridge, node, provBridge)
	}
	bn := netip.MustParsePrefix(bmcNet)
	if p.BMC.Network != bn || p.BMC.Bridge == "" {
		t.Fatalf("plan: BMC network %s on %q", p.BMC.Network, p.BMC.Bridge)
	}

	// install-config: one address per BMC on the BMC network, no port.
	var ic ipi.InstallConfig
	if err := yaml.Unmarshal([]byte(readFile(t, filepath.Join(dir, "install", "install-config.yaml"))), &ic); err != nil {
		t.Fatal(err)
	}
	hosts := ic.Platform.BareMetal.Hosts
	if len(hosts) != len(p.Nodes) {
		t.Fatalf("install-config has %d hosts, the plan %d nodes", len(hosts), len(p.Nodes))
	}
	seen := map[string]bool{}
	for i, h := range hosts {
		n, _ := p.Node(h.Name)
		host := n.BMC.Addr.String()
		if n.BMC.Addr.Is6() {
			host = "[" + host + "]"
		}
		want := "redfish-virtualmedia+https://" + host + "/redfish/v1/Systems/" + n.UUID
		switch {
		case n.BMC.Personality == "idrac9":
			// A Dell's, as the installer names an iDRAC (lbn4's master-0).
			want = "idrac-virtualmedia+https://" + host + "/redfish/v1/Systems/System.Embedded.1"
		case n.BMC.Personality == "ilo6" && kind == ocp.BMCRedfish:
			// An HPE's on the provisioning network: the iLO's own
			// driver (lbni's master-0).
			want = "ilo5://" + host
		case kind == ocp.BMCRedfish:
			want = "redfish+https://" + host + "/redfish/v1/Systems/" + n.UUID
		case ipmi:
			want = "ipmi://" + host
		}
		if !bn.Contains(n.BMC.Addr) || n.BMC.Addr == p.BMC.HostAddress || seen[host] || h.BMC.Address != want {
			t.Errorf("host %d %s: BMC address %s (its BMC at %s), want %s, one address each on %s", i, h.Name, h.BMC.Address, n.BMC.Addr, want, bn)
		}
		seen[host] = true
	}
	if fc := ic.ControlPlane.Fencing; mode == agentmode.Name {
		if fc == nil || len(fc.Credentials) != 2 {
			t.Fatalf("install-config's fencing: %+v", fc)
		}
		for _, c := range fc.Credentials {
			n, _ := p.Node(c.HostName)
			if want := "redfish+https://[" + n.BMC.Addr.String() + "]/redfish/v1/Systems/" + n.UUID; c.Address != want {
				t.Errorf("fencing credential of %s: %s, want %s", c.HostName, c.Address, want)
			}
		}
		var ac agent.Config
		if err := yaml.Unmarshal([]byte(readFile(t, filepath.Join(dir, "install", "agent-config.yaml"))), &ac); err != nil || len(ac.Hosts) != 2 {
			t.Errorf("agent-config: %v, %d hosts", err, len(ac.Hosts))
		}
	}

	// From the machine network, as a node: every BMC, routed through the
	// lab host.
	ns, probeAddr := machineNetworkProbe(t, p)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(readFile(t, p.Paths.CACert))) {
		t.Fatal("lab CA unreadable")
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: netplumb.DialContextIn(ns), TLSClientConfig: &tls.Config{RootCAs: pool}}}
	for _, n := range p.Nodes {
		host := n.BMC.Addr.String()
		if n.BMC.Addr.Is6() {
			host = "[" + host + "]"
		}
		var members []string
		if !testenv.WaitFor(20*time.Second, func() bool {
			members, err = systems(hc, "https://"+host+"/redfish/v1/Systems", p.BMC.Username, p.BMC.Password)
			return err == nil
		}) || len(members) != 1 || "https://"+host+members[0] != n.BMC.SystemURL {
			t.Errorf("%s: https://%s/redfish/v1/Systems from the machine network: %v, %v; want its System alone", n.Name, host, members, err)
		}
		if ipmi {
			out, err := exec.Command("ip", "netns", "exec", ns, testenv.Command(t, "ipmitool"), "-I", "lanplus",
				"-H", n.BMC.Addr.String(), "-U", n.BMC.Username, "-P", n.BMC.Password, "chassis", "power", "status").CombinedOutput()
			if err != nil || !strings.Contains(string(out), "Chassis Power is off") {
				t.Errorf("%s: ipmitool -H %s (port 623) from the machine network: %v: %s", n.Name, n.BMC.Addr, err, out)
			}
		}
	}

	// Ironic, on the machine network as in the bootstrap VM, drives every
	// node through the BMC install-config names for it.
	if prov != "" {
		managedNICs(t, common, p)
	}
	ironicDrives(t, ns, probeAddr, ic, p, realAgent, common)

	// The fence agents of a two-node cluster, from the machine network,
	// with the fencing credentials install-config carries (and the lab's
	// CA): each master off and on, a wrong password refused.
	if mode == agentmode.Name {
		fenceMasters(t, ns, p, ic.ControlPlane.Fencing.Credentials)
	}

	// net check, a drift, repair.
	if out, err := labctlRun(t, append([]string{"net", "check"}, common...)...); err != nil {
		t.Errorf("net check right after up = %v:\n%s", err, out)
	}
	gone := netip.PrefixFrom(p.Nodes[1].BMC.Addr, bn.Bits()).String()
	netnstest.IP(t, "-n", "labci", "addr", "del", gone, "dev", p.BMC.Bridge)
	if out, err := labctlRun(t, append([]string{"net", "check"}, common...)...); err == nil || !strings.Contains(out, p.BMC.Bridge) {
		t.Errorf("net check with %s taken off %s = %v, want it reported:\n%s", gone, p.BMC.Bridge, err, out)
	}
	if out, err := labctlRun(t, append([]string{"net", "repair"}, common...)...); err != nil {
		t.Errorf("net repair = %v:\n%s", err, out)
	}
	if out, err := labctlRun(t, append([]string{"net", "check"}, common...)...); err != nil {
		t.Errorf("net check after repair = %v:\n%s", err, out)
	}

	if _, err := labctlRun(t, append([]string{"down"}, common...)...); err != nil {
		t.Fatalf("down: %v", err)
	}
	if d := p.Network.ProvisioningDHCP; d != nil {
		if out, _ := exec.Command("pgrep", "-f", d.ConfigFile).CombinedOutput(); strings.TrimSpace(string(out)) != "" {
			t.Errorf("down left the provisioning DHCP server: pid %s", out)
		}
	}
	if out, err := exec.Command("ip", "-n", "labci", "link", "show", p.BMC.Bridge).CombinedOutput(); err == nil {
		t.Errorf("down left the BMC bridge:\n%s", out)
	}
}

// ownLinks is a lab file's network entries that give lab bridges and a
// veth pair of its own (bm-LAB, with prov pr-LAB for its provisioning
// network, and LAB-veth0 to its NAT bridge) instead of the defaults
// (baremetal, provisioning, bmlab-veth0), which two labs up at once in one
// namespace cannot share (up refuses a link of another lab's).
func ownLinks(lab string, prov bool) string {
	bridges := "{name: bm-" + lab + "}"
	if prov {
		bridges += ", {name: pr-" + lab + "}"
	}
	return fmt.Sprintf("bridges: [%s], veths: [{name: %s-veth0, master: bm-%s, peer: %s-veth1, peerMaster: virbr0}]", bridges, lab, lab, lab)
}

// systems lists a Redfish service's Systems members.
func systems(hc *http.Client, url, user, pass string) ([]string, error) {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.SetBasicAuth(user, pass)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s", resp.Status)
	}
	var coll struct {
		Members []struct {
			ID string `json:"@odata.id"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&coll); err != nil {
		return nil, err
	}
	var out []string
	for _, m := range coll.Members {
		out = append(out, m.ID)
	}
	return out, nil
}

// machineNetworkProbe plugs a throwaway namespace into the lab's NAT bridge
// (in labci) as a node is: the last address of the machine network's
// first family, its default route the lab host's address there.
func machineNetworkProbe(t *testing.T, p *plan.Plan) (string, netip.Addr) {
	t.Helper()
	ns, _ := netnstest.New(t)
	port := "lbp" + netnstest.Rand(3)
	netnstest.IP(t, "-n", "labci", "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "-n", "labci", "link", "del", port).Run() })
	if out, err := exec.Command("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.eth0.accept_dad=0").CombinedOutput(); err != nil {
		t.Fatalf("sysctl: %v: %s", err, out)
	}
	netnstest.IP(t, "-n", "labci", "link", "set", port, "master", p.Network.NAT.Bridge, "up")
	mn := p.Cluster.MachineNetwork
	last := mn.Addr()
	for mn.Contains(last.Next()) {
		last = last.Next()
	}
	if last.Is4() {
		last = last.Prev() // not the broadcast address
	}
	netnstest.IP(t, "-n", ns, "addr", "add", netip.PrefixFrom(last, mn.Bits()).String(), "dev", "eth0", "nodad")
	netnstest.IP(t, "-n", ns, "link", "set", "eth0", "up")
	netnstest.IP(t, "-n", ns, "route", "add", "default", "via", p.Cluster.HostAddress.String())
	return ns, last
}

// fenceMasters runs Debian's fence_redfish (without a systems URI: the
// BMC's one system) and fence_ipmilan (lanplus, port 623) against each
// master's BMC address in creds, from namespace ns: status, on, off, with
// libvirt's own view of the domain checked after each; then a wrong
// password, refused, the domain's state unchanged.
func fenceMasters(t *testing.T, ns string, p *plan.Plan, creds []ipi.FencingCredential) {
	fenceRedfish, fenceIPMI := testenv.Command(t, "fence_redfish"), testenv.Command(t, "fence_ipmilan")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REQUESTS_CA_BUNDLE=") && !strings.HasPrefix(kv, "CURL_CA_BUNDLE=") && !strings.HasPrefix(kv, "SSL_CERT_") {
			env = append(env, kv)
		}
	}
	env = append(env, "REQUESTS_CA_BUNDLE="+p.Paths.CACert) // the cluster trusts the lab's CA
	run := func(argv []string, action string) (string, error) {
		cmd := exec.Command("ip", append([]string{"netns", "exec", ns}, append(argv, "--action", action)...)...)
		cmd.Env = env
		b, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(b)), err
	}
	domstate := func(name string) string {
		out, _ := virsh(t, "domstate", name)
		return strings.TrimSpace(out)
	}
	for _, c := range creds {
		n, _ := p.Node(c.HostName)
		if !strings.HasPrefix(c.Address, "redfish+https://") || c.Username == "" {
			t.Fatalf("fencing credential of %s: %+v", c.HostName, c)
		}
		addr := n.BMC.Addr.String()
		// fence_redfish 4.12 writes https://IP:PORT/…: an IPv6 address
		// goes in brackets (it splits host and port only at a single
		// colon). fence_ipmilan hands it to ipmitool as it is.
		rfAddr := addr
		if n.BMC.Addr.Is6() {
			rfAddr = "[" + addr + "]"
		}
		agents := map[string]func(pass string) []string{
			"fence_redfish": func(pass string) []string {
				return []string{fenceRedfish, "--ip", rfAddr, "--username", c.Username, "--password", pass, "--ssl-secure"}
			},
			"fence_ipmilan": func(pass string) []string {
				return []string{fenceIPMI, "--ip", addr, "--username", c.Username, "--password", pass, "--lanplus"}
			},
		}
		for _, name := range []string{"fence_redfish", "fence_ipmilan"} {
			argv := agents[name]
			for _, s := range []struct{ action, output, state string }{
				{"status", "Status: OFF", "shut off"},
				{"on", "Success: Powered ON", "running"},
				{"status", "Status: ON", "running"},
				{"off", "Success: Powered OFF", "shut off"},
			} {
				got, err := run(argv(c.Password), s.action)
				// A fence agent's status exits 2 for off (EC_STATUS).
				wantErr := s.action == "status" && s.state == "shut off"
				if ee, ok := err.(*exec.ExitError); (wantErr && (!ok || ee.ExitCode() != 2)) || (!wantErr && err != nil) || !strings.Contains(got, s.output) {
					t.Fatalf("%s --action %s at %s (%s): %v\n%s", name, s.action, addr, n.Name, err, got)
				}
				var st string
				if !testenv.WaitFor(60*time.Second, func() bool { st = domstate(n.Name); return st == s.state }) {
					t.Errorf("after %s --action %s: libvirt says %s is %q, want %q", name, s.action, n.Name, st, s.state)
				}
			}
			if got, err := run(argv("wrong-password"), "on"); err == nil {
				t.Errorf("%s with a wrong password succeeded:\n%s", name, got)
			}
			if st := domstate(n.Name); st != "shut off" {
				t.Errorf("after %s with a wrong password %s is %q, want shut off", name, n.Name, st)
			}
		}
	}
}

// ironicDrives starts Ironic in namespace ns at addr and has it enroll every
// host of install-config with its BMC address, credentials and the CA
// install-config carries, manage it (Ironic checks power and management
// through the BMC) and power it on and off; libvirt's view of the domain
// is checked after each; it inspects the Redfish hosts through their BMCs.
// With realAgent (an IPv4 Redfish lab), Ironic is 29 with fast_track, as the
// bootstrap VM's is, and it takes the first host through the real agent
// (the deploy ramdisk of hack/build-ipa-ramdisk.sh, booted by virtual
// media): inspection (its CPUs, memory, disk and boot MAC as the lab made
// them), automated cleaning and a deploy of the OS image, which the host
// then boots from its disk (its serial log shows the image's lines) and
// which the host's disk holds, as read from the lab host. Otherwise it is
// Ironic 21.4; on a lab with a provisioning network (Managed, Unmanaged)
// it runs at bootstrapProvisioningIP with the bootstrap's network boot
// (bootstrapServices), and the first host boots the same agent through
// its provisioning NIC for automated cleaning (netBootsAgent). (BIOS and
// firmware through BMCs of their own: TestIronicSim, internal/vbmcd.)
func ironicDrives(t *testing.T, ns string, addr netip.Addr, ic ipi.InstallConfig, p *plan.Plan, realAgent bool, common []string) {
	t.Helper()
	o := ironictest.Options{Namespace: ns, Host: addr.String()}
	netBoot := p.Cluster.ProvisioningNetwork != ocp.ProvisioningDisabled
	if realAgent {
		// With the vendors' drivers: a Dell host is enrolled as Metal3's
		// baremetal-operator enrolls idrac-virtualmedia://, an HPE host
		// as it enrolls ilo5://.
		o.Release = ironictest.Ironic29
		o.Config = ironictest.AgentConfig(true)
		o.Vendors, o.VendorOverlay = true, true
	} else if netBoot {
		o.Config = ironictest.AgentConfig(false)
	}
	if netBoot {
		bootstrapServices(t, ns, p, &o)
	}
	ir := ironictest.Start(t, o)
	var ramdisk map[string]any
	if realAgent || netBoot {
		ramdisk = ir.ServeRamdisk(ironictest.DeployRamdisk(t))
	}
	ca := filepath.Join(t.TempDir(), "bmc-verify-ca.pem")
	if err := os.WriteFile(ca, []byte(ic.Platform.BareMetal.BMCVerifyCA), 0o644); err != nil || ic.Platform.BareMetal.BMCVerifyCA == "" {
		t.Fatalf("install-config's bmcVerifyCA: %v (%d bytes)", err, len(ic.Platform.BareMetal.BMCVerifyCA))
	}
	var names, inspect []string // inspect: the Redfish hosts Ironic inspects through their BMCs
	agentHost := ""
	for i, h := range ic.Platform.BareMetal.Hosts {
		spec := ironictest.NodeSpec{Name: h.Name}
		switch a := h.BMC.Address; {
		case strings.HasPrefix(a, "ipmi://"):
			host := strings.Trim(strings.TrimPrefix(a, "ipmi://"), "[]")
			spec.Driver = "ipmi"
			spec.DriverInfo = map[string]any{"ipmi_address": host, "ipmi_username": h.BMC.Username, "ipmi_password": h.BMC.Password}
			spec.Interfaces = map[string]string{"management_interface": "ipmitool", "power_interface": "ipmitool"}
		case strings.HasPrefix(a, "ilo5://"):
			// The baremetal-operator's ilo5 (pkg/hardwareutils/bmc/ilo5.go):
			// the ilo5 hardware type, network boot by ilo-ipxe, the ilo5
			// RAID interface, the type's defaults for the rest (ilo5
			// management, ilo power: proliantutils); bmcVerifyCA as the
			// installer gives its Ironic the CA.
			spec.Driver = "ilo5"
			spec.DriverInfo = map[string]any{"ilo_address": strings.Trim(strings.TrimPrefix(a, "ilo5://"), "[]"),
				"ilo_username": h.BMC.Username, "ilo_password": h.BMC.Password, "ilo_verify_ca": ca}
			spec.Interfaces = map[string]string{"boot_interface": "ilo-ipxe", "raid_interface": "ilo5", "deploy_interface": "direct"}
		case strings.HasPrefix(a, "redfish-virtualmedia+https://"), strings.HasPrefix(a, "idrac-virtualmedia+https://"), strings.HasPrefix(a, "redfish+https://"):
			scheme, rest, _ := strings.Cut(a, "+")
			i := strings.Index(rest, "/redfish/")
			spec.Driver = "redfish"
			spec.DriverInfo = map[string]any{"redfish_address": rest[:i], "redfish_system_id": rest[i:],
				"redfish_username": h.BMC.Username, "redfish_password": h.BMC.Password, "redfish_verify_ca": ca}
			spec.Interfaces = map[string]string{"boot_interface": "redfish-virtual-media", "deploy_interface": "direct",
				"management_interface": "redfish", "power_interface": "redfish", "inspect_interface": "redfish"}
			if scheme == ocp.BMCRedfish {
				// The baremetal-operator's redfish://: network boot.
				spec.Interfaces["boot_interface"] = "ipxe"
			}
			if scheme == "idrac-virtualmedia" {
				// The baremetal-operator's idrac-virtualmedia: the idrac
				// hardware type, Dell's OEM through sushy-oem-idrac.
				spec.Driver = "idrac"
				spec.Interfaces = map[string]string{"boot_interface": "idrac-redfish-virtual-media", "deploy_interface": "direct",
					"management_interface": "idrac-redfish", "power_interface": "idrac-redfish", "inspect_interface": "idrac-redfish"}
			}
		default:
			t.Fatalf("%s: BMC address %s", h.Name, a)
		}
		spec.Properties = map[string]any{"capabilities": "boot_mode:uefi"} // the lab's nodes are UEFI
		switch {
		case realAgent && i == 0:
			agentHost = h.Name
			spec.Interfaces["inspect_interface"] = "agent"
			if netBoot {
				// Booted through its provisioning NIC: iPXE finds its
				// configuration by the boot NIC's port from the start.
				spec.MACs = []string{h.BootMACAddress}
			}
			for k, v := range ramdisk {
				spec.DriverInfo[k] = v
			}
			// The image from enrollment on: see ironictest's Patch on
			// Ironic 29.
			image := testenv.OSImage(t)
			spec.InstanceInfo = ironictest.ImageInstanceInfo(t, ir.Serve("/images/os-disk.img", image), image)
		case spec.Driver == "redfish":
			inspect = append(inspect, h.Name)
			spec.MACs = []string{h.BootMACAddress}
		case spec.Driver == "idrac":
			// Another Dell host than the agent's: managed and powered.
			spec.MACs = []string{h.BootMACAddress}
		case netBoot && i == 0:
			// Booted through its provisioning NIC (netBootsAgent).
			agentHost = h.Name
			spec.MACs = []string{h.BootMACAddress}
			spec.Interfaces["boot_interface"] = "ipxe"
			spec.Interfaces["deploy_interface"] = "direct"
			for k, v := range ramdisk {
				spec.DriverInfo[k] = v
			}
		default:
			spec.MACs = []string{h.BootMACAddress}
		}
		if _, err := ir.Enroll(spec); err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	ir.Step(t, "manage", "manage", "manageable", 2*time.Minute, names...)
	// Redfish inspection (the redfish inspect interface) reads each
	// Redfish host's CPUs and memory from its BMC as the lab made them.
	if len(inspect) > 0 {
		ir.Step(t, "Redfish inspection", "inspect", "manageable", 2*time.Minute, inspect...)
		for _, n := range inspect {
			node, err := ir.Node(n)
			if err != nil {
				t.Fatal(err)
			}
			// sushy reads TotalSystemMemoryGiB as whole GiB.
			pn, _ := p.Node(n)
			if mem, cpus := fmt.Sprint(node.Properties["memory_mb"]), fmt.Sprint(node.Properties["cpus"]); mem != fmt.Sprint(pn.MemoryMiB/1024*1024) || cpus != fmt.Sprint(pn.VCPUs) {
				t.Errorf("%s inspected: memory_mb %s, cpus %s; want %d and %d (properties %v)", n, mem, cpus, pn.MemoryMiB/1024*1024, pn.VCPUs, node.Properties)
			}
		}
	}
	for _, s := range []struct{ power, state string }{{"power on", "running"}, {"power off", "shut off"}} {
		for _, n := range names {
			if err := ir.Power(n, s.power); err != nil {
				t.Fatal(err)
			}
			if _, err := ir.WaitPower(s.power, n, s.power, 2*time.Minute); err != nil {
				t.Fatal(err)
			}
			var st string
			if !testenv.WaitFor(60*time.Second, func() bool { out, _ := virsh(t, "domstate", n); st = strings.TrimSpace(out); return st == s.state }) {
				t.Errorf("Ironic's %s of %s: libvirt says %q, want %q", s.power, n, st, s.state)
			}
		}
	}
	// Ironic forgets the nodes when done: its power sync would otherwise
	// put back a power state the fence agents change. (A deployed node
	// goes into maintenance first: Ironic deletes no active node else.)
	defer func() {
		for _, n := range names {
			if n == agentHost {
				if err := ir.Patch(n, map[string]any{"op": "replace", "path": "/maintenance", "value": true}); err != nil {
					t.Errorf("maintenance for %s: %v", n, err)
				}
			}
			if err := ir.Do(http.MethodDelete, "/v1/nodes/"+n, nil, nil); err != nil {
				t.Errorf("delete %s from Ironic: %v", n, err)
			}
		}
	}()
	switch {
	case agentHost != "" && netBoot && realAgent:
		// Inspected, cleaned and deployed through its provisioning NIC,
		// then booted from its disk.
		h := hostNamed(ic, agentHost)
		agentDeploys(t, ir, agentHost, h, p)
		// Twice: for inspection, and again for cleaning (the iLO's
		// ilo-ipxe powers the node off as it prepares the ramdisk for
		// cleaning, prepare_node_for_deploy, fast_track or not); the
		// agent then stays up through the deploy (fast_track).
		if got := testenv.Count(filepath.Join(p.Paths.Logs, agentHost+".serial.log"), ironictest.AgentBootLine); got != 2 {
			t.Errorf("%s: the agent booted %d times through its provisioning NIC, want 2 (inspection, cleaning)", agentHost, got)
		}
		provisioningLease(t, ir, h, p, common)
		if node, _ := ir.Node(agentHost); node.Driver == "ilo5" {
			iloDrove(t, ir, agentHost, h)
		}
	case agentHost != "" && netBoot:
		netBootsAgent(t, ir, hostNamed(ic, agentHost), p, common)
	case agentHost != "":
		agentDeploys(t, ir, agentHost, hostNamed(ic, agentHost), p)
		if node, _ := ir.Node(agentHost); node.Driver == "idrac" {
			// Each virtual CD boot (inspection, cleaning) was set through
			// Dell's OEM: sushy-oem-idrac says so once the SCP import's
			// job completed.
			const oem = "Set boot device to VirtualMediaType.CD via Dell OEM magic spell"
			if got := strings.Count(ir.Log(), oem); got < 2 {
				t.Errorf("%s (idrac): Ironic's log says %q %d times, want once a boot of the agent (2)", agentHost, oem, got)
			}
		}
	}
}

// bootstrapServices puts the bootstrap VM's provisioning services where the
// installer runs them on a provisioning network: Ironic listens at
// bootstrapProvisioningIP (bootstrapOnProvisioning), and Debian's dnsmasq
// with ironic-image's configuration is, on a Managed network, the DHCP
// server of provisioningDHCPRange and, on an Unmanaged one, TFTP only (the
// lab's own DHCP server sends the nodes to Ironic's HTTP server on
// Metal3's port 6180). An IPv6 prefix for router advertisements (not
// ironic-image's) ends iPXE's IPv6 autoconfiguration at once (else it
// waits about 16 s each boot).
func bootstrapServices(t *testing.T, ns string, p *plan.Plan, o *ironictest.Options) {
	t.Helper()
	c := p.Cluster
	bootstrapOnProvisioning(t, ns, p)
	netnstest.IP(t, "-n", ns, "addr", "add", "fd5e:b1ab:6600::fe/64", "dev", "eth1", "nodad")
	o.Host = c.BootstrapProvisioningIP.String()
	o.PXE = &ironictest.PXE{Interface: "eth1", Subnet: c.ProvisioningNetworkCIDR, RAPrefix: netip.MustParsePrefix("fd5e:b1ab:6600::/64")}
	if c.ProvisioningNetwork == ocp.ProvisioningUnmanaged {
		o.HTTPPort = plan.ProvisioningHTTPPort
		o.PXE.TFTPOnly = true
	} else {
		o.PXE.Start, o.PXE.End = c.ProvisioningDHCPRange.Start, c.ProvisioningDHCPRange.End
	}
}

// bootstrapOnProvisioning plugs namespace ns into the lab's provisioning
// bridge (in labci) as the bootstrap VM's second NIC is: eth1, at the
// bootstrapProvisioningIP.
func bootstrapOnProvisioning(t *testing.T, ns string, p *plan.Plan) {
	t.Helper()
	c := p.Cluster
	port := "lbq" + netnstest.Rand(3)
	netnstest.IP(t, "-n", "labci", "link", "add", port, "type", "veth", "peer", "name", "eth1", "netns", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "-n", "labci", "link", "del", port).Run() })
	if out, err := exec.Command("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.eth1.accept_dad=0").CombinedOutput(); err != nil {
		t.Fatalf("sysctl: %v: %s", err, out)
	}
	netnstest.IP(t, "-n", "labci", "link", "set", port, "master", c.ProvisioningBridge, "up")
	netnstest.IP(t, "-n", ns, "addr", "add", netip.PrefixFrom(c.BootstrapProvisioningIP, c.ProvisioningNetworkCIDR.Bits()).String(), "dev", "eth1", "nodad")
	netnstest.IP(t, "-n", ns, "link", "set", "eth1", "up")
}

// netBootsAgent: Ironic provides host h (automated cleaning), which boots
// the real agent through its provisioning NIC: the ramdisk's init shows on
// its serial console once, and its boot MAC got an address of
// provisioningDHCPRange (provisioningLease).
func netBootsAgent(t *testing.T, ir *ironictest.Ironic, h ipi.Host, p *plan.Plan, common []string) {
	t.Helper()
	c := p.Cluster
	serial := filepath.Join(p.Paths.Logs, h.Name+".serial.log")
	ir.Step(t, "provide (automated cleaning, ipmi, ipxe, "+c.ProvisioningNetwork+" provisioning network)", "provide", "available", 15*time.Minute, h.Name)
	if got := testenv.Count(serial, ironictest.AgentBootLine); got != 1 {
		t.Errorf("%s: the agent booted %d times for cleaning, want 1", h.Name, got)
	}
	provisioningLease(t, ir, h, p, common)
}

// provisioningLease: host h's boot MAC got an address of
// provisioningDHCPRange from the network's DHCP server: the bootstrap's
// dnsmasq on a Managed network; on an Unmanaged one the lab's own (which
// status says runs), the bootstrap's answering no DHCP.
func provisioningLease(t *testing.T, ir *ironictest.Ironic, h ipi.Host, p *plan.Plan, common []string) {
	t.Helper()
	c := p.Cluster
	leased := func(log, iface string) bool {
		for _, a := range regexp.MustCompile(`DHCPACK\(`+regexp.QuoteMeta(iface)+`\) (\S+) (\S+)`).FindAllStringSubmatch(readFile(t, log), -1) {
			if ip, err := netip.ParseAddr(a[1]); err == nil && strings.EqualFold(a[2], h.BootMACAddress) && c.ProvisioningDHCPRange.Contains(ip) {
				return true
			}
		}
		return false
	}
	log, iface := ir.DnsmasqLog, "eth1"
	if d := p.Network.ProvisioningDHCP; c.ProvisioningNetwork == ocp.ProvisioningUnmanaged {
		if d == nil {
			t.Fatal("an Unmanaged lab without its DHCP server")
		}
		log, iface = d.Log, c.ProvisioningBridge
		if out, err := labctlRun(t, append([]string{"status"}, common...)...); err != nil || !strings.Contains(out, "provisioning DHCP server (Unmanaged): running (pid") {
			t.Errorf("status = %v, want the provisioning DHCP server running:\n%s", err, out)
		}
		if strings.Contains(readFile(t, ir.DnsmasqLog), "DHCPACK") {
			t.Errorf("the bootstrap's dnsmasq (TFTP only) answered DHCP:\n%s", readFile(t, ir.DnsmasqLog))
		}
	}
	if !leased(log, iface) {
		t.Errorf("%s (boot MAC %s) got no lease of %s on the provisioning network; %s:\n%s", h.Name, h.BootMACAddress, c.ProvisioningDHCPRange, log, readFile(t, log))
	}
}

// iloDrove: the iLO's own driver drove host name (enrolled from h's
// ilo5:// address): proliantutils posted RIBCL to the host's BMC, among it
// the boot device settings of its network boots and of its boot from disk
// (a node driven by the generic redfish driver posts none), and the BMC
// refused none of it.
func iloDrove(t *testing.T, ir *ironictest.Ironic, name string, h ipi.Host) {
	t.Helper()
	host := strings.TrimPrefix(h.BMC.Address, "ilo5://")
	posts := regexp.MustCompile(`POST https://`+regexp.QuoteMeta(host)+`(:443)?/ribcl with request data: .*`).FindAllString(ir.Log(), -1)
	boots := 0
	for _, p := range posts {
		if strings.Contains(p, "SET_ONE_TIME_BOOT") || strings.Contains(p, "SET_PERSISTENT_BOOT") {
			boots++
		}
	}
	if len(posts) == 0 || boots < 2 {
		t.Errorf("%s (ilo5): Ironic's log has %d RIBCL posts to https://%s/ribcl, %d of them setting the boot device; want the iLO driver's (2 or more boot settings: the network boot, the disk)", name, len(posts), host, boots)
	}
	// Every RIBCL command the driver sent was carried out: proliantutils
	// logs each answer whose STATUS is not 0 so (ribcl.py, _parse_output).
	if refused := regexp.MustCompile(`Got invalid response with message: .*`).FindAllString(ir.Log(), -1); len(refused) > 0 {
		t.Errorf("%s (ilo5): the BMC refused %d RIBCL commands the iLO driver sent:\n%s", name, len(refused), strings.Join(refused, "\n"))
	}
}

// managedNICs: the nodes of a lab with a provisioning network are defined
// with two NICs, the provisioning one first (its MAC the boot MAC), and
// labctl status says so.
func managedNICs(t *testing.T, common []string, p *plan.Plan) {
	t.Helper()
	for _, n := range p.Nodes {
		out, err := virsh(t, "domiflist", n.Name)
		if err != nil {
			t.Fatalf("domiflist %s: %v\n%s", n.Name, err, out)
		}
		var got []string
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) == 5 && strings.Count(f[4], ":") == 5 {
				got = append(got, f[2]+" "+f[4]) // source and MAC
			}
		}
		want := []string{p.Cluster.ProvisioningBridge + " " + n.BootMAC, p.Network.NodeNetwork + " " + n.MAC}
		if strings.Join(got, ", ") != strings.Join(want, ", ") || n.BootMAC == n.MAC {
			t.Errorf("%s's NICs as libvirt defines them: %q, want %q", n.Name, got, want)
		}
	}
	out, err := labctlRun(t, append([]string{"status"}, common...)...)
	nics := "enp1s0=" + p.Cluster.ProvisioningBridge + ",enp2s0=" + p.Network.NodeNetwork
	if err != nil || !strings.Contains(out, "NICS") || !strings.Contains(out, nics) || !strings.Contains(out, p.Nodes[0].BootMAC) {
		t.Errorf("status = %v, want each node's NICs and its boot MAC:\n%s", err, out)
	}
}

// masterMiB is the masters' memory in these labs: the deploy ramdisk's
// root (240 MB, in memory) and the agent fit, and sushy 4.3 reads
// TotalSystemMemoryGiB as an integer, so Redfish inspection of a machine
// with less than 1 GiB finds no memory and fails.
const masterMiB = 1536

// agentDeploys has Ironic take host name through the real agent:
// inspection, automated cleaning (fast_track: the agent stays up for the
// deploy), the deploy of the OS image; the host then boots its disk.
func agentDeploys(t *testing.T, ir *ironictest.Ironic, name string, h ipi.Host, p *plan.Plan) {
	t.Helper()
	n, _ := p.Node(name)
	serial := filepath.Join(p.Paths.Logs, name+".serial.log")
	inits := testenv.WatchLines(t, serial, ironictest.AgentBootLine)
	ir.Step(t, "inspection by the agent", "inspect", "manageable", 15*time.Minute, name)
	inv, err := ir.Inventory(name)
	if err != nil {
		t.Fatal(err)
	}
	in := inv.Inventory
	var macs []string
	for _, i := range in.Interfaces {
		macs = append(macs, strings.ToLower(i.MACAddress))
	}
	// The plan's node, as up made it: the lab's own sizes.
	if in.CPU.Count != int(n.VCPUs) || in.Memory.PhysicalMB != int(n.MemoryMiB) || len(in.Disks) != 1 || in.Disks[0].Size != int64(n.Disks[0].SizeGiB)<<30 ||
		!slices.Contains(macs, strings.ToLower(h.BootMACAddress)) {
		t.Errorf("%s inspected by the agent: %d CPUs, %d MiB, disks %+v, NICs %v; want %d, %d, one of %d GiB, the boot MAC %s among them",
			name, in.CPU.Count, in.Memory.PhysicalMB, in.Disks, macs, n.VCPUs, n.MemoryMiB, n.Disks[0].SizeGiB, h.BootMACAddress)
	}
	ir.Step(t, "provide (automated cleaning)", "provide", "available", 15*time.Minute, name)
	ir.Step(t, "deploy (direct)", "active", "active", 15*time.Minute, name)
	if !testenv.WaitFor(5*time.Minute, func() bool { return testenv.Count(serial, testenv.OSRelease) > 0 }) {
		b, _ := os.ReadFile(serial)
		t.Fatalf("%s deployed: its serial log never showed %q; it ends:\n%s", name, testenv.OSRelease, b[max(0, len(b)-3000):])
	}
	ir.LogAgentTimes(t, name, serial, inits())
	if err := ironictest.SameImage(n.Disks[0].Path, testenv.OSImage(t)); err != nil {
		t.Errorf("%s deployed: %v", name, err)
	}
	if got := testenv.Count(serial, testenv.OSMarker); got != 1 {
		t.Errorf("%s: the OS booted %d times, want 1", name, got)
	}
}

// hostNamed is install-config's host called name.
func hostNamed(ic ipi.InstallConfig, name string) ipi.Host {
	for _, h := range ic.Platform.BareMetal.Hosts {
		if h.Name == name {
			return h
		}
	}
	return ipi.Host{}
}
