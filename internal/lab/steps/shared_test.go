package steps

import (
	"context"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/lab/labtest"
	"github.com/bmlab/bmlab/internal/labconfig"
	"github.com/bmlab/bmlab/internal/netaddr"
	"github.com/bmlab/bmlab/internal/plan"
	"github.com/bmlab/bmlab/internal/plan/plantest"
)

// sharedPlan is a lab on the shared network "shnet" (10.198.90.0/24 on
// bridge shbr), with its addresses from .start.
func sharedPlan(t *testing.T, name, cluster string, start, api, ingress int) *plan.Plan {
	t.Helper()
	a := func(i int) string { return "10.198.90." + strconv.Itoa(i) }
	cfg, err := labconfig.Parse([]byte("name: " + name + "\nnetwork: {shared: shnet, libvirtBridge: shbr, bridges: [{name: bm-" + name + "}], veths: [{name: " + name + "-v0, master: bm-" + name + ", peer: " + name + "-v1, peerMaster: shbr}]}\n" +
		"cluster: {clusterName: " + cluster + ", baseDomain: lab.invalid, machineNetwork: 10.198.90.0/24, dhcpRange: {start: " + a(start) + ", end: " + a(start+9) + "}, apiVIP: " + a(api) + ", ingressVIP: " + a(ingress) + ", bmc: {address: " + a(ingress+100) + "}, " +
		"bootstrapProvisioningIP: " + a(api+50) + ", clusterProvisioningIP: " + a(api+51) + "}\n"))
	labtest.Must(t, err)
	p, err := plan.Resolve(cfg, plan.Options{Modes: plantest.Modes(), Dir: "/labs/" + name, Mode: plantest.IPI})
	labtest.Must(t, err)
	if p.Network.NAT != nil || p.Network.Shared == nil {
		t.Fatalf("lab %s: NAT %+v, shared %+v; want shared only", name, p.Network.NAT, p.Network.Shared)
	}
	return p
}

func sharedNet(labs ...lab.Entries) lab.SharedNetwork {
	return lab.SharedNetwork{Name: "shnet", Bridge: "shbr", Active: true, CIDRs: []netip.Prefix{netip.MustParsePrefix("10.198.90.1/24")},
		Ranges: []netaddr.Range{{Start: netip.MustParseAddr("10.198.90.2"), End: netip.MustParseAddr("10.198.90.254")}}, Labs: labs,
		Hosts: []plan.Reservation{{MAC: "52:54:00:aa:bb:cc", IP: netip.MustParseAddr("10.198.90.200"), Name: "someones-vm"}}}
}

