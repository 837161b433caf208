package labvirt

import (
	"context"
	"encoding/xml"
	"errors"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/digitalocean/go-libvirt"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/netaddr"
	"github.com/bmlab/bmlab/internal/testenv"
)

// sharedTestSpec is lab "lt-joiner"'s part of the network name (on bridge).
func sharedTestSpec(name, bridge string) SharedSpec {
	return SharedSpec{Network: name, Bridge: bridge, CIDR: netip.MustParsePrefix("10.198.77.0/24"), Entries: SharedEntries{
		Lab: "lt-joiner", Block: netaddr.Range{Start: netip.MustParseAddr("10.198.77.50"), End: netip.MustParseAddr("10.198.77.60")},
		Hosts: []SharedHost{
			{MAC: "52:54:00:77:01:50", IP: "10.198.77.50", Name: "lt-joiner-master-0"},
			{MAC: "52:54:00:77:01:07", IP: "10.198.77.7", Name: "lt-joiner-api-vip"},
		},
		Records: []SharedRecord{
			{IP: "10.198.77.50", Names: []string{"lt-joiner-master-0", "lt-joiner-master-0.j.lab.local"}},
			{IP: "10.198.77.7", Names: []string{"api.j.lab.local", "api-int.j.lab.local"}},
		},
	}}
}

// TestSharedMetadataEdit: a lab's entries go into a network's metadata
// and come back as they were, its block written "start-end" (the form
// networks already carry); a lab without a block writes none, and a block
// that does not parse reads as no range; removing the entries leaves the
// owner's mark alone.
func TestSharedMetadataEdit(t *testing.T) {
	mark := MarkXML("owner")
	e := sharedTestSpec("n", "b").Entries
	inner, err := withSharedLabs(mark, []SharedEntries{e})
	if err != nil {
		t.Fatal(err)
	}
	if MarkOf(inner) != "owner" {
		t.Errorf("the owner's mark is lost: %s", inner)
	}
	if !strings.Contains(inner, `block="10.198.77.50-10.198.77.60"`) {
		t.Errorf("the block is not written start-end: %s", inner)
	}
	none, err := withSharedLabs(mark, []SharedEntries{{Lab: "noblock"}})
	if err != nil || strings.Contains(none, "block=") {
		t.Errorf("a lab without a block: %s, %v", none, err)
	}
	bad, _, _, err := sharedLabs(strings.Replace(inner, "10.198.77.50-10.198.77.60", "10.198.77.50-", 1))
	if err != nil || len(bad) != 1 || bad[0].Block != (netaddr.Range{}) || len(bad[0].Hosts) != 2 {
		t.Errorf("a block that does not parse: %+v, %v", bad, err)
	}
	labs, _, _, err := sharedLabs(inner)
	if err != nil || len(labs) != 1 || !sameEntries(labs[0], e) {
		t.Fatalf("read back %+v, %v from %s", labs, err, inner)
	}
	back, err := withSharedLabs(inner, nil)
	if err != nil || back != mark {
		t.Errorf("removed: %q, %v; want %q", back, err, mark)
	}
}

