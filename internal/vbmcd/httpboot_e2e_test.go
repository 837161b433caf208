package vbmcd

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

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
	onRefused(t, url, lab, vm, "PropertyValueFormatError", "and not a UEFI application", "a text file as the boot image")

	httpBootOnce(t, url, lab, vm, app, testenv.EFIMarker)
	// The override was Once: the next boot is the disk's, and takes the
	// image out.
	onceSpent(t, url, vm)
	if n := testenv.Count(vm.SerialLog, testenv.EFIMarker); n != 1 {
		t.Errorf("the marker application printed %d times; want once, for the one UefiHttp boot", n)
	}
}
