package labvirt

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/digitalocean/go-libvirt"
	"github.com/digitalocean/go-libvirt/socket/dialers"
	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"libvirt.org/go/libvirtxml"

	"github.com/bmlab/bmlab/internal/netaddr"
	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/netplumb/netnstest"
	"github.com/bmlab/bmlab/internal/testenv"
)

// labNetTestLab owns every lt- network and pool the tests make, so a run
// can remove what a crashed one left behind.
const labNetTestLab = "lt-lab"

func labNetTestSpec(name, bridge string) LabNetworkSpec {
	a := netip.MustParseAddr
	return LabNetworkSpec{
		Name: name, Bridge: bridge, Lab: labNetTestLab,
		Family: netaddr.Family{
			MachineNetwork: netip.MustParsePrefix("10.198.77.0/24"),
			DHCPRange:      netaddr.Range{Start: a("10.198.77.100"), End: a("10.198.77.199")},
			APIVIP:         a("10.198.77.5"), IngressVIP: a("10.198.77.6"),
		},
		Domain: "ocp.lab.local",
		Hosts: []LabHost{
			{MAC: "52:54:00:77:00:10", IP: a("10.198.77.10"), Hostname: "master-0"},
			{MAC: "52:54:00:77:00:11", IP: a("10.198.77.11"), Hostname: "master-1"},
		},
	}
}

// labNetTestSpecV6 is labNetTestSpec on an IPv6 network.
func labNetTestSpecV6(name, bridge string) LabNetworkSpec {
	a := netip.MustParseAddr
	s := labNetTestSpec(name, bridge)
	s.MachineNetwork, s.DHCPRange = netip.MustParsePrefix("fd00:77::/120"), netaddr.Range{Start: a("fd00:77::64"), End: a("fd00:77::c7")}
	s.APIVIP, s.IngressVIP = a("fd00:77::5"), a("fd00:77::6")
	s.Hosts = []LabHost{
		{MAC: "52:54:00:77:00:10", IP: a("fd00:77::10"), Hostname: "master-0"},
		{MAC: "52:54:00:77:00:11", IP: a("fd00:77::11"), Hostname: "master-1"},
	}
	return s
}

// labNetTestSpecDual is labNetTestSpec with the IPv6 family of
// labNetTestSpecV6 second.
func labNetTestSpecDual(name, bridge string) LabNetworkSpec {
	s, v6 := labNetTestSpec(name, bridge), labNetTestSpecV6(name, bridge)
	s.Secondary = v6.Family
	for i := range s.Hosts {
		s.Hosts[i].SecondaryIP = v6.Hosts[i].IP
	}
	return s
}

