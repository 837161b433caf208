package vbmcd

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/testenv"
)

// TestE2EPowerOnDoesNotWaitForFirmware: SimpleUpdate of a BIOS image from a
// slow image server, then On, as Ironic's update-then-reboot flow does. The
// machine starts at once (a real BMC does not hold a power-on for a
// download); the image, staged once it arrives, applies at the next reset.
// Before issue 25's fix the start waited on the firmware task for the whole
// --media-wait (the system read PoweringOn) and was then refused.
func TestE2EPowerOnDoesNotWaitForFirmware(t *testing.T) {
	_, vm, url := markerLab(t, "e2e-fwslow-")
	sys := "/redfish/v1/Systems/" + vm.ID

	// The server sends half the image, then holds the rest until released
	// (well within the cache's 60 s stall bound).
	image := []byte("BIOS 2.4.0 payload, slowly")
	release := make(chan struct{})
	var once bool
	free := func() {
		if !once {
			once = true
			close(release)
		}
	}
	t.Cleanup(free)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(image)))
		w.WriteHeader(http.StatusOK)
		w.Write(image[:len(image)/2])
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-time.After(45 * time.Second):
		}
		w.Write(image[len(image)/2:])
	}))
	defer srv.Close()

	up := sushyFirmware(t, url, vm.ID, "update", srv.URL+"/fw/bios-2.4.0.bin", sys)
	if !up.Processing || up.Monitor == "" {
		t.Fatalf("SimpleUpdate: %+v, want a running task", up)
	}
	sushy(t, url, "admin", "e2e-pass", vm.ID, "reset", "On")
	// The VM boots while the image is still on its way (the server holds
	// it for 45 s; --media-wait is 1 min).
	n := vm.WaitMarker(t, testenv.DiskMarker, 0, 40*time.Second)
	if mon := sushyFirmware(t, url, vm.ID, "monitor", up.Monitor); !mon.Processing || slices.Contains(mon.ids(), "Update.1.0.2.AwaitToActivate") {
		t.Fatalf("the download should still run while the VM boots: %+v", mon)
	}
	free()
	var mon sushyUpdate
	if !testenv.WaitFor(20*time.Second, func() bool {
		mon = sushyFirmware(t, url, vm.ID, "monitor", up.Monitor)
		return slices.Contains(mon.ids(), "Update.1.0.2.AwaitToActivate")
	}) {
		t.Fatalf("the BIOS update is not staged for the next reset: %+v", mon)
	}
	if inv := sushyFirmware(t, url, vm.ID, "inventory"); inv.BIOS == "2.4.0" {
		t.Errorf("the BIOS update applied without a reset (BiosVersion %q)", inv.BIOS)
	}
	sushy(t, url, "admin", "e2e-pass", vm.ID, "reset", "ForceRestart")
	mon = sushyFirmware(t, url, vm.ID, "monitor", up.Monitor, "wait")
	if mon.State != "Completed" || !slices.Equal(mon.ids(), []string{"Update.1.0.2.UpdateSuccessful"}) {
		t.Errorf("after the reset the task is %+v, want Completed, UpdateSuccessful", mon)
	}
	if inv := sushyFirmware(t, url, vm.ID, "inventory"); inv.BIOS != "2.4.0" {
		t.Errorf("after the reset BiosVersion %q, want 2.4.0", inv.BIOS)
	}
	vm.WaitMarker(t, testenv.DiskMarker, n, bootTimeout)
}
