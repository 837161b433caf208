package netplumb_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"

	"github.com/bmlab/bmlab/internal/labconfig"
	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/netplumb/netnstest"
	"github.com/bmlab/bmlab/internal/ocp"
	"github.com/bmlab/bmlab/internal/testenv"
)

const lab = "itest"

// seedTopology is the seed lab (labconfig's defaults) with the provisioning
// bridge and an address on baremetal. The address lives only in the
// throwaway namespace.
func seedTopology() netplumb.Topology {
	c := labconfig.Default()
	c.Network.ProvisioningNetwork = ocp.ProvisioningManaged
	c.Network.Bridges = nil
	c.SetDefaults()
	c.Network.Bridges[0].Addresses = []netip.Prefix{netip.MustParsePrefix("10.77.0.1/24")}
	return c.Network.Topology()
}

// requireVLAN skips when the kernel cannot make 802.1Q sub-interfaces
// (CONFIG_VLAN_8021Q), under CI too: that is the kernel's build, not a
// package the project could install.
func requireVLAN(t *testing.T, h *netlink.Handle) {
	t.Helper()
	br := netnstest.Bridge(t, h, "np-vlanprobe")
	err := h.LinkAdd(&netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Name: "np-vlanprobe.1", ParentIndex: br.Attrs().Index}, VlanId: 1})
	testenv.Kernel(t, err == nil, "802.1Q VLAN support (CONFIG_VLAN_8021Q): "+fmt.Sprint(err))
	must(t, h.LinkDel(br))
}

func TestVLANSubInterface(t *testing.T) {
	ns, h := netnstest.New(t)
	requireVLAN(t, h)
	netnstest.Bridge(t, h, "virbr0")
	top := seedTopology()
	top.VLANs = []netplumb.VLAN{{Name: "baremetal.10", Parent: "baremetal", ID: 10, MTU: 1500,
		Addresses: []netip.Prefix{netip.MustParsePrefix("10.78.0.1/24")}}}
	p := netplumb.New(h, lab, nil)
	if _, err := p.Apply(context.Background(), top); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	ip := testenv.Command(t, "ip")
	out, _ := exec.Command(ip, "-n", ns, "-d", "addr", "show", "baremetal.10").CombinedOutput()
	for _, want := range []string{"vlan protocol 802.1Q id 10", "10.78.0.1/24", "alias bmlab:itest"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("ip -d addr show baremetal.10 lacks %q:\n%s", want, out)
		}
	}
	del(t, h, "baremetal.10")
	plan, err := p.Plan(top)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"baremetal.10: missing (want vlan, got none)"}, diffStrings(plan)); d != "" {
		t.Errorf("check (-want +got):\n%s", d)
	}
	if err := p.ApplyPlan(context.Background(), top, plan); err != nil {
		t.Fatalf("repair: %v", err)
	}
}

// newSeedNS makes a throwaway namespace with libvirt's bridge in it (not the
// lab's) and the seed topology applied.
func newSeedNS(t testing.TB) (string, *netlink.Handle, *netplumb.Plumber) {
	t.Helper()
	ns, h := netnstest.New(t)
	netnstest.Bridge(t, h, labconfig.DefaultLibvirtBridge)
	p := netplumb.New(h, lab, nil)
	if _, err := p.Apply(context.Background(), seedTopology()); err != nil {
		t.Fatalf("Apply on an empty namespace: %v", err)
	}
	return ns, h, p
}

// indexes maps every link of the namespace to its ifindex.
func indexes(t testing.TB, h *netlink.Handle) map[string]int {
	t.Helper()
	o, err := netplumb.Observe(h)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int{}
	for n, l := range o.Links {
		m[n] = l.Index
	}
	return m
}

func diffStrings(p *netplumb.Plan) []string {
	var out []string
	for _, d := range p.Differences {
		out = append(out, d.String())
	}
	return out
}

