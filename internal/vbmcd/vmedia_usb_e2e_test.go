package vbmcd

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
)

// TestE2EUsbMediaAndEjectAfterSoftOff, on a real VM with the marker disk:
// the marker ISO inserted as a USBStick (the Removable member) boots with a
// Usb override, and inserted in the CD with a UsbCd override; each member
// lists TransferProtocolType@Redfish.AllowableValues. Then Ironic's
// clean-up: a soft power-off (GracefulShutdown, which the guest ignores),
// EjectMedia at once, a hard power-off after: the ejection holds, and the
// next boot with a Cd override finds no medium and boots the disk.
func TestE2EUsbMediaAndEjectAfterSoftOff(t *testing.T) {
	lab, vm, url := markerLab(t, "e2e-usbmedia-")
	iso := testenv.MarkerISO(t)
	img := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, iso) }))
	defer img.Close()
	sys := "/redfish/v1/Systems/" + vm.ID
	media := "/redfish/v1/Managers/" + vm.ID + "/VirtualMedia/"
	do := func(method, path, body string, want int) map[string]any {
		t.Helper()
		r, err := send(method, url+path, "admin", "e2e-pass", body)
		if err != nil || r.Code != want {
			t.Fatalf("%s %s %s: %d %v %s, want %d", method, path, body, r.Code, err, r.Body, want)
		}
		return r.object()
	}
	for _, slot := range []string{"Cd", "Removable"} {
		v := do("GET", media+slot, "", 200)
		allowed, _ := v["TransferProtocolType@Redfish.AllowableValues"].([]any)
		if !slices.Contains(allowed, any("HTTP")) || !slices.Contains(allowed, any("HTTPS")) {
			t.Errorf("%s: TransferProtocolType@Redfish.AllowableValues %v, want HTTP and HTTPS among them", slot, v["TransferProtocolType@Redfish.AllowableValues"])
		}
	}

	// A USB stick: the Removable member, a Usb override.
	do("POST", media+"Removable/Actions/VirtualMedia.InsertMedia", `{"Image":"`+img.URL+`/stick.iso"}`, 204)
	do("PATCH", sys, `{"Boot":{"BootSourceOverrideTarget":"Usb","BootSourceOverrideEnabled":"Once"}}`, 200)
	do("POST", sys+"/Actions/ComputerSystem.Reset", `{"ResetType":"On"}`, 204)
	n := vm.WaitMarker(t, testenv.Marker, 0, bootTimeout)
	if _, d := vm.Markers(); d != 0 {
		t.Errorf("the disk booted, not the USB stick")
	}
	lab.WaitPower(t, vm.ID, machine.PowerOff, bootTimeout) // the ISO halts
	do("POST", media+"Removable/Actions/VirtualMedia.EjectMedia", `{}`, 204)

	// A USB CD: the CD member, a UsbCd override.
	do("POST", media+"Cd/Actions/VirtualMedia.InsertMedia", `{"Image":"`+img.URL+`/cd.iso"}`, 204)
	do("PATCH", sys, `{"Boot":{"BootSourceOverrideTarget":"UsbCd","BootSourceOverrideEnabled":"Once"}}`, 200)
	do("POST", sys+"/Actions/ComputerSystem.Reset", `{"ResetType":"On"}`, 204)
	n = vm.WaitMarker(t, testenv.Marker, n, bootTimeout)
	lab.WaitPower(t, vm.ID, machine.PowerOff, bootTimeout)

	// The disk runs (it stays in grub), the CD still holds the ISO.
	do("POST", sys+"/Actions/ComputerSystem.Reset", `{"ResetType":"On"}`, 204)
	d := vm.WaitMarker(t, testenv.DiskMarker, 0, bootTimeout)
	// Ironic's clean-up: soft off, eject, hard off when the soft one did
	// not take.
	do("POST", sys+"/Actions/ComputerSystem.Reset", `{"ResetType":"GracefulShutdown"}`, 204)
	do("POST", media+"Cd/Actions/VirtualMedia.EjectMedia", `{}`, 204)
	do("POST", sys+"/Actions/ComputerSystem.Reset", `{"ResetType":"ForceOff"}`, 204)
	lab.WaitPower(t, vm.ID, machine.PowerOff, bootTimeout)
	if v := do("GET", media+"Cd", "", 200); v["Inserted"] != false || v["Image"] != nil {
		t.Errorf("after soft off, eject, hard off: Inserted %v Image %v, want false and null", v["Inserted"], v["Image"])
	}
	do("PATCH", sys, `{"Boot":{"BootSourceOverrideTarget":"Cd","BootSourceOverrideEnabled":"Once"}}`, 200)
	do("POST", sys+"/Actions/ComputerSystem.Reset", `{"ResetType":"On"}`, 204)
	vm.WaitMarker(t, testenv.DiskMarker, d, bootTimeout)
	if cd, _ := vm.Markers(); cd != n {
		t.Errorf("the ejected CD booted (%d CD markers, want %d)", cd, n)
	}
}