// TestSharedNetwork: a lab joins another lab's NAT network. Its entries go
// in live (the bridge is never restarted) and resolve; the owner sees no
// drift and keeps them through a redefinition; a lost entry is reported
// and restored; the owner's delete is refused while the joiner is on; the
// joiner's removal takes exactly its entries and its list.
func TestSharedNetwork(t *testing.T) {
	l := ltCleanConn(t)
	ctx := context.Background()
	owner := freshLabNet(t, l, "lt-sh-", "lt-shbr-")
	t.Cleanup(func() { _, _ = removeShared(context.Background(), l, owner.Name, "lt-joiner") }) // before the delete
	if _, err := ensureLabNetwork(ctx, l, owner); err != nil {
		t.Fatal(err)
	}
	_, bridgeIndex := labciBridge(t, owner.Bridge)
	index := bridgeIndex()
	spec := sharedTestSpec(owner.Name, owner.Bridge)

	wrong := spec
	wrong.Bridge = "lt-other"
	if _, err := ensureShared(ctx, l, wrong); err == nil || !strings.Contains(err.Error(), "bridge: the lab wants lt-other, the network has "+owner.Bridge) {
		t.Errorf("ensure on the wrong bridge: %v", err)
	}
	if p, err := sharedProblems(ctx, l, spec); err != nil || len(p) != 5 {
		t.Errorf("problems before: %q, %v; want 4 entries and the list", p, err)
	}
	done, err := ensureShared(ctx, l, spec)
	if err != nil || len(done) == 0 {
		t.Fatalf("ensureShared = %q, %v", done, err)
	}
	if done, err := ensureShared(ctx, l, spec); err != nil || len(done) != 0 {
		t.Errorf("ensureShared again = %q, %v; want nothing done", done, err)
	}
	if got := bridgeIndex(); got != index {
		t.Errorf("joining restarted the network: bridge index %d, was %d", got, index)
	}
	if !strings.Contains(testenv.ReadFile(t, "/var/lib/libvirt/dnsmasq/"+owner.Name+".hostsfile"), "52:54:00:77:01:50,10.198.77.50,lt-joiner-master-0") {
		t.Error("the joiner's reservation is not in dnsmasq's hostsfile")
	}
	labNetResolve(t, "10.198.77.1", map[string]string{
		"lt-joiner-master-0.j.lab.local": "10.198.77.50", "api-int.j.lab.local": "10.198.77.7",
		"master-0.ocp.lab.local": "10.198.77.10", "api.ocp.lab.local": "10.198.77.5",
	})
	if d, err := labNetworkDrift(ctx, l, owner); err != nil || len(d) != 0 {
		t.Errorf("the owner's drift with a joiner: %q, %v; want none", d, err)
	}
	nets, err := sharedNetworks(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(nets, func(n lab.SharedNetwork) bool { return n.Name == owner.Name })
	if i < 0 || nets[i].Owner != owner.Lab || len(nets[i].Labs) != 1 || !reflect.DeepEqual(nets[i].Labs[0], labEntries(spec.Entries)) ||
		len(nets[i].Hosts) != 2 || nets[i].Bridge != owner.Bridge || len(nets[i].Ranges) != 1 {
		t.Errorf("sharedNetworks: %+v", nets)
	}

	// A reservation lost from the running network: reported, restored.
	st, err := getLabNetState(ctx, l, owner.Name)
	if err != nil {
		t.Fatal(err)
	}
	x, _ := xml.Marshal(spec.Entries.Hosts[0].xml())
	if err := l.NetworkUpdateCompat(st.net, libvirt.NetworkUpdateCommandDelete, libvirt.NetworkSectionIPDhcpHost, -1, string(x), libvirt.NetworkUpdateAffectLive); err != nil {
		t.Fatal(err)
	}
	if p, err := sharedProblems(ctx, l, spec); err != nil || len(p) != 1 || !strings.Contains(p[0], "lt-joiner-master-0 52:54:00:77:01:50 10.198.77.50: missing from the running network") {
		t.Errorf("problems with a lost reservation: %q, %v", p, err)
	}
	if _, err := ensureShared(ctx, l, spec); err != nil {
		t.Fatal(err)
	}
	if p, err := sharedProblems(ctx, l, spec); err != nil || len(p) != 0 {
		t.Errorf("problems after repair: %q, %v", p, err)
	}

	// The owner redefines (another MTU restarts its network): the joiner's
	// entries and list stay.
	mtu := owner
	mtu.MTU = 9000
	if _, err := ensureLabNetwork(ctx, l, mtu); err != nil {
		t.Fatal(err)
	}
	if p, err := sharedProblems(ctx, l, spec); err != nil || len(p) != 0 {
		t.Errorf("the joiner's problems after the owner's redefinition: %q, %v", p, err)
	}

	// The owner cannot take the network away from under the joiner.
	if _, err := deleteLabNetwork(ctx, l, owner.Name, owner.Lab); !errors.Is(err, ErrNetworkShared) || !strings.Contains(err.Error(), "labs lt-joiner") {
		t.Errorf("the owner's delete with a joiner: %v; want ErrNetworkShared naming lt-joiner", err)
	}

	// The joiner leaves: exactly its entries and list go.
	if removed, err := removeShared(ctx, l, owner.Name, "lt-joiner"); err != nil || !removed {
		t.Fatalf("removeShared = %v, %v", removed, err)
	}
	if removed, err := removeShared(ctx, l, owner.Name, "lt-joiner"); err != nil || removed {
		t.Errorf("removeShared again = %v, %v; want nothing", removed, err)
	}
	if hf := testenv.ReadFile(t, "/var/lib/libvirt/dnsmasq/"+owner.Name+".hostsfile"); strings.Contains(hf, "lt-joiner") || !strings.Contains(hf, "master-0") {
		t.Errorf("dnsmasq hostsfile after the joiner left:\n%s", hf)
	}
	if d, err := labNetworkDrift(ctx, l, mtu); err != nil || len(d) != 0 {
		t.Errorf("the owner's drift after the joiner left: %q, %v", d, err)
	}
	st, err = getLabNetState(ctx, l, owner.Name)
	if err != nil {
		t.Fatal(err)
	}
	if m := metadataOf(st.def); strings.Contains(m, SharedNS) || MarkOf(m) != owner.Lab {
		t.Errorf("metadata after the joiner left: %s", m)
	}
}