func TestApplyBuildsSeedFromNothingThenChangesNothing(t *testing.T) {
	ns, h := netnstest.New(t)
	netnstest.Bridge(t, h, "virbr0")
	p := netplumb.New(h, lab, nil)
	top := seedTopology()

	first, err := p.Apply(context.Background(), top)
	if err != nil {
		t.Fatalf("first Apply: %v", err)
	}
	if len(first.Differences) != len(top.Names()) {
		t.Errorf("first Apply saw %d differences, want one missing per link (%d): %v",
			len(first.Differences), len(top.Names()), diffStrings(first))
	}

	// Read back with the kernel's own tool, not with the code under test.
	ip := testenv.Command(t, "ip")
	for _, c := range []struct{ link, want string }{
		{"baremetal", "bridge"}, {"provisioning", "bridge"}, {"bmlab-veth0", "master baremetal"},
		{"bmlab-veth1", "master virbr0"},
		{"baremetal", "alias bmlab:itest"}, {"bmlab-veth1", "alias bmlab:itest"},
	} {
		out, err := exec.Command(ip, "-n", ns, "-d", "link", "show", c.link).CombinedOutput()
		if err != nil || !strings.Contains(string(out), c.want) || !strings.Contains(string(out), "state UP") && !strings.Contains(string(out), ",UP") {
			t.Errorf("ip -d link show %s: %v\n%s\nwant it up and with %q", c.link, err, out, c.want)
		}
	}
	out, _ := exec.Command(ip, "-n", ns, "addr", "show", "baremetal").CombinedOutput()
	if !strings.Contains(string(out), "10.77.0.1/24") {
		t.Errorf("baremetal has no 10.77.0.1/24:\n%s", out)
	}

	before := indexes(t, h)
	second, err := p.Apply(context.Background(), top)
	if err != nil {
		t.Fatalf("second Apply: %v", err)
	}
	if len(second.Differences) != 0 || len(second.Steps) != 0 {
		t.Errorf("second Apply: %d differences, %d steps, want none: %v", len(second.Differences), len(second.Steps), diffStrings(second))
	}
	if d := cmp.Diff(before, indexes(t, h)); d != "" {
		t.Errorf("ifindexes changed by the second Apply (-before +after):\n%s", d)
	}
}

func TestCheckReportsAndRepairFixesEachBreakage(t *testing.T) {
	tests := []struct {
		name  string
		brk   func(t *testing.T, ns string, h *netlink.Handle)
		diffs []string
		// recreated are the links repair must delete and create again,
		// gone those it deletes; every other link keeps its ifindex.
		recreated, gone []string
	}{{
		name:      "veth end deleted",
		brk:       func(t *testing.T, ns string, h *netlink.Handle) { del(t, h, "bmlab-veth1") },
		diffs:     []string{"bmlab-veth0: missing (want veth, got none)", "bmlab-veth1: missing (want veth, got none)"},
		recreated: []string{"bmlab-veth0", "bmlab-veth1"},
	}, {
		name:  "bridge down",
		brk:   func(t *testing.T, ns string, h *netlink.Handle) { must(t, h.LinkSetDown(link(t, h, "baremetal"))) },
		diffs: []string{"baremetal: down (want up, got down)"},
	}, {
		name: "port moved to another master",
		brk: func(t *testing.T, ns string, h *netlink.Handle) {
			other := netnstest.Bridge(t, h, "np-other")
			must(t, h.LinkSetMaster(link(t, h, "bmlab-veth0"), other))
		},
		diffs: []string{"bmlab-veth0: wrong-master (want baremetal, got np-other)"},
	}, {
		name: "MTU changed",
		brk: func(t *testing.T, ns string, h *netlink.Handle) {
			must(t, h.LinkSetMTU(link(t, h, "bmlab-veth1"), 1400))
		},
		diffs: []string{"bmlab-veth1: wrong-mtu (want 1500, got 1400)"},
	}, {
		name: "peer moved to another namespace",
		brk: func(t *testing.T, ns string, h *netlink.Handle) {
			other, _ := netnstest.New(t)
			ip := testenv.Command(t, "ip")
			if out, err := exec.Command(ip, "-n", ns, "link", "set", "bmlab-veth1", "netns", other).CombinedOutput(); err != nil {
				t.Fatalf("move bmlab-veth1: %v: %s", err, out)
			}
		},
		diffs:     []string{"bmlab-veth0: peer-missing (want bmlab-veth1, got a link in another namespace)"},
		recreated: []string{"bmlab-veth0", "bmlab-veth1"},
	}, {
		name: "address deleted",
		brk: func(t *testing.T, ns string, h *netlink.Handle) {
			a, err := netlink.ParseAddr("10.77.0.1/24")
			must(t, err)
			must(t, h.AddrDel(link(t, h, "baremetal"), a))
		},
		diffs: []string{"baremetal: address-missing (want 10.77.0.1/24, got none)"},
	}, {
		name: "lab link replaced by one of another type",
		brk: func(t *testing.T, ns string, h *netlink.Handle) {
			del(t, h, "provisioning")
			must(t, h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "provisioning", MTU: 1500}, PeerName: "np-peer"}))
			must(t, h.LinkSetAlias(link(t, h, "provisioning"), netplumb.Owner(lab)))
			must(t, h.LinkSetAlias(link(t, h, "np-peer"), netplumb.Owner(lab)))
			must(t, h.LinkSetUp(link(t, h, "provisioning")))
		},
		diffs:     []string{"provisioning: wrong-type (want bridge, got veth)"},
		recreated: []string{"provisioning"},
		gone:      []string{"np-peer"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns, h, p := newSeedNS(t)
			top := seedTopology()
			tt.brk(t, ns, h)
			before := indexes(t, h)

			plan, err := p.Plan(top)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.diffs, diffStrings(plan)); d != "" {
				t.Fatalf("check (-want +got):\n%s", d)
			}
			if err := p.ApplyPlan(context.Background(), top, plan); err != nil {
				t.Fatalf("repair: %v", err)
			}
			after, err := p.Plan(top)
			if err != nil {
				t.Fatal(err)
			}
			if len(after.Differences) != 0 {
				t.Errorf("after repair: %v", diffStrings(after))
			}
			// Repair changed exactly what was broken: every other link
			// kept its ifindex.
			now := indexes(t, h)
			for name, idx := range before {
				if slices.Contains(tt.gone, name) {
					if _, ok := now[name]; ok {
						t.Errorf("%s still there after repair", name)
					}
					continue
				}
				if slices.Contains(tt.recreated, name) {
					if now[name] == idx {
						t.Errorf("%s kept ifindex %d; it should have been recreated", name, idx)
					}
					continue
				}
				if now[name] != idx {
					t.Errorf("%s: ifindex %d -> %d; repair should not have touched it", name, idx, now[name])
				}
			}
		})
	}
}

