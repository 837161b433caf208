package vbmcd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
)

type sushyUpdate struct {
	Monitor    string
	Processing bool
	State      string
	Status     string
	StatusCode int `json:"status_code"`
	Messages   []struct{ ID, Message string }
	Inventory  map[string]string
	BIOS       string `json:"bios_version"`
	BMC        string `json:"bmc_version"`
	// The stable step's outcome.
	Stable   bool
	Attempts int
	Errors   []string
}

// ids are the task's message IDs.
func (s sushyUpdate) ids() []string {
	var out []string
	for _, m := range s.Messages {
		out = append(out, m.ID)
	}
	return out
}

// sushyFirmware runs one step of the firmware update flow through
// python3-sushy's update service API.
func sushyFirmware(t *testing.T, url, id string, step ...string) sushyUpdate {
	t.Helper()
	return adminStep[sushyUpdate](t, "sushy_update.py", url, id, step...)
}

// firmwareServer serves firmware images on loopback, as Ironic's
// conductor or an HTTP server next to it would.
func firmwareServer(t *testing.T) string {
	t.Helper()
	images := map[string][]byte{
		"/fw/bios-2.3.1.bin": []byte("BIOS 2.3.1 payload"),
		"/fw/bios-5.0.bin":   {},
		"/fw/cpld-1.0.bin":   []byte("CPLD payload"),
		"/fw/firmware.bin":   []byte(machine.FirmwareManifestMagic + "\n" + `{"Component": "BMC", "Version": "5.1.0"}` + "\nBMC payload"),
		// Over the bound of firmware images: refused on its Content-Length.
		"/fw/bios-6.0.bin": make([]byte, machine.MaxFirmwareBytes+1),
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := images[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, r.URL.Path, time.Now().Add(-time.Hour), bytes.NewReader(b))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestE2EFirmwareUpdate drives firmware updates through vbmcd on a real VM
// as Ironic's redfish firmware interface does, with python3-sushy:
// SimpleUpdate of the BIOS with the system as target, the version unchanged
// until the reset, the task Completed and the new version after it; images
// that cannot be used end their task in Exception with the Update and Base
// messages that say why; a BMC update takes the BMC away for the window a
// client sees, then shows the new version; a restarted vbmcd shows the
// versions.
func TestE2EFirmwareUpdate(t *testing.T) {
	const downtime = 3 * time.Second
	_, vm, url := markerLab(t, "e2e-fwupd-", func(c *Config) { c.BMCUpdateDowntime = downtime })
	images := firmwareServer(t)
	sys := "/redfish/v1/Systems/" + vm.ID

	sushy(t, url, "admin", "e2e-pass", vm.ID, "reset", "On")
	n := vm.WaitMarker(t, testenv.DiskMarker, 0, bootTimeout)

	inv := sushyFirmware(t, url, vm.ID, "inventory")
	for _, c := range machine.FirmwareComponents {
		if v := inv.Inventory[string(c)+"-"+vm.ID]; v != machine.FactoryFirmware {
			t.Errorf("factory %s version %q, want %s (inventory %v)", c, v, machine.FactoryFirmware, inv.Inventory)
		}
	}

	// Ironic's flow: SimpleUpdate, a reboot, the task monitor polled until
	// done, the versions read again.
	start := time.Now()
	up := sushyFirmware(t, url, vm.ID, "update", images+"/fw/bios-2.3.1.bin", sys)
	accepted := time.Since(start)
	if !up.Processing || up.Monitor == "" || up.State != "Running" {
		t.Fatalf("SimpleUpdate: %+v, want a running task and its monitor", up)
	}
	// Staged: the task waits for the reset, and the old version shows.
	var mon sushyUpdate
	if !testenv.WaitFor(10*time.Second, func() bool {
		mon = sushyFirmware(t, url, vm.ID, "monitor", up.Monitor)
		return slices.Contains(mon.ids(), "Update.1.0.2.AwaitToActivate")
	}) {
		t.Fatalf("the BIOS update does not wait for the reset: %+v", mon)
	}
	if !mon.Processing || mon.State != "Running" {
		t.Errorf("a staged update's monitor: %+v, want processing (202)", mon)
	}
	if inv = sushyFirmware(t, url, vm.ID, "inventory"); inv.BIOS != machine.FactoryFirmware || inv.Inventory["BIOS-"+vm.ID] != machine.FactoryFirmware {
		t.Errorf("before the reset BiosVersion %q, inventory %v: want the old version", inv.BIOS, inv.Inventory)
	}
	sushy(t, url, "admin", "e2e-pass", vm.ID, "reset", "ForceRestart")
	mon = sushyFirmware(t, url, vm.ID, "monitor", up.Monitor, "wait")
	flow := time.Since(start)
	if mon.Processing || mon.State != "Completed" || mon.Status != "OK" || !slices.Equal(mon.ids(), []string{"Update.1.0.2.UpdateSuccessful"}) {
		t.Errorf("after the reset the task is %+v, want Completed, OK, UpdateSuccessful", mon)
	}
	inv = sushyFirmware(t, url, vm.ID, "inventory")
	if inv.BIOS != "2.3.1" || inv.Inventory["BIOS-"+vm.ID] != "2.3.1" {
		t.Errorf("after the reset BiosVersion %q, inventory %v: want 2.3.1", inv.BIOS, inv.Inventory)
	}
	vm.WaitMarker(t, testenv.DiskMarker, n, 2*bootTimeout) // the reset really restarted the VM
	t.Logf("Ironic's BIOS flow (sushy, one python3 process per step): SimpleUpdate answered after %v, update to new version %v", accepted, flow)

	// Images that cannot be used: the task ends in Exception and says why.
	for _, tc := range []struct {
		image, target string
		ids           []string
		says          string
	}{
		{images + "/fw/bios-4.0.bin", sys, []string{"Update.1.0.2.TransferFailed", "Base.1.16.0.ResourceMissingAtURI"}, "404 Not Found"},
		{images + "/fw/bios-2.3.1.bin#sha256=" + strings.Repeat("00", 32), sys, []string{"Update.1.0.2.VerificationFailed"}, "SHA-256"},
		{images + "/fw/bios-5.0.bin", sys, []string{"Update.1.0.2.VerificationFailed"}, "empty"},
		{images + "/fw/bios-6.0.bin", sys, []string{"Update.1.0.2.TransferFailed", "Base.1.16.0.ActionParameterValueFormatError"}, "more than"},
		{images + "/fw/cpld-1.0.bin", sys, []string{"Update.1.0.2.ApplyFailed"}, "names the component \"cpld\""},
		{images + "/fw/bios-2.3.1.bin", "/redfish/v1/Managers/" + vm.ID, []string{"Update.1.0.2.ApplyFailed"}, "wrong target"},
	} {
		up := sushyFirmware(t, url, vm.ID, "update", tc.image, tc.target)
		if up.Monitor == "" {
			t.Errorf("%s: refused at once (%+v), want a task", tc.image, up)
			continue
		}
		mon := sushyFirmware(t, url, vm.ID, "monitor", up.Monitor, "wait")
		if mon.State != "Exception" || mon.Status != "Critical" || !slices.Equal(mon.ids(), tc.ids) ||
			len(mon.Messages) == 0 || !strings.Contains(mon.Messages[0].Message, tc.says) {
			t.Errorf("%s for %s: %+v, want Exception, Critical, %v saying %q", tc.image, tc.target, mon, tc.ids, tc.says)
		}
	}
	if inv = sushyFirmware(t, url, vm.ID, "inventory"); inv.BIOS != "2.3.1" || inv.BMC != machine.FactoryFirmware {
		t.Errorf("after failed updates BIOS %q BMC %q, want 2.3.1 and %s", inv.BIOS, inv.BMC, machine.FactoryFirmware)
	}

	// A BMC update: the BMC reboots; a client polling its Manager from
	// before the update on gets no answer for the window, then the new
	// version.
	hc := trustingClient(t, caFile, 2*time.Second, 0)
	type seen struct {
		firstFail, back time.Time
		version         string
		err             error
	}
	polled := make(chan seen, 1)
	go func() {
		var s seen
		defer func() { polled <- s }()
		for deadline := time.Now().Add(downtime + 30*time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			r, _ := http.NewRequest(http.MethodGet, url+"/redfish/v1/Managers/"+vm.ID, nil)
			r.SetBasicAuth("admin", "e2e-pass")
			resp, err := hc.Do(r)
			if err != nil {
				if s.firstFail.IsZero() {
					s.firstFail = time.Now()
				}
				continue
			}
			var mgr struct{ FirmwareVersion string }
			derr := json.NewDecoder(resp.Body).Decode(&mgr)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || derr != nil {
				s.err = fmt.Errorf("Manager: %s %v", resp.Status, derr)
				return
			}
			if !s.firstFail.IsZero() {
				s.back, s.version = time.Now(), mgr.FirmwareVersion
				return
			}
		}
	}()
	up = sushyFirmware(t, url, vm.ID, "update", images+"/fw/firmware.bin", "/redfish/v1/Managers/"+vm.ID)
	if up.Monitor == "" {
		t.Fatalf("BMC update refused: %+v", up)
	}
	p := <-polled
	window := p.back.Sub(p.firstFail)
	if p.err != nil || p.firstFail.IsZero() || p.back.IsZero() || window < downtime-300*time.Millisecond || window > downtime+5*time.Second {
		t.Fatalf("BMC window seen from %v to %v (%v, %v), want about %v of failed requests, then answers", p.firstFail, p.back, window, p.err, downtime)
	}
	version := p.version
	if version != "5.1.0" {
		t.Errorf("after its update the BMC reports FirmwareVersion %q, want 5.1.0 (from the image's manifest)", version)
	}
	t.Logf("BMC update: requests failed for %v (--bmc-update-downtime %v)", window.Round(time.Millisecond), downtime)
	if mon = sushyFirmware(t, url, vm.ID, "monitor", up.Monitor, "wait"); mon.State != "Completed" || !slices.Equal(mon.ids(), []string{"Update.1.0.2.UpdateSuccessful"}) {
		t.Errorf("the BMC update's task: %+v", mon)
	}

	// gofish reads the same inventory.
	gc := gofishClient(t, url, "admin", "e2e-pass", false)
	defer gc.Logout()
	us, err := gc.Service.UpdateService()
	if err != nil {
		t.Fatal(err)
	}
	items, err := us.FirmwareInventory()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, it := range items {
		got[it.SoftwareID] = it.Version
	}
	if want := map[string]string{"BIOS": "2.3.1", "BMC": "5.1.0", "NIC": machine.FactoryFirmware}; !maps.Equal(got, want) {
		t.Errorf("gofish reads the inventory %v, want %v", got, want)
	}

	// A restarted vbmcd (another one over the same domains) shows the
	// versions: they live in the domain's metadata.
	url2 := daemon(t, "e2e-fwupd-")
	if inv = sushyFirmware(t, url2, vm.ID, "inventory"); inv.BIOS != "2.3.1" || inv.BMC != "5.1.0" {
		t.Errorf("a restarted vbmcd shows BIOS %q BMC %q, want 2.3.1 and 5.1.0", inv.BIOS, inv.BMC)
	}
}