// TestSharedClashes: a lab on a shared network is checked against the
// network as the lab file describes it and against every other lab's
// addresses, MACs and names there, each clash naming its setting.
func TestSharedClashes(t *testing.T) {
	ctx := context.Background()
	a := sharedPlan(t, "sha", "ca", 20, 5, 6)
	f := labtest.NewHost()
	e := &lab.Env{Plan: a, Host: f}

	msgs, err := sharedClashes(ctx, e)
	labtest.Must(t, err)
	if len(msgs) != 1 || !strings.Contains(msgs[0], `network.shared: libvirt network "shnet" does not exist`) {
		t.Errorf("no network: %q", msgs)
	}
	n := sharedNet()
	n.Bridge, n.Active, n.CIDRs = "virbr9", false, []netip.Prefix{netip.MustParsePrefix("10.1.0.1/16")}
	f.Shared = []lab.SharedNetwork{n}
	msgs, err = sharedClashes(ctx, e)
	labtest.Must(t, err)
	for _, want := range []string{
		`network.shared: libvirt network "shnet" is not running`,
		`network.libvirtBridge: "shbr", but the shared network "shnet" is on bridge "virbr9"; write libvirtBridge: virbr9`,
		`cluster.machineNetwork: 10.198.90.0/24, but the shared network "shnet" has [10.1.0.1/16]`,
	} {
		if !strings.Contains(strings.Join(msgs, "\n"), want) {
			t.Errorf("wrong network: %q\nwant %q", msgs, want)
		}
	}

	// A joins the right network: no clash; it adds its entries.
	f.Shared = []lab.SharedNetwork{sharedNet()}
	msgs, err = sharedClashes(ctx, e)
	if err != nil || len(msgs) != 0 {
		t.Fatalf("A alone: %q, %v", msgs, err)
	}
	if _, err := EnsureNetwork(ctx, e); err != nil {
		t.Fatal(err)
	}
	if d, err := CheckNetwork(ctx, e); err != nil || slices.ContainsFunc(d, func(x lab.Difference) bool { return x.Kind == "shared-entry" }) {
		t.Errorf("check after ensure: %+v, %v", d, err)
	}

	// A's provisioning services' addresses (Disabled: on the machine
	// network) are reserved as its VIPs are.
	for _, ip := range []string{"10.198.90.55", "10.198.90.56"} {
		if !slices.ContainsFunc(a.Network.Shared.Reservations, func(r plan.Reservation) bool { return r.IP.String() == ip }) {
			t.Errorf("A's reservations lack its provisioning IP %s: %+v", ip, a.Network.Shared.Reservations)
		}
	}

	// B with its own block, VIPs and cluster name: accepted.
	b := sharedPlan(t, "shb", "cb", 40, 7, 8)
	eb := &lab.Env{Plan: b, Host: f}
	if msgs, err := sharedClashes(ctx, eb); err != nil || len(msgs) != 0 {
		t.Errorf("B apart: %q, %v", msgs, err)
	}
	// C overlaps A's block, holds A's API VIP as its ingress VIP, takes the
	// user's VM's address as its API VIP, and has A's cluster domain.
	c := sharedPlan(t, "shc", "ca", 25, 200, 5)
	msgs, err = sharedClashes(ctx, &lab.Env{Plan: c, Host: f})
	labtest.Must(t, err)
	all := strings.Join(msgs, "\n")
	for _, want := range []string{
		`cluster.dhcpRange: 10.198.90.25-10.198.90.34 overlaps lab "sha"'s addresses 10.198.90.20-10.198.90.29 on the shared network shnet; give this lab a range of its own`,
		`cluster.ingressVIP: 10.198.90.5 is lab "sha"'s (sha-api-vip) on the shared network shnet`,
		`cluster.apiVIP: 10.198.90.200 is the network's (someones-vm) on the shared network shnet`,
		`cluster.clusterName: api.ca.lab.invalid is already a name of lab "sha" on the shared network shnet`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("C's clashes:\n%s\nwant %q", all, want)
		}
	}
	// D's API VIP is A's bootstrap provisioning IP.
	dp := sharedPlan(t, "shd", "cd", 60, 55, 57)
	msgs, err = sharedClashes(ctx, &lab.Env{Plan: dp, Host: f})
	labtest.Must(t, err)
	if all := strings.Join(msgs, "\n"); !strings.Contains(all, `cluster.apiVIP: 10.198.90.55 is lab "sha"'s (sha-bootstrap-provisioning-ip) on the shared network shnet`) {
		t.Errorf("D's clashes:\n%s", all)
	}
	// A machine that holds one of C's addresses by a lease.
	f.Shared[0].Leases = []plan.Reservation{{MAC: "52:54:00:12:34:56", IP: netip.MustParseAddr("10.198.90.200"), Name: "vm1"}}
	msgs, err = sharedClashes(ctx, &lab.Env{Plan: c, Host: f})
	labtest.Must(t, err)
	if all := strings.Join(msgs, "\n"); !strings.Contains(all, "cluster.apiVIP: 10.198.90.200 is leased to 52:54:00:12:34:56 (vm1) on the shared network shnet; pick an address nothing holds") {
		t.Errorf("C's clashes with a lease:\n%s", all)
	}
	f.Shared[0].Leases = nil
	// The whole preflight names them and creates nothing.
	if err := Clashes(ctx, &lab.Env{Plan: c, Host: f}); err == nil || !strings.Contains(err.Error(), "nothing was created") {
		t.Errorf("Clashes for C: %v", err)
	}

	// A's entry lost: check reports it, repair restores it (the one path).
	f.Shared[0].Labs = nil
	d, err := CheckNetwork(ctx, e)
	labtest.Must(t, err)
	if !slices.ContainsFunc(d, func(x lab.Difference) bool {
		return x.Kind == "shared-entry" && x.Object == "libvirt network shnet (shared)"
	}) {
		t.Errorf("check with A's entries lost: %+v", d)
	}
	if _, err := EnsureNetwork(ctx, e); err != nil {
		t.Fatal(err)
	}
	if d, _ := CheckNetwork(ctx, e); slices.ContainsFunc(d, func(x lab.Difference) bool { return x.Kind == "shared-entry" }) {
		t.Errorf("check after repair: %+v", d)
	}

	// down --lab sha (no lab file: the plan has no shared network) finds
	// the entries by the network's list and removes A's only.
	if _, err := EnsureNetwork(ctx, eb); err != nil {
		t.Fatal(err)
	}
	bare, err := plan.Resolve(mustParse(t, "name: sha\n"), plan.Options{Modes: plantest.Modes(), Dir: "/labs/sha", Mode: plantest.IPI})
	labtest.Must(t, err)
	rm, err := RemoveNetwork(ctx, &lab.Env{Plan: bare, Host: f, Rep: e.Rep})
	labtest.Must(t, err)
	if !slices.Equal(rm.Shared, []string{"shnet"}) || len(f.Shared[0].Labs) != 1 || f.Shared[0].Labs[0].Lab != "shb" {
		t.Errorf("down --lab sha: removed %q; left %+v", rm.Shared, f.Shared[0].Labs)
	}
}

func mustParse(t *testing.T, s string) *labconfig.Config {
	t.Helper()
	c, err := labconfig.Parse([]byte(s))
	labtest.Must(t, err)
	return c
}

// TestGraphSharedNetwork: the picture draws the shared network (not "not
// the lab's"), red while the lab's entries are missing from it.
func TestGraphSharedNetwork(t *testing.T) {
	p := sharedPlan(t, "sha", "ca", 20, 5, 6)
	dot := GraphDOT(p, nil, nil)
	if !strings.Contains(dot, "shared network shnet\\nbridge shbr") || strings.Contains(dot, "bridge shbr\\n(not the lab's)") {
		t.Errorf("the shared network is not drawn as such:\n%s", dot)
	}
	dot = GraphDOT(p, []lab.Difference{{Object: "libvirt network shnet (shared)", Kind: "shared-entry", Got: "DHCP host sha-master-0: missing"}}, nil)
	if !strings.Contains(dot, `xlabel="shared-entry: DHCP host sha-master-0: missing"`) {
		t.Errorf("the missing entry is not drawn:\n%s", dot)
	}
}