func TestForeignLinkStopsApplyAndIsNeverTouched(t *testing.T) {
	_, h := netnstest.New(t)
	netnstest.Bridge(t, h, "virbr0")
	// Someone else's bridge named like the lab's, down, without an alias.
	must(t, h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "baremetal", MTU: 1400}}))
	foreign := link(t, h, "baremetal")
	before := indexes(t, h)

	p := netplumb.New(h, lab, nil)
	plan, err := p.Apply(context.Background(), seedTopology())
	if !errors.Is(err, netplumb.ErrForeign) {
		t.Fatalf("Apply = %v, want ErrForeign", err)
	}
	var blocked *netplumb.BlockedError
	if !errors.As(err, &blocked) || len(blocked.Differences) != 1 || !strings.Contains(err.Error(), "ip link del baremetal") {
		t.Errorf("error does not name the one foreign link and its fix: %v", err)
	}
	if got := diffStrings(plan)[0]; got != "baremetal: foreign (want alias bmlab:itest, got no alias)" {
		t.Errorf("first difference = %q", got)
	}
	if d := cmp.Diff(before, indexes(t, h)); d != "" {
		t.Errorf("Apply changed the namespace although it was blocked (-before +after):\n%s", d)
	}
	after := link(t, h, "baremetal")
	if after.Attrs().Index != foreign.Attrs().Index || after.Attrs().MTU != 1400 || after.Attrs().Alias != "" ||
		after.Attrs().Flags&net.FlagUp != 0 {
		t.Errorf("foreign link modified: %+v", after.Attrs())
	}

	res, err := p.Down(context.Background(), seedTopology())
	if err != nil {
		t.Fatalf("Down: %v", err)
	}
	if d := cmp.Diff(&netplumb.DownResult{Deleted: []string{}, Foreign: []string{"baremetal"}}, res); d != "" {
		t.Errorf("Down (-want +got):\n%s", d)
	}
	if link(t, h, "baremetal").Attrs().Index != foreign.Attrs().Index {
		t.Error("Down deleted the foreign bridge")
	}
}

