package vbmcd

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virttest"
)

// TestE2EReplacedImageIsFetchedAgain: Ironic links a new image into its
// HTTP root under the same name, often with an older modification time
// than the one there before. The BMC must boot the new image: a server
// asked with If-Modified-Since would answer 304 and the old ISO would boot
// (issue 25, an undeploy's cleaning booted the previous instance ISO).
func TestE2EReplacedImageIsFetchedAgain(t *testing.T) {
	lab := virttest.New(t, "e2e-replace-")
	vm := lab.NewVM(t, "a", virttest.VMOptions{DiskMarker: true})
	url := daemon(t, "e2e-replace-")
	first := testenv.MarkerISOWith(t, "marker-first.iso", "BMLAB-FIRST-IMAGE")
	second := testenv.MarkerISOWith(t, "marker-second.iso", "BMLAB-SECOND-IMAGE")

	root := t.TempDir()
	served := filepath.Join(root, "boot-node.iso")
	put := func(src string, mod time.Time) {
		t.Helper()
		testenv.CopyFile(t, src, served+".new")
		if err := os.Chtimes(served+".new", mod, mod); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(served+".new", served); err != nil { // as a link into the HTTP root appears
			t.Fatal(err)
		}
	}
	img := httptest.NewServer(http.FileServer(http.Dir(root)))
	defer img.Close()

	cd := "/redfish/v1/Managers/" + vm.ID + "/VirtualMedia/Cd"
	sys := "/redfish/v1/Systems/" + vm.ID
	boot := func(marker string) {
		t.Helper()
		if c, b := postJSON(t, url, cd+"/Actions/VirtualMedia.EjectMedia", `{}`); c/100 != 2 {
			t.Fatalf("EjectMedia: %d %s", c, b)
		}
		if c, b := postJSON(t, url, cd+"/Actions/VirtualMedia.InsertMedia", `{"Image":"`+img.URL+`/boot-node.iso"}`); c/100 != 2 {
			t.Fatalf("InsertMedia: %d %s", c, b)
		}
		r, err := send("PATCH", url+sys, "admin", "e2e-pass", `{"Boot":{"BootSourceOverrideTarget":"Cd","BootSourceOverrideEnabled":"Once"}}`)
		if err != nil || r.Code/100 != 2 {
			t.Fatalf("PATCH boot: %v %d %s", err, r.Code, r.Body)
		}
		if c, b := postJSON(t, url, sys+"/Actions/ComputerSystem.Reset", `{"ResetType":"On"}`); c/100 != 2 {
			t.Fatalf("Reset On: %d %s", c, b)
		}
		vm.WaitMarker(t, marker, 0, bootTimeout)
		lab.WaitPower(t, vm.ID, machine.PowerOff, bootTimeout) // the marker ISO halts
	}

	now := time.Now()
	put(first, now.Add(-time.Hour))
	boot("BMLAB-FIRST-IMAGE")
	put(second, now.Add(-48*time.Hour)) // other content, an older time
	boot("BMLAB-SECOND-IMAGE")
	if n := testenv.Count(vm.SerialLog, "BMLAB-FIRST-IMAGE"); n != 1 {
		t.Errorf("the first image booted %d times, want 1 (the second boot must use the replaced image)", n)
	}
}
