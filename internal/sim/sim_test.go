package sim

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/bmlab/bmlab/internal/machine"
)

// Machines are found by UUID in any case and by their exact name, and by
// nothing else.
func TestFind(t *testing.T) {
	b := New(12)
	id := UUIDFor("sim-0012")
	for _, q := range []string{id, strings.ToUpper(id), "sim-0012"} {
		m, err := b.Get(q)
		if err != nil || m.ID != id || m.Name != "sim-0012" {
			t.Errorf("Get(%q) = %v, %v; want sim-0012 (%s)", q, m, err, id)
		}
	}
	for _, q := range []string{"sim-12", "sim-0013", "sim-0000", "sim-", "", UUIDFor("sim-0013"), id[:35] + "x", strings.ReplaceAll(id, "-", "")} {
		if _, err := b.Get(q); !errors.Is(err, machine.ErrNotFound) {
			t.Errorf("Get(%q): %v, want ErrNotFound", q, err)
		}
	}
	if ms := b.List(); len(ms) != 12 || ms[0].Name != "sim-0001" || ms[11].ID != id {
		t.Errorf("List: %d machines, first %s, last %s", len(ms), ms[0].Name, ms[11].ID)
	}
}

// The machines are built in shared arrays; a change to one never shows in
// another, nor in a snapshot handed out before it.
func TestChangesStayWithTheirMachine(t *testing.T) {
	b := New(3)
	ms := b.List()
	before := *ms[1]
	ctx := context.Background()
	if err := b.SetMedia(ctx, ms[0].ID, machine.SlotRemovable, "/media/a.iso"); err != nil {
		t.Fatal(err)
	}
	if err := b.SetMedia(ctx, ms[0].ID, machine.SlotCD, "/media/b.iso"); err != nil {
		t.Fatal(err)
	}
	s := ms[0].Settings.Clone()
	s.BIOS["ProcTurboMode"] = "Disabled"
	if err := b.Save(ctx, ms[0].ID, s); err != nil {
		t.Fatal(err)
	}
	now, _ := b.Get(ms[0].ID)
	if len(now.Disks) != 3 || now.Disks[1].Source != "/media/b.iso" || now.Disks[2].Source != "/media/a.iso" {
		t.Errorf("sim-0001's disks after two inserts: %+v", now.Disks)
	}
	if len(ms[0].Disks) != 2 || ms[0].Disks[1].Source != "" || ms[0].Settings.BIOS["ProcTurboMode"] == "Disabled" {
		t.Errorf("the snapshot taken before the changes changed: %+v %v", ms[0].Disks, ms[0].Settings.BIOS["ProcTurboMode"])
	}
	next, _ := b.Get(ms[1].ID)
	if len(next.Disks) != 2 || next.Disks[0].Source != before.Disks[0].Source || next.Disks[1].Source != "" ||
		next.NICs[0].MAC != before.NICs[0].MAC || next.Settings.BIOS["ProcTurboMode"] == "Disabled" {
		t.Errorf("sim-0002 changed with sim-0001: %+v %+v", next.Disks, next.NICs)
	}
}

// 100,000 machines that never changed keep a handful of heap objects, not
// several each: the garbage collector walks none of them (a change, and
// List for viewKeep, are what make snapshots that stay).
func TestUnchangedMachinesCostNoObjects(t *testing.T) {
	live := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapObjects
	}
	before := live()
	b := New(100_000)
	for _, q := range []string{"sim-0001", "sim-100000", UUIDFor("sim-54321")} {
		if _, err := b.Get(q); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.SetIndicator("sim-0007", true); err != nil {
		t.Fatal(err)
	}
	grew := int64(live()) - int64(before)
	if grew > 1000 {
		t.Errorf("100,000 machines, three read and one changed, keep %d heap objects, want under 1,000", grew)
	}
	runtime.KeepAlive(b)
	t.Logf("heap objects kept by 100,000 machines: %d", grew)
}

// A GET of the same unchanged machine again makes nothing: its snapshot is
// kept among the recent ones. A change still shows at once.
func TestRepeatedGetMakesNothing(t *testing.T) {
	b := New(10_000)
	id := UUIDFor("sim-0042")
	first, _ := b.Get(id)
	if allocs := testing.AllocsPerRun(100, func() { b.Get(id) }); allocs != 0 {
		t.Errorf("a repeated GET of an unchanged machine: %.1f allocations, want 0", allocs)
	}
	if again, _ := b.Get(id); again != first {
		t.Errorf("a repeated GET made a new snapshot")
	}
	if err := b.SetIndicator(id, true); err != nil {
		t.Fatal(err)
	}
	if now, _ := b.Get(id); !now.IndicatorLED || now == first || first.IndicatorLED {
		t.Errorf("after a change: LED %v (want on), same snapshot %v, the old one changed %v", now.IndicatorLED, now == first, first.IndicatorLED)
	}
}
