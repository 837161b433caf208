package listen

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/machine"
)

// TestBMCAddressAssignment: pins first; a recorded address still in a
// range is kept; the rest take the lowest free addresses, range by range;
// a recorded address outside the ranges, or another machine's pin, is
// replaced; a machine past the last address gets none.
func TestBMCAddressAssignment(t *testing.T) {
	pool, err := ParsePool([]string{"fd00::10-fd00::11", "127.0.0.5", "pinned=127.0.0.9"})
	if err != nil {
		t.Fatal(err)
	}
	mk := func(name, recorded string) *machine.Machine {
		m := &machine.Machine{ID: "uuid-" + name, Name: name}
		m.Settings.BMCAddress = recorded
		return m
	}
	ms := []*machine.Machine{
		mk("a", ""),
		mk("b", "fd00::11"),  // kept
		mk("c", "127.0.0.9"), // the pin's: replaced
		mk("pinned", ""),
		mk("d", "10.0.0.1"), // outside the ranges: replaced
		mk("e", ""),         // none left
	}
	want, short := pool.assign(ms)
	got := map[string]string{}
	for id, a := range want {
		got[id] = a.String()
	}
	if diff := cmp.Diff(map[string]string{
		"uuid-a": "fd00::10", "uuid-b": "fd00::11", "uuid-c": "127.0.0.5", "uuid-pinned": "127.0.0.9",
	}, got); diff != "" {
		t.Errorf("assignment (-want +got):\n%s", diff)
	}
	if len(short) != 2 || short[0].Name != "d" || short[1].Name != "e" {
		t.Errorf("left without an address: %v, want d and e", short)
	}
	if pool.size() != 4 || !pool.InRange(netip.MustParseAddr("fd00::11")) || pool.InRange(netip.MustParseAddr("127.0.0.9")) ||
		pool.InRange(netip.MustParseAddr("::ffff:127.0.0.5")) { // a range holds addresses of its own family only
		t.Errorf("size %d, ranges %v", pool.size(), pool.ranges)
	}
	if got := pool.unmatchedPins(ms[:3]); len(got) != 1 || got[0] != "pinned" {
		t.Errorf("unmatched pins: %v", got)
	}
	// A pin by UUID, in any case.
	byID, _ := ParsePool([]string{"UUID-A=127.0.0.7"})
	if a, ok := byID.pinFor(ms[0]); !ok || a.String() != "127.0.0.7" {
		t.Errorf("pin by UUID: %v %v", a, ok)
	}
}
