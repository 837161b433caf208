package vbmcd

import (
	"slices"
	"strings"
	"testing"

	"github.com/stmcginnis/gofish/schemas"

	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virttest"
)

// TestE2EBootOrder: a real VM with the marker ISO in its CD drive and the
// marker disk. gofish reads its BootOptions (the disk, the CD drive) and
// Boot.BootOrder; a PATCHed BootOrder really decides what boots (the ISO's
// or the disk's marker on the serial console) from the next start on, and
// survives a restarted vbmcd; an UefiBootNext override boots the option
// BootNext names once, shows over IPMI as that kind of device, and is then
// spent while the BootOrder stays.
func TestE2EBootOrder(t *testing.T) {
	ipmi := newIPMITool(t, "e2e-pass")
	lab := virttest.New(t, "e2e-bootord-")
	vm := lab.NewVM(t, "a", virttest.VMOptions{DiskMarker: true})
	url := daemon(t, "e2e-bootord-", ipmi.ipmiOn)
	c := gofishClient(t, url, "admin", "e2e-pass", false)
	defer c.Logout()
	sysURI := "/redfish/v1/Systems/" + vm.ID

	sys := gofishSystem(t, c, vm.ID)
	opts, err := sys.BootOptions()
	if err != nil {
		t.Fatalf("BootOptions: %v", err)
	}
	var cd, hdd string
	for _, o := range opts {
		switch o.Alias {
		case schemas.CdBootSource:
			cd = o.BootOptionReference
		case schemas.HddBootSource:
			hdd = o.BootOptionReference
		}
	}
	if cd == "" || hdd == "" {
		t.Fatalf("BootOptions %+v: want a Cd and an Hdd option", opts)
	}
	patch := func(body map[string]any) {
		t.Helper()
		resp, err := c.Patch(sysURI, map[string]any{"Boot": body})
		if err != nil {
			t.Fatalf("PATCH Boot %v: %v", body, err)
		}
		resp.Body.Close()
	}
	reset := func(rt schemas.ResetType) {
		t.Helper()
		if _, err := gofishSystem(t, c, vm.ID).Reset(rt); err != nil {
			t.Fatalf("Reset %s: %v", rt, err)
		}
	}
	order := func() []string { return gofishSystem(t, c, vm.ID).Boot.BootOrder }

	// CD first: the ISO's marker.
	patch(map[string]any{"BootOrder": []string{cd, hdd}})
	if got := order(); !slices.Equal(got, []string{cd, hdd}) {
		t.Fatalf("BootOrder %v after the PATCH, want %v", got, []string{cd, hdd})
	}
	reset(schemas.OnResetType)
	cdN := vm.WaitMarker(t, testenv.Marker, 0, bootTimeout)
	if _, disk := vm.Markers(); disk != 0 {
		t.Errorf("with the CD first the disk booted too (%d disk markers)", disk)
	}

	// Disk first: persistent, applied at the next start (a cold restart:
	// the VM runs with the old order).
	patch(map[string]any{"BootOrder": []string{hdd, cd}})
	reset(schemas.ForceRestartResetType)
	diskN := vm.WaitMarker(t, testenv.DiskMarker, 0, bootTimeout)

	// A restarted vbmcd reads the order back from the domain.
	url2 := daemon(t, "e2e-bootord-")
	c2 := gofishClient(t, url2, "admin", "e2e-pass", false)
	defer c2.Logout()
	if got := gofishSystem(t, c2, vm.ID).Boot.BootOrder; !slices.Equal(got, []string{hdd, cd}) {
		t.Errorf("a second vbmcd reads BootOrder %v, want %v", got, []string{hdd, cd})
	}

	// UefiBootNext: the CD once, seen over IPMI as a CD boot.
	patch(map[string]any{"BootSourceOverrideTarget": "UefiBootNext", "BootSourceOverrideEnabled": "Once", "BootNext": cd})
	out, err := ipmi.run("chassis", "bootparam", "get", "5")
	if err != nil || !strings.Contains(out, "CD/DVD") {
		t.Errorf("ipmitool bootparam get 5 with BootNext %s: %v\n%s", cd, err, out)
	}
	reset(schemas.ForceRestartResetType)
	vm.WaitMarker(t, testenv.Marker, cdN, bootTimeout)
	b := gofishSystem(t, c, vm.ID).Boot
	if b.BootSourceOverrideTarget != schemas.NoneBootSource || b.BootNext != "" || !slices.Equal(b.BootOrder, []string{hdd, cd}) {
		t.Errorf("after the BootNext boot: target %s, BootNext %q, BootOrder %v; want None, empty, %v",
			b.BootSourceOverrideTarget, b.BootNext, b.BootOrder, []string{hdd, cd})
	}
	reset(schemas.ForceRestartResetType)
	vm.WaitMarker(t, testenv.DiskMarker, diskN, bootTimeout)

	// Bad input: 400 with the Base message, nothing changed.
	for _, body := range []string{
		`{"Boot": {"BootOrder": ["Hdd-nope"]}}`,
		`{"Boot": {"BootOrder": [5]}}`,
		`{"Boot": {"BootOrder": ["` + cd + `", "` + cd + `"]}}`,
		`{"Boot": {"BootOrder": "` + cd + `"}}`,
		`{"Boot": {"BootSourceOverrideTarget": "UefiBootNext"}}`,
		`{"Boot": {"BootNext": "Pxe-nope"}}`,
	} {
		r, err := send("PATCH", url+sysURI, "admin", "e2e-pass", body)
		if err != nil || r.Code != 400 {
			t.Errorf("PATCH %s: %d %v, want 400", body, r.Code, err)
		}
	}
	if got := order(); !slices.Equal(got, []string{hdd, cd}) {
		t.Errorf("BootOrder %v after refused PATCHes, want %v", got, []string{hdd, cd})
	}
}
