package machine

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBootPlan(t *testing.T) {
	inv := Inventory{
		Disks: []Disk{{ID: "vda", Device: DeviceDisk, Bus: "virtio"}, {ID: "sda", Device: DeviceCDROM, Bus: "sata"}},
		NICs:  []NIC{{MAC: "52:54:00:00:00:01"}},
	}
	refs := func(plan []BootOption) []string {
		var out []string
		for _, o := range plan {
			out = append(out, o.Ref)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		st   Settings
		want []string
	}{
		{"no order, no BootNext: by kind", Settings{Boot: Boot{Target: BootCd, Enabled: BootOnce}}, nil},
		{"order", Settings{BootOrder: []string{"Cd-sda", "Hdd-vda"}}, []string{"Cd-sda", "Hdd-vda"}},
		{"order and a Pxe override", Settings{BootOrder: []string{"Hdd-vda"}, Boot: Boot{Target: BootPxe, Enabled: BootContinuous}},
			[]string{"Pxe-525400000001", "Hdd-vda"}},
		{"BootNext over the own order", Settings{Boot: Boot{Target: BootUefiBootNext, Enabled: BootOnce, BootNext: "UefiHttp-525400000001"}},
			[]string{"UefiHttp-525400000001", "Hdd-vda", "Cd-sda", "Pxe-525400000001"}},
		{"spent BootNext", Settings{BootOrder: []string{"Hdd-vda"}, Boot: Boot{Target: BootNone, Enabled: BootDisabled, BootNext: "Cd-sda"}},
			[]string{"Hdd-vda"}},
	} {
		if diff := cmp.Diff(tc.want, refs(BootPlan(inv, tc.st))); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
	if err := checkBootOrder(inv, []string{"Hdd-vda", "Hdd-vda"}); err == nil {
		t.Errorf("a repeated option was accepted")
	}
	if err := checkBootOrder(inv, []string{"Hdd-vdz"}); err == nil {
		t.Errorf("an unknown option was accepted")
	}
}
