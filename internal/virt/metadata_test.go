package virt

import (
	"encoding/xml"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/machine"
)

// TestMetadataKeepsBootOrderAndClock: the boot order, BootNext, the
// BMC's clock, its own address and its personality with its quirk switches
// go into the domain's metadata and come back unchanged.
func TestMetadataKeepsBootOrderAndClock(t *testing.T) {
	st := machine.DefaultSettings(machine.BootModeUEFI, false)
	st.BootOrder = []string{"Cd-sda", "Hdd-vda", "Pxe-525400000001"}
	st.Boot.Target, st.Boot.Enabled, st.Boot.BootNext = machine.BootUefiBootNext, machine.BootOnce, "UefiHttp-525400000001"
	st.Clock = machine.Clock{Skew: -3*time.Hour - 7*time.Second, Offset: "-04:00"}
	st.BMCAddress = "fd00:bm::12"
	st.Personality, st.Quirks = "idrac10", "-power-on-conflict,stale-inserted"
	m, err := toMeta(st, "hd", false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := xml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var back bmcMeta
	if err := xml.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	got, err := back.settings()
	if err != nil {
		t.Fatal(err)
	}
	type kept struct {
		Order          []string
		Boot           machine.Boot
		Clock          machine.Clock
		Address        string
		Persona, Quirk string
	}
	want := kept{st.BootOrder, st.Boot, st.Clock, st.BMCAddress, st.Personality, st.Quirks}
	if diff := cmp.Diff(want, kept{got.BootOrder, got.Boot, got.Clock, got.BMCAddress, got.Personality, got.Quirks}); diff != "" {
		t.Errorf("round trip through %s (-want +got):\n%s", b, diff)
	}
}