func TestRepairNeverDeletesAForeignVethPeer(t *testing.T) {
	_, h, p := newSeedNS(t)
	top := seedTopology()
	// The lab's provisioning name now holds a lab-marked veth whose peer is
	// someone else's: recreating provisioning would delete that peer.
	del(t, h, "provisioning")
	must(t, h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "provisioning"}, PeerName: "np-theirs"}))
	must(t, h.LinkSetAlias(link(t, h, "provisioning"), netplumb.Owner(lab)))
	before := indexes(t, h)
	_, err := p.Apply(context.Background(), top)
	if !errors.Is(err, netplumb.ErrForeign) || !strings.Contains(err.Error(), "np-theirs") {
		t.Fatalf("Apply = %v, want ErrForeign naming np-theirs", err)
	}
	if d := cmp.Diff(before, indexes(t, h)); d != "" {
		t.Errorf("a blocked Apply changed links (-before +after):\n%s", d)
	}
}

func TestDownRemovesOnlyWhatTheLabOwns(t *testing.T) {
	_, h, p := newSeedNS(t)
	top := seedTopology()
	// A port the user added to the lab's bridge is not the lab's.
	must(t, h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "np-user0"}, PeerName: "np-user1"}))
	must(t, h.LinkSetMaster(link(t, h, "np-user0"), link(t, h, "baremetal")))

	res, err := p.Down(context.Background(), top)
	if err != nil {
		t.Fatalf("Down: %v", err)
	}
	want := []string{"bmlab-veth1", "bmlab-veth0", "provisioning", "baremetal"}
	if d := cmp.Diff(want, res.Deleted); d != "" {
		t.Errorf("deleted (-want +got):\n%s", d)
	}
	got := indexes(t, h)
	for _, n := range want {
		if _, ok := got[n]; ok {
			t.Errorf("%s still there after Down", n)
		}
	}
	for _, n := range []string{"lo", "virbr0", "np-user0", "np-user1"} {
		if _, ok := got[n]; !ok {
			t.Errorf("Down deleted %s, which is not the lab's", n)
		}
	}
	res, err = p.Down(context.Background(), top)
	if err != nil || len(res.Deleted) != 0 {
		t.Errorf("second Down = %+v, %v; want nothing deleted, no error", res, err)
	}
}

func TestExternalBridgeMissingStopsApply(t *testing.T) {
	_, h := netnstest.New(t)
	p := netplumb.New(h, lab, nil)
	_, err := p.Apply(context.Background(), seedTopology())
	if !errors.Is(err, netplumb.ErrExternalMissing) || !strings.Contains(err.Error(), "virsh net-start") {
		t.Fatalf("Apply without virbr0 = %v, want ErrExternalMissing with a hint", err)
	}
	if n := len(indexes(t, h)); n != 1 {
		t.Errorf("%d links after a blocked Apply, want only lo", n)
	}
}

// BenchmarkCheckSeedTopology measures `labctl net check`'s kernel side: read
// every link and address of a namespace holding the full seed topology and
// compare. The target is under 50 ms per check.
func BenchmarkCheckSeedTopology(b *testing.B) {
	_, _, p := newSeedNS(b)
	top := seedTopology()
	for b.Loop() {
		plan, err := p.Plan(top)
		if err != nil {
			b.Fatal(err)
		}
		if len(plan.Differences) != 0 {
			b.Fatalf("seed topology differs: %v", diffStrings(plan))
		}
	}
}

func link(t testing.TB, h *netlink.Handle, name string) netlink.Link {
	t.Helper()
	l, err := h.LinkByName(name)
	if err != nil {
		t.Fatalf("link %s: %v", name, err)
	}
	return l
}