func TestLabNetworkSpecValidate(t *testing.T) {
	a := netip.MustParseAddr
	for _, tc := range []struct {
		name string
		edit func(*LabNetworkSpec)
		want string // in the error; "" for none
	}{
		{"good", func(*LabNetworkSpec) {}, ""},
		{"no VIPs, no hosts, no domain", func(s *LabNetworkSpec) {
			s.APIVIP, s.IngressVIP, s.Hosts, s.Domain = netip.Addr{}, netip.Addr{}, nil, ""
		}, ""},
		{"IPv6 CIDR, IPv4 addresses", func(s *LabNetworkSpec) { s.MachineNetwork = netip.MustParsePrefix("fd00::/64") }, "DHCP range"},
		{"IPv6 /48", func(s *LabNetworkSpec) {
			*s = labNetTestSpecV6("lt-v", "lt-v")
			s.MachineNetwork = netip.MustParsePrefix("fd00:77::/48")
		}, "IPv6 prefix of /64 to /126"},
		{"IPv6 only", func(s *LabNetworkSpec) { *s = labNetTestSpecV6("lt-v", "lt-v") }, ""},
		{"dual", func(s *LabNetworkSpec) { *s = labNetTestSpecDual("lt-v", "lt-v") }, ""},
		{"dual, IPv6 VIP in the range", func(s *LabNetworkSpec) {
			*s = labNetTestSpecDual("lt-v", "lt-v")
			s.Secondary.IngressVIP = a("fd00:77::a0")
		}, "IPv6 ingress VIP fd00:77::a0 is inside the DHCP range"},
		{"dual, IPv6 host outside", func(s *LabNetworkSpec) {
			*s = labNetTestSpecDual("lt-v", "lt-v")
			s.Hosts[1].SecondaryIP = a("fd00:78::11")
		}, "IPv6 host master-1: IP fd00:78::11 is not a free host address"},
		{"dual, secondary IPv4", func(s *LabNetworkSpec) {
			*s = labNetTestSpecDual("lt-v", "lt-v")
			s.Secondary.MachineNetwork = netip.MustParsePrefix("10.198.78.0/24")
		}, "a dual-stack network is IPv4"},
		{"long bridge", func(s *LabNetworkSpec) { s.Bridge = "lt-0123456789abc" }, "1 to 15 bytes"},
		{"range outside", func(s *LabNetworkSpec) { s.DHCPRange.End = a("10.198.78.9") }, "DHCP range"},
		{"range on the bridge", func(s *LabNetworkSpec) { s.DHCPRange.Start = a("10.198.77.1") }, "DHCP range"},
		{"VIP in range", func(s *LabNetworkSpec) { s.IngressVIP = a("10.198.77.150") }, "inside the DHCP range"},
		{"no domain", func(s *LabNetworkSpec) { s.Domain = "" }, "need a domain"},
		{"dotted hostname", func(s *LabNetworkSpec) { s.Hosts[0].Hostname = "master-0.x" }, "single DNS label"},
		{"bad MAC", func(s *LabNetworkSpec) { s.Hosts[0].MAC = "52:54:00" }, "not an Ethernet address"},
		{"host on a VIP", func(s *LabNetworkSpec) { s.Hosts[0].IP = a("10.198.77.5") }, "not a free host address"},
		{"VIP on a node, not a single node's", func(s *LabNetworkSpec) { s.APIVIP = s.Hosts[0].IP }, "not a free host address"},
		{"a single node holds the VIPs", func(s *LabNetworkSpec) {
			s.Hosts = s.Hosts[:1]
			s.APIVIP, s.IngressVIP, s.NodeHoldsVIPs = s.Hosts[0].IP, s.Hosts[0].IP, true
		}, ""},
		{"same IP", func(s *LabNetworkSpec) { s.Hosts[1].IP = s.Hosts[0].IP }, "same IP"},
		{"same MAC, other case", func(s *LabNetworkSpec) { s.Hosts[1].MAC = strings.ToUpper(s.Hosts[0].MAC) }, "same MAC"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := labNetTestSpec("lt-v", "lt-v")
			tc.edit(&s)
			err := s.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestLabNetworkXML(t *testing.T) {
	spec := labNetTestSpec("lt-x", "lt-x")
	x, err := LabNetworkXML(spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<forward mode="nat">`, `<bridge name="lt-x"`, `<ip address="10.198.77.1" prefix="24">`,
		`<range start="10.198.77.100" end="10.198.77.199">`, `<domain name="ocp.lab.local" localOnly="yes">`,
		`<host mac="52:54:00:77:00:10" name="master-0" ip="10.198.77.10">`, `<hostname>master-0.ocp.lab.local</hostname>`,
		`<hostname>api.ocp.lab.local</hostname>`, `<hostname>api-int.ocp.lab.local</hostname>`,
		`<options xmlns="` + dnsmasqXMLNS + `">`, `<option value="address=/apps.ocp.lab.local/10.198.77.6">`,
		`xmlns="` + MarkNS + `" name="lt-lab"`} {
		if !strings.Contains(x, want) {
			t.Errorf("lab network XML lacks %s:\n%s", want, x)
		}
	}
	// What libvirt writes back uses the dnsmasq: prefix; the view must not care.
	var n libvirtxml.Network
	if err := n.Unmarshal(strings.ReplaceAll(strings.ReplaceAll(x, `<options xmlns="`+dnsmasqXMLNS+`">`,
		`<dnsmasq:options xmlns:dnsmasq="`+dnsmasqXMLNS+`">`), "</options>", "</dnsmasq:options>")); err != nil {
		t.Fatal(err)
	}
	want, _ := labNetwork(spec)
	if d := cmp.Diff(viewLabNetwork(want), viewLabNetwork(&n)); d != "" {
		t.Errorf("view of the prefixed XML differs (-want +got):\n%s", d)
	}
}

// TestLabNetworkXMLDualStack: a dual-stack network has an <ip> per
// family, IPv4 first; its IPv6 reservations go by DUID-LL and name (libvirt
// takes no MAC there), its records are one per address (AAAA for the
// IPv6 ones), *.apps has an option per family, and NAT covers IPv6.
func TestLabNetworkXMLDualStack(t *testing.T) {
	spec := labNetTestSpecDual("lt-x", "lt-x")
	x, err := LabNetworkXML(spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<nat ipv6="yes">`, `<ip address="10.198.77.1" prefix="24">`,
		`<ip address="fd00:77::1" family="ipv6" prefix="120">`, `<range start="fd00:77::64" end="fd00:77::c7">`,
		`<host mac="52:54:00:77:00:10" name="master-0" ip="10.198.77.10">`,
		`<host id="00:03:00:01:52:54:00:77:00:10" name="master-0" ip="fd00:77::10">`,
		`<host ip="fd00:77::10">`, `<host ip="fd00:77::5">`,
		`<option value="address=/apps.ocp.lab.local/10.198.77.6">`, `<option value="address=/apps.ocp.lab.local/fd00:77::6">`} {
		if !strings.Contains(x, want) {
			t.Errorf("dual-stack network XML lacks %s:\n%s", want, x)
		}
	}
	if strings.Index(x, `address="10.198.77.1"`) > strings.Index(x, `address="fd00:77::1"`) {
		t.Errorf("the IPv4 <ip> is not first:\n%s", x)
	}
	var n libvirtxml.Network
	if err := n.Unmarshal(x); err != nil {
		t.Fatal(err)
	}
	want, _ := labNetwork(spec)
	if d, _ := labNetDiff(viewLabNetwork(want), viewLabNetwork(&n)); len(d) > 0 {
		t.Errorf("the network differs from itself: %v", d)
	}
	v4, _ := labNetwork(labNetTestSpec("lt-x", "lt-x"))
	if d, _ := labNetDiff(viewLabNetwork(want), viewLabNetwork(v4)); len(d) == 0 {
		t.Error("an IPv4-only network reads as the dual-stack one")
	}
}

func TestLabNetDiff(t *testing.T) {
	spec := labNetTestSpec("lt-d", "lt-d")
	view := func(s LabNetworkSpec) labNetView {
		n, err := labNetwork(s)
		if err != nil {
			t.Fatal(err)
		}
		return viewLabNetwork(n)
	}
	fewer := spec
	fewer.Hosts = spec.Hosts[:1]
	if d, add := labNetDiff(view(spec), view(spec)); len(d) != 0 || add {
		t.Errorf("same spec: %v, %v", d, add)
	}
	if d, add := labNetDiff(view(spec), view(fewer)); len(d) != 2 || !add {
		t.Errorf("a host more: %v, additions only %v; want DHCP and DNS host, additions only", d, add)
	}
	if d, add := labNetDiff(view(fewer), view(spec)); len(d) != 2 || add {
		t.Errorf("a host less: %v, additions only %v; want 2 differences, not additions", d, add)
	}
	mtu := fewer
	mtu.MTU = 9000
	if d, add := labNetDiff(view(mtu), view(spec)); len(d) != 3 || add {
		t.Errorf("MTU and a host less: %v, additions only %v", d, add)
	}
}

// ltCleanConn is ltConn, after removing what of the test lab an earlier
// run left: its lt- networks and pools.
func ltCleanConn(t *testing.T) *libvirt.Libvirt {
	t.Helper()
	l := ltConn(t)
	nets, _, err := l.ConnectListAllNetworks(1, 0)
	pools, _, perr := l.ConnectListAllStoragePools(1, 0)
	if err := errors.Join(err, perr); err != nil {
		t.Fatal(err)
	}
	for _, n := range nets {
		if strings.HasPrefix(n.Name, "lt-") {
			_, _ = deleteLabNetwork(context.Background(), l, n.Name, labNetTestLab)
		}
	}
	for _, p := range pools {
		if strings.HasPrefix(p.Name, "lt-") {
			_, _ = deletePool(context.Background(), l, p.Name, labNetTestLab)
		}
	}
	return l
}

// freshLabNet is labNetTestSpec with names of its own (name and bridge,
// each with the same random tail), deleted at the test's end.
func freshLabNet(t *testing.T, l *libvirt.Libvirt, name, bridge string) LabNetworkSpec {
	t.Helper()
	id := netnstest.Rand(3)
	spec := labNetTestSpec(name+id, bridge+id)
	deleteAtEnd(t, l, spec)
	return spec
}

// deleteAtEnd deletes the lab network spec at the test's end; a failed
// delete fails the test.
func deleteAtEnd(t *testing.T, l *libvirt.Libvirt, spec LabNetworkSpec) {
	t.Cleanup(func() {
		if _, err := deleteLabNetwork(context.Background(), l, spec.Name, spec.Lab); err != nil {
			t.Errorf("clean up %s: %v", spec.Name, err)
		}
	})
}

// defineForeign defines someone else's network (no lab mark), never
// started, and undefines it at the test's end.
func defineForeign(t *testing.T, l *libvirt.Libvirt, d *libvirtxml.Network) libvirt.Network {
	t.Helper()
	x, err := d.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	n, err := l.NetworkDefineXML(x)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.NetworkUndefine(n) })
	return n
}

// ltConn connects to libvirtd after checking that it runs in the network
// namespace labci: the lab network carries an address, which must never
// appear in the host's namespace.
func ltConn(t *testing.T) *libvirt.Libvirt {
	t.Helper()
	testenv.Libvirt(t)
	where, err := libvirtdNetns("labci")
	testenv.Require(t, err == nil, "libvirtd running inside network namespace labci (hack/start-libvirtd.sh): "+errString(err))
	l := libvirt.NewWithDialer(dialers.NewLocal(dialers.WithLocalTimeout(5 * time.Second)))
	if err := l.ConnectToURI(libvirt.QEMUSystem); err != nil {
		t.Fatalf("connect to libvirtd: %v", err)
	}
	t.Cleanup(func() { _ = l.Disconnect() })
	t.Logf("libvirtd %s", where)
	return l
}

// libvirtdNetns checks that the system libvirtd (the one /run/libvirtd.pid
// names, else every libvirtd process) is in the named network namespace.
// Other libvirtds, such as a multi-host test's per-host daemons with pid
// files of their own, are not the one these tests talk to.
func libvirtdNetns(ns string) (string, error) {
	var want syscall.Stat_t
	if err := syscall.Stat("/run/netns/"+ns, &want); err != nil {
		return "", err
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/comm")
	if b, err := os.ReadFile("/run/libvirtd.pid"); err == nil {
		if pid := strings.TrimSpace(string(b)); pid != "" {
			if _, err := os.Stat("/proc/" + pid); err == nil {
				procs = []string{"/proc/" + pid + "/comm"}
			}
		}
	}
	var pids []string
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || strings.TrimSpace(string(b)) != "libvirtd" {
			continue
		}
		dir := filepath.Dir(p)
		var st syscall.Stat_t
		if err := syscall.Stat(dir+"/ns/net", &st); err != nil {
			return "", err
		}
		if st.Dev != want.Dev || st.Ino != want.Ino {
			return "", errors.New("libvirtd " + dir + " is not in netns " + ns)
		}
		pids = append(pids, filepath.Base(dir))
	}
	if len(pids) == 0 {
		return "", errors.New("no libvirtd process")
	}
	return "pid " + strings.Join(pids, ",") + " in netns " + ns, nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func labNetLive(t *testing.T, l *libvirt.Libvirt, name string) *libvirtxml.Network {
	t.Helper()
	n, err := l.NetworkLookupByName(name)
	if err != nil {
		t.Fatal(err)
	}
	d, err := networkDef(l, n, 0)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestEnsureLabNetwork(t *testing.T) {
	l := ltCleanConn(t)
	ctx := context.Background()
	spec := freshLabNet(t, l, "lt-net-", "lt-br-")
	h, bridgeIndex := labciBridge(t, spec.Bridge)

	start := time.Now()
	if changed, err := ensureLabNetwork(ctx, l, spec); err != nil || !changed {
		t.Fatalf("first EnsureLabNetwork = %v, %v; want changed", changed, err)
	}
	t.Logf("defined and started in %v", time.Since(start).Round(time.Millisecond))
	if changed, err := ensureLabNetwork(ctx, l, spec); err != nil || changed {
		t.Fatalf("second EnsureLabNetwork = %v, %v; want unchanged", changed, err)
	}
	if d, err := labNetworkDrift(ctx, l, spec); err != nil || len(d) != 0 {
		t.Fatalf("drift after ensure: %v, %v", d, err)
	}
	st, err := getNetworkState(ctx, l, spec.Name)
	if err != nil || !st.Active || !st.Autostart || st.Forward != "nat" || st.Bridge != spec.Bridge || st.Owner != spec.Lab {
		t.Fatalf("network state %+v, %v", st, err)
	}
	index := bridgeIndex()

	// The running network, as libvirt reports it, has the reservations, the
	// records and the dnsmasq option.
	live := labNetLive(t, l, spec.Name)
	want, _ := labNetwork(spec)
	if d := cmp.Diff(viewLabNetwork(want), viewLabNetwork(live)); d != "" {
		t.Errorf("live network differs (-want +got):\n%s", d)
	}
	// libvirt's dnsmasq gets them as dnsmasq options and files.
	dnsmasqHas(t, spec.Name, "conf", []string{"address=/apps.ocp.lab.local/10.198.77.6", "local=/ocp.lab.local/", "domain=ocp.lab.local", "interface=" + spec.Bridge, "dhcp-range=10.198.77.100,10.198.77.199"})
	dnsmasqHas(t, spec.Name, "hostsfile", []string{"52:54:00:77:00:10,10.198.77.10,master-0", "52:54:00:77:00:11,10.198.77.11,master-1"})

	// dnsmasq answers for hosts, the API and any name under apps.
	labNetResolve(t, "10.198.77.1", map[string]string{
		"master-0.ocp.lab.local":                             "10.198.77.10",
		"master-1.ocp.lab.local":                             "10.198.77.11",
		"api.ocp.lab.local":                                  "10.198.77.5",
		"api-int.ocp.lab.local":                              "10.198.77.5",
		"console-openshift-console.apps.ocp.lab.local":       "10.198.77.6",
		"oauth-openshift.apps.ocp.lab.local":                 "10.198.77.6",
		"canary-openshift-ingress-canary.apps.ocp.lab.local": "10.198.77.6",
	})

	// A host more goes in live: same bridge, the new host resolves.
	more := spec
	more.Hosts = append(append([]LabHost{}, spec.Hosts...),
		LabHost{MAC: "52:54:00:77:00:20", IP: netip.MustParseAddr("10.198.77.20"), Hostname: "worker-0"})
	if changed, err := ensureLabNetwork(ctx, l, more); err != nil || !changed {
		t.Fatalf("EnsureLabNetwork with a host more = %v, %v; want changed", changed, err)
	}
	if got := bridgeIndex(); got != index {
		t.Errorf("adding a host restarted the network: bridge index %d, was %d", got, index)
	}
	if d, err := labNetworkDrift(ctx, l, more); err != nil || len(d) != 0 {
		t.Fatalf("drift after adding a host: %v, %v", d, err)
	}
	if !strings.Contains(testenv.ReadFile(t, "/var/lib/libvirt/dnsmasq/"+spec.Name+".hostsfile"), "52:54:00:77:00:20,10.198.77.20,worker-0") {
		t.Error("the added host is not in dnsmasq's hostsfile")
	}
	labNetResolve(t, "10.198.77.1", map[string]string{"worker-0.ocp.lab.local": "10.198.77.20"})
	if changed, err := ensureLabNetwork(ctx, l, more); err != nil || changed {
		t.Fatalf("EnsureLabNetwork again = %v, %v; want unchanged", changed, err)
	}

	// Any other change redefines and restarts: a new bridge, same UUID.
	uuid := live.UUID
	mtu := more
	mtu.MTU = 9000
	if d, err := labNetworkDrift(ctx, l, mtu); err != nil || len(d) != 1 || !strings.Contains(d[0], "MTU") {
		t.Errorf("drift with another MTU: %v, %v", d, err)
	}
	if changed, err := ensureLabNetwork(ctx, l, mtu); err != nil || !changed {
		t.Fatalf("EnsureLabNetwork with MTU 9000 = %v, %v; want changed", changed, err)
	}
	if got := bridgeIndex(); got == index {
		t.Errorf("the MTU change did not restart the network (bridge index %d)", got)
	}
	if live := labNetLive(t, l, spec.Name); live.UUID != uuid || live.MTU == nil || live.MTU.Size != 9000 {
		t.Errorf("redefined network: UUID %s (was %s), MTU %+v", live.UUID, uuid, live.MTU)
	}

	if deleted, err := deleteLabNetwork(ctx, l, spec.Name, spec.Lab); err != nil || !deleted {
		t.Fatalf("DeleteLabNetwork = %v, %v; want deleted", deleted, err)
	}
	if deleted, err := deleteLabNetwork(ctx, l, spec.Name, spec.Lab); err != nil || deleted {
		t.Fatalf("second DeleteLabNetwork = %v, %v; want nothing to delete", deleted, err)
	}
	if _, err := h.LinkByName(spec.Bridge); err == nil {
		t.Errorf("bridge %s still in labci after delete", spec.Bridge)
	}
}

func TestEnsureLabNetworkLeavesForeignAlone(t *testing.T) {
	l := ltCleanConn(t)
	ctx := context.Background()
	id := netnstest.Rand(3)
	spec := labNetTestSpec("lt-fx-"+id, "lt-fxb-"+id)

	// Someone else's networks: one with the lab's name, one on the lab's
	// bridge. Defined, never started, no lab mark, no address.
	foreign := func(name, bridge string) (libvirt.Network, string) {
		n := defineForeign(t, l, &libvirtxml.Network{Name: name, Bridge: &libvirtxml.NetworkBridge{Name: bridge}})
		before, err := l.NetworkGetXMLDesc(n, 0)
		if err != nil {
			t.Fatal(err)
		}
		return n, before
	}
	n, before := foreign(spec.Name, "lt-o-"+id)
	_, err := ensureLabNetwork(ctx, l, spec)
	if !errors.Is(err, ErrNetworkForeign) || !strings.Contains(err.Error(), "virsh net-undefine "+spec.Name) {
		t.Errorf("EnsureLabNetwork on a foreign network = %v, want ErrNetworkForeign with a fix", err)
	}
	if _, err := deleteLabNetwork(ctx, l, spec.Name, spec.Lab); !errors.Is(err, ErrNetworkForeign) {
		t.Errorf("DeleteLabNetwork on a foreign network = %v, want ErrNetworkForeign", err)
	}
	after, err := l.NetworkGetXMLDesc(n, 0)
	if err != nil || after != before {
		t.Errorf("the foreign network changed: %v\nbefore:\n%s\nafter:\n%s", err, before, after)
	}
	if active, err := l.NetworkIsActive(n); err != nil || active != 0 {
		t.Errorf("the foreign network was started: %d, %v", active, err)
	}

	other := spec
	other.Name = "lt-fy-" + id
	foreign("lt-fz-"+id, other.Bridge)
	_, err = ensureLabNetwork(ctx, l, other)
	if !errors.Is(err, ErrNetworkForeign) || !strings.Contains(err.Error(), `libvirt network "lt-fz-`+id+`"`) {
		t.Errorf("EnsureLabNetwork on another network's bridge = %v, want ErrNetworkForeign naming it", err)
	}
	if st, err := getNetworkState(ctx, l, other.Name); err != nil || st.Exists {
		t.Errorf("EnsureLabNetwork defined %s beside a foreign network on its bridge: %+v, %v", other.Name, st, err)
	}
	if deleted, err := deleteLabNetwork(ctx, l, other.Name, spec.Lab); err != nil || deleted {
		t.Errorf("DeleteLabNetwork of a missing network = %v, %v; want false, nil", deleted, err)
	}
}

// dnsmasqHas checks that the file libvirt writes for network's dnsmasq
// (ext: conf, hostsfile) holds each of wants.
func dnsmasqHas(t *testing.T, network, ext string, wants []string) {
	t.Helper()
	f := testenv.ReadFile(t, "/var/lib/libvirt/dnsmasq/"+network+"."+ext)
	for _, want := range wants {
		if !strings.Contains(f, want) {
			t.Errorf("dnsmasq %s lacks %q:\n%s", ext, want, f)
		}
	}
}

// labNetResolve asks the dnsmasq at server (inside labci) for the A record
// of each name, from a socket made in labci.
func labNetResolve(t *testing.T, server string, want map[string]string) {
	t.Helper()
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return netplumb.DialContextIn("labci")(ctx, "udp", net.JoinHostPort(server, "53"))
	}}
	got := map[string]string{}
	for name := range want {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		addrs, err := r.LookupHost(ctx, name)
		cancel()
		if err != nil {
			t.Errorf("resolve %s at %s: %v", name, server, err)
			continue
		}
		got[name] = strings.Join(addrs, ",")
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("DNS answers from %s differ (-want +got):\n%s", server, d)
	}
}

// TestEnsureLabNetworkDualStack: a dual-stack lab network and an IPv6-only
// one on the real libvirtd (in labci): defined with no drift after, libvirt
// gives dnsmasq the IPv6 range with router advertisements and the DUID
// reservations, dnsmasq answers AAAA for the hosts, the API and *.apps
// (asked from inside labci over IPv6), and a host more goes in live into
// the IPv6 <ip> without a restart.
func TestEnsureLabNetworkDualStack(t *testing.T) {
	l := ltCleanConn(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		spec func(name, bridge string) LabNetworkSpec
	}{{"dual", labNetTestSpecDual}, {"v6", labNetTestSpecV6}} {
		t.Run(tc.name, func(t *testing.T) {
			id := netnstest.Rand(3)
			spec := tc.spec("lt-net6-"+id, "lt-br6-"+id)
			deleteAtEnd(t, l, spec)
			if changed, err := ensureLabNetwork(ctx, l, spec); err != nil || !changed {
				t.Fatalf("first EnsureLabNetwork = %v, %v; want changed", changed, err)
			}
			if changed, err := ensureLabNetwork(ctx, l, spec); err != nil || changed {
				t.Fatalf("second EnsureLabNetwork = %v, %v; want unchanged", changed, err)
			}
			if d, err := labNetworkDrift(ctx, l, spec); err != nil || len(d) != 0 {
				t.Fatalf("drift after ensure: %v, %v", d, err)
			}
			want, _ := labNetwork(spec)
			if d := cmp.Diff(viewLabNetwork(want), viewLabNetwork(labNetLive(t, l, spec.Name))); d != "" {
				t.Errorf("live network differs (-want +got):\n%s", d)
			}
			labNetCarrier(t, spec.Bridge, "lt-d6-"+id)
			dnsmasqHas(t, spec.Name, "conf", []string{"dhcp-range=fd00:77::64,fd00:77::c7,120", "enable-ra", "address=/apps.ocp.lab.local/fd00:77::6"})
			dnsmasqHas(t, spec.Name, "hostsfile", []string{"id:00:03:00:01:52:54:00:77:00:10,master-0,[fd00:77::10]", "id:00:03:00:01:52:54:00:77:00:11,master-1,[fd00:77::11]"})
			aaaa := map[string]string{
				"master-0.ocp.lab.local": "fd00:77::10", "master-1.ocp.lab.local": "fd00:77::11",
				"api.ocp.lab.local": "fd00:77::5", "api-int.ocp.lab.local": "fd00:77::5",
				"console-openshift-console.apps.ocp.lab.local": "fd00:77::6",
			}
			labNetResolveFamily(t, "fd00:77::1", "ip6", aaaa)
			if !spec.Secondary.IsZero() {
				labNetResolveFamily(t, "10.198.77.1", "ip4", map[string]string{"master-0.ocp.lab.local": "10.198.77.10", "api.ocp.lab.local": "10.198.77.5"})
			}

			more := spec
			w := LabHost{MAC: "52:54:00:77:00:20", IP: netip.MustParseAddr("fd00:77::20"), Hostname: "worker-0"}
			if !spec.Secondary.IsZero() {
				w.IP, w.SecondaryIP = netip.MustParseAddr("10.198.77.20"), w.IP
			}
			more.Hosts = append(append([]LabHost{}, spec.Hosts...), w)
			if changed, err := ensureLabNetwork(ctx, l, more); err != nil || !changed {
				t.Fatalf("EnsureLabNetwork with a host more = %v, %v; want changed", changed, err)
			}
			if d, err := labNetworkDrift(ctx, l, more); err != nil || len(d) != 0 {
				t.Fatalf("drift after adding a host: %v, %v", d, err)
			}
			if !strings.Contains(testenv.ReadFile(t, "/var/lib/libvirt/dnsmasq/"+spec.Name+".hostsfile"), "id:00:03:00:01:52:54:00:77:00:20,worker-0,[fd00:77::20]") {
				t.Error("the added host's IPv6 reservation is not in dnsmasq's hostsfile")
			}
			labNetResolveFamily(t, "fd00:77::1", "ip6", map[string]string{"worker-0.ocp.lab.local": "fd00:77::20"})
		})
	}
}

// labNetCarrier gives a bridge in labci a port, as a lab's
// veth and VMs do (a veth pair, one end on the bridge): a bridge without
// one has no carrier, and its IPv6 address stays tentative (duplicate
// address detection never runs), so nothing answers on it. It returns once
// the address is usable.
func labNetCarrier(t *testing.T, bridge, port string) {
	t.Helper()
	h, err := netplumb.OpenNamespace("labci")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	br, err := h.LinkByName(bridge)
	if err != nil {
		t.Fatal(err)
	}
	d := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: port, MasterIndex: br.Attrs().Index}, PeerName: port + "p"}
	if err := h.LinkAdd(d); err != nil {
		t.Fatalf("add %s to %s: %v", port, bridge, err)
	}
	t.Cleanup(func() {
		if l, err := h.LinkByName(port); err == nil {
			_ = h.LinkDel(l)
		}
	})
	for _, name := range []string{port, port + "p"} {
		l, err := h.LinkByName(name)
		if err == nil {
			err = h.LinkSetUp(l)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		addrs, err := h.AddrList(br, netlink.FAMILY_V6)
		if err != nil {
			t.Fatal(err)
		}
		ready := false
		for _, a := range addrs {
			if a.IP.IsGlobalUnicast() && a.Flags&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED) == 0 {
				ready = true
			}
		}
		if ready {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the IPv6 address of %s is still tentative: %v", bridge, addrs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// labNetResolveFamily asks server (from inside labci) for each name's
// addresses of one family: "ip4" (A) or "ip6" (AAAA).
func labNetResolveFamily(t *testing.T, server, network string, want map[string]string) {
	t.Helper()
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return netplumb.DialContextIn("labci")(ctx, "udp", net.JoinHostPort(server, "53"))
	}}
	got := map[string]string{}
	for name := range want {
		var addrs []netip.Addr
		// dnsmasq may take a moment to bind a new address.
		deadline := time.Now().Add(5 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			var err error
			addrs, err = r.LookupNetIP(ctx, network, name)
			cancel()
			if err == nil || time.Now().After(deadline) {
				if err != nil {
					t.Errorf("resolve %s (%s) at %s: %v", name, network, server, err)
				}
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		var s []string
		for _, a := range addrs {
			s = append(s, a.String())
		}
		got[name] = strings.Join(s, ",")
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("%s answers from %s differ (-want +got):\n%s", network, server, d)
	}
}

// labciBridge returns a netlink handle in labci and a function reading
// bridge's interface index there (a network restarted by libvirt gets a new
// bridge, a new index).
func labciBridge(t *testing.T, bridge string) (*netlink.Handle, func() int) {
	h, err := netplumb.OpenNamespace("labci")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h, func() int {
		t.Helper()
		link, err := h.LinkByName(bridge)
		if err != nil {
			t.Fatalf("bridge %s in labci: %v", bridge, err)
		}
		return link.Attrs().Index
	}
}
