package vbmcd

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/digitalocean/go-libvirt"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virt"
	"github.com/bmlab/bmlab/internal/virttest"
)

// TestE2EUefiHttpBootEFI: a UefiHttp override whose HttpBootUri names a
// UEFI application (the marker EFI binary, a standalone GRUB, as an iPXE
// or shim .efi is), served on loopback, boots it: vbmcd fetches it and
// gives it to the CD drive as the ISO that boots it by the UEFI default
// path, and OVMF runs it, which prints its marker on the serial console.
// The Once override is spent and the next boot is the disk's. A file that
// is neither an ISO nor an application fails the power-on and says why,
// and a Legacy boot mode is refused, both through python3-sushy.
func TestE2EUefiHttpBootEFI(t *testing.T) {
	fw := virt.DetectFirmware()
	testenv.Require(t, fw.Code != "", "OVMF (package ovmf)")
	efi := testenv.MarkerEFI(t)
	images := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/marker.efi":
			http.ServeFile(w, r, efi)
		case "/readme.txt":
			w.Write([]byte("This is not a boot image.\n"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(images.Close)
	lab := virttest.New(t, "e2e-efiboot-")
	vm := lab.NewVM(t, "a", virttest.VMOptions{UEFI: true, NoCD: true, DiskMarker: true})
	url := daemon(t, "e2e-efiboot-")

	// HTTP boot is a UEFI boot.
	app := images.URL + "/marker.efi"
	st := sushySecureBoot(t, url, vm.ID, "http-boot", app, "Once", "Legacy")
	if st.Refused == nil || st.Refused.Status != http.StatusConflict || !slices.Contains(st.Refused.Messages, "PropertyValueConflict") {
		t.Errorf("UefiHttp with BootSourceOverrideMode Legacy: %+v, want 409 PropertyValueConflict", st.Refused)
	}

	// A file that is neither an ISO nor a UEFI application: the power-on
	// fails and says why, in the answer or in the system's health.
	if st = sushySecureBoot(t, url, vm.ID, "http-boot", images.URL+"/readme.txt", "Once"); st.Refused != nil {
		t.Fatalf("UefiHttp override: %+v", st.Refused)
	}
	if st = sushySecureBoot(t, url, vm.ID, "reset", "On"); st.Refused != nil {
		if st.Refused.Status != http.StatusBadRequest || !slices.Contains(st.Refused.Messages, "PropertyValueFormatError") {
			t.Errorf("On with a text file as the boot image: %+v, want 400 PropertyValueFormatError", st.Refused)
		}
	} else if !testenv.WaitFor(bootTimeout, func() bool {
		v := getJSON(t, url, "/redfish/v1/Systems/"+vm.ID)
		s, _ := v["Status"].(map[string]any)
		return s["Health"] == "Critical" && strings.Contains(string(mustJSON(t, v["Status"])), "and not a UEFI application")
	}) {
		t.Errorf("On with a text file as the boot image was accepted and the system never said why")
	}
	if s := lab.DomainState(t, vm.Name); s != libvirt.DomainShutoff {
		t.Errorf("the VM started although its UefiHttp image is no boot image (state %d)", s)
	}

	if st = sushySecureBoot(t, url, vm.ID, "http-boot", app, "Once"); st.Refused != nil || st.Boot["HttpBootUri"] != app || st.Boot["BootSourceOverrideTarget"] != "UefiHttp" {
		t.Fatalf("UefiHttp override: %+v", st)
	}
	sushy(t, url, "admin", "e2e-pass", vm.ID, "reset", "On")
	vm.WaitMarker(t, testenv.EFIMarker, 0, 2*bootTimeout)
	if _, d := vm.Markers(); d != 0 {
		t.Errorf("the disk booted although the override said UefiHttp")
	}
	cd := getJSON(t, url, "/redfish/v1/Managers/"+vm.ID+"/VirtualMedia/Cd")
	if cd["Inserted"] != true || cd["Image"] != app {
		t.Errorf("Cd during the UefiHttp boot: Inserted %v, Image %v; want true, %s", cd["Inserted"], cd["Image"], app)
	}
	lab.WaitPower(t, vm.ID, machine.PowerOff, bootTimeout) // the marker application halts

	// The override was Once: the next boot is the disk's, and takes the
	// image out.
	if st = sushySecureBoot(t, url, vm.ID, "show"); st.Boot["BootSourceOverrideEnabled"] != "Disabled" {
		t.Errorf("the Once override stayed: %v", st.Boot)
	}
	sushy(t, url, "admin", "e2e-pass", vm.ID, "reset", "On")
	vm.WaitMarker(t, testenv.DiskMarker, 0, 2*bootTimeout)
	if n := testenv.Count(vm.SerialLog, testenv.EFIMarker); n != 1 {
		t.Errorf("the marker application printed %d times; want once, for the one UefiHttp boot", n)
	}
	if cd := getJSON(t, url, "/redfish/v1/Managers/"+vm.ID+"/VirtualMedia/Cd"); cd["Inserted"] != false {
		t.Errorf("Cd after a boot without the override: Inserted %v, Image %v", cd["Inserted"], cd["Image"])
	}
}