func del(t testing.TB, h *netlink.Handle, name string) {
	t.Helper()
	must(t, h.LinkDel(link(t, h, name)))
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestRulesRouteANetworkAsARouter: the lab's rules make the addresses of
// one network (a BMC network's) reach the networks they let through and
// nothing else, in a throwaway namespace: from the BMC address, a machine
// on the machine network answers and one on the provisioning network is
// unreachable ("Network is unreachable", the kernel's ENETUNREACH); from
// the host's other addresses both answer (a TCP connection, as vbmcd's
// fetch makes it: refused by the machine, or network unreachable). With the provisioning network's
// rule added, it answers from the BMC address too; with the rule taken out
// again, Plan reports it extra and Apply removes it; OwnedRules lists the
// lab's rules, by its mark and block, and DeleteRule removes them.
func TestRulesRouteANetworkAsARouter(t *testing.T) {
	ns, h := netnstest.New(t)
	bmc, mach, prov := netip.MustParsePrefix("10.9.0.0/24"), netip.MustParsePrefix("10.8.0.0/24"), netip.MustParsePrefix("10.7.0.0/24")
	first, n := netplumb.RulePriorities(lab)
	top := netplumb.Topology{
		Bridges: []netplumb.Bridge{
			{Name: "np-bmc", Addresses: []netip.Prefix{netip.MustParsePrefix("10.9.0.1/24")}},
			{Name: "np-mach", Addresses: []netip.Prefix{netip.MustParsePrefix("10.8.0.1/24")}},
			{Name: "np-prov", Addresses: []netip.Prefix{netip.MustParsePrefix("10.7.0.1/24")}},
		},
		Rules: []netplumb.Rule{{Priority: first, From: bmc, To: bmc}, {Priority: first + 1, From: bmc, To: mach}, {Priority: first + n - 1, From: bmc, Unreachable: true}},
	}
	p := netplumb.New(h, lab, nil)
	if _, err := p.Apply(context.Background(), top); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	for _, m := range []struct{ bridge, port, addr, gw string }{{"np-mach", "npm0", "10.8.0.2/24", "10.8.0.1"}, {"np-prov", "npp0", "10.7.0.2/24", "10.7.0.1"}} {
		mns := netnstest.Machine(t, ns, m.bridge, m.port, m.addr)
		netnstest.IP(t, "-n", mns, "route", "add", "default", "via", m.gw)
	}
	// A TCP connection from an address of the host to port 9 of a
	// machine, as vbmcd's fetch from a BMC address makes it: refused (the
	// machine answered: reached) or unreachable (no route).
	ping := func(from, to string) (string, error) {
		var err error
		must(t, netplumb.InNamespace(ns, func() error {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 3 * time.Second}
			var c net.Conn
			if c, err = d.Dial("tcp", net.JoinHostPort(to, "9")); err == nil {
				c.Close()
			}
			return nil
		}))
		if errors.Is(err, syscall.ECONNREFUSED) {
			return "reached: " + err.Error(), nil
		}
		if err == nil {
			return "", errors.New("port 9 answered")
		}
		return err.Error(), err
	}
	if out, err := ping("10.9.0.1", "10.8.0.2"); err != nil {
		t.Errorf("from the BMC address to the machine network: %v\n%s", err, out)
	}
	if out, err := ping("10.9.0.1", "10.7.0.2"); !errors.Is(err, syscall.ENETUNREACH) {
		t.Errorf("from the BMC address to the provisioning network: %v, want Network is unreachable\n%s", err, out)
	}
	if out, err := ping("10.8.0.1", "10.7.0.2"); err != nil {
		t.Errorf("from the host's machine address to the provisioning network: %v\n%s", err, out)
	}
	if plan, err := p.Plan(top); err != nil || len(plan.Differences) != 0 {
		t.Fatalf("Plan after Apply: %v, %v", plan, err)
	}

	routed := top
	routed.Rules = append([]netplumb.Rule{{Priority: first + 2, From: bmc, To: prov}}, top.Rules...)
	plan, err := p.Plan(routed)
	if err != nil || len(plan.Differences) != 1 || plan.Differences[0].Kind != netplumb.RuleMissing {
		t.Fatalf("Plan with the provisioning network routed: %+v, %v", plan, err)
	}
	if _, err := p.Apply(context.Background(), routed); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if out, err := ping("10.9.0.1", "10.7.0.2"); err != nil {
		t.Errorf("from the BMC address to the routed provisioning network: %v\n%s", err, out)
	}
	plan, err = p.Plan(top)
	if err != nil || len(plan.Differences) != 1 || plan.Differences[0].Kind != netplumb.RuleExtra {
		t.Fatalf("Plan with the route taken out: %+v, %v", plan, err)
	}
	if _, err := p.Apply(context.Background(), top); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if out, err := ping("10.9.0.1", "10.7.0.2"); err == nil {
		t.Errorf("the route taken out, the provisioning network still answers the BMC address:\n%s", out)
	}
	owned, err := p.OwnedRules()
	if err != nil || len(owned) != 3 {
		t.Fatalf("OwnedRules = %q, %v", owned, err)
	}
	for _, r := range owned {
		must(t, p.DeleteRule(r))
	}
	if left, err := netplumb.ObserveRules(h); err != nil || len(left) != 0 {
		t.Errorf("rules left: %v, %v", left, err)
	}
}
