package lab

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func objects(d []NetDifference) []string {
	var out []string
	for _, x := range d {
		s := x.Object + " " + x.Kind
		if x.Blocking {
			s += " (blocking)"
		}
		out = append(out, s)
	}
	return out
}

// TestNetworkPath: check, ensure and remove are one path, the one `labctl
// net` prints and the network action runs. A fresh host differs in every
// object, in repair order; after EnsureNetwork nothing differs and a second
// one changes nothing; RemoveNetwork removes what it made.
func TestNetworkPath(t *testing.T) {
	f := newFake()
	e, _ := testEnv(t, f, "")
	ctx := context.Background()
	diffs, err := CheckNetwork(ctx, e)
	must(t, err)
	want := []string{"libvirt network fk-machine nat-network", "baremetal missing", "bmlab-veth0 missing", "bmlab-veth1 missing", "libvirt network baremetal libvirt-network"}
	if d := cmp.Diff(want, objects(diffs)); d != "" {
		t.Errorf("check of an empty host (-want +got):\n%s", d)
	}
	done, err := EnsureNetwork(ctx, e)
	must(t, err)
	if len(done) != 5 || !strings.Contains(done[0], "fk-machine: NAT network") {
		t.Errorf("ensure = %q, want the NAT network, three links and the bridge network", done)
	}
	if diffs, err = CheckNetwork(ctx, e); err != nil || len(diffs) != 0 {
		t.Errorf("check after ensure = %v, %v; want none", objects(diffs), err)
	}
	if done, err = EnsureNetwork(ctx, e); err != nil || len(done) != 0 {
		t.Errorf("second ensure = %q, %v; want nothing changed", done, err)
	}
	rm, err := RemoveNetwork(ctx, e)
	must(t, err)
	if d := cmp.Diff(NetworkRemoval{Shared: []string{}, Networks: []string{"baremetal", "fk-machine"}, Links: []string{"baremetal", "bmlab-veth0", "bmlab-veth1", "bmnat-fk"}, Foreign: []string{}}, rm); d != "" {
		t.Errorf("remove (-want +got):\n%s", d)
	}
	for kind, objs := range f.objs {
		if len(objs) > 0 {
			t.Errorf("%ss left: %v", kind, objs)
		}
	}
}

// TestNetworkForeign: another lab's objects with the plan's names block the
// check and are never changed by remove.
func TestNetworkForeign(t *testing.T) {
	f := newFake()
	e, _ := testEnv(t, f, "")
	ctx := context.Background()
	f.put(KindNetwork, "baremetal", "other")
	f.put(KindLink, "baremetal", "other")
	diffs, err := CheckNetwork(ctx, e)
	must(t, err)
	got := objects(diffs)
	for _, w := range []string{"baremetal foreign (blocking)", "libvirt network baremetal libvirt-network (blocking)"} {
		if !slices.Contains(got, w) {
			t.Errorf("check = %q, want %q among them", got, w)
		}
	}
	rm, err := RemoveNetwork(ctx, e)
	must(t, err)
	if !slices.Equal(rm.Foreign, []string{"libvirt network baremetal"}) || len(rm.Networks) != 0 {
		t.Errorf("remove = %+v, want the foreign network left and named", rm)
	}
	if f.objs[KindNetwork]["baremetal"] != "other" || f.objs[KindLink]["baremetal"] != "other" {
		t.Errorf("remove changed another lab's objects: %v", f.objs)
	}
}
