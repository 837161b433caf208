package vbmcd

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/testenv"
)

// TestE2EEvents: a subscriber on 127.0.0.1 gets an event when a VM is
// powered on through Redfish, one when it is destroyed behind vbmcd's back
// (virsh), from libvirt's lifecycle event, one when ipmitool powers it on
// through the same machine's IPMI face, and one each when virtual media is
// inserted into and ejected from the running VM.
func TestE2EEvents(t *testing.T) {
	ipmi := newIPMITool(t, "e2e-pass")
	_, vm, url := markerLab(t, "e2e-events-", ipmi.ipmiOn)
	var mu sync.Mutex
	var got []string
	ls := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, string(b))
		mu.Unlock()
	}))
	defer ls.Close()
	post := func(path, body string) int {
		r, err := send("POST", url+path, "admin", "e2e-pass", body)
		if err != nil {
			t.Fatal(err)
		}
		return r.Code
	}
	if code := post("/redfish/v1/EventService/Subscriptions", `{"Destination":"`+ls.URL+`","Context":"e2e"}`); code != 201 {
		t.Fatalf("subscribe = %d", code)
	}
	seen := func(text string) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, g := range got {
			if strings.Contains(g, text) && strings.Contains(g, `"Context":"e2e"`) {
				return true
			}
		}
		return false
	}
	if code := post("/redfish/v1/Systems/"+vm.ID+"/Actions/ComputerSystem.Reset", `{"ResetType":"On"}`); code/100 != 2 {
		t.Fatalf("reset On = %d", code)
	}
	if !testenv.WaitFor(30*time.Second, func() bool { return seen("changed from Off to On") }) {
		t.Fatalf("no power-on event; got %v", got)
	}
	if out, err := exec.Command("virsh", "destroy", vm.Name).CombinedOutput(); err != nil {
		t.Fatalf("virsh destroy: %v\n%s", err, out)
	}
	if !testenv.WaitFor(30*time.Second, func() bool { return seen("to Off.") }) {
		t.Fatalf("no event for the destroy behind vbmcd's back; got %v", got)
	}
	mu.Lock()
	got = nil
	mu.Unlock()
	ipmi.must(t, "chassis", "power", "on")
	if !testenv.WaitFor(30*time.Second, func() bool { return seen("changed from Off to On") }) {
		t.Fatalf("no power-on event for ipmitool's power on; got %v", got)
	}

	// Virtual media: an image from a server on loopback into the running
	// VM's Removable member (a USB stick), then out again.
	iso := testenv.MarkerISO(t)
	img := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, iso) }))
	defer img.Close()
	member := "/redfish/v1/Managers/" + vm.ID + "/VirtualMedia/Removable"
	if code := post(member+"/Actions/VirtualMedia.InsertMedia", `{"Image":"`+img.URL+`/stick.iso"}`); code/100 != 2 {
		t.Fatalf("InsertMedia = %d", code)
	}
	if !testenv.WaitFor(30*time.Second, func() bool { return seen("Virtual media Removable of system " + vm.ID + " was inserted") }) {
		t.Fatalf("no media insert event; got %v", got)
	}
	if code := post(member+"/Actions/VirtualMedia.EjectMedia", `{}`); code/100 != 2 {
		t.Fatalf("EjectMedia = %d", code)
	}
	if !testenv.WaitFor(30*time.Second, func() bool { return seen("Virtual media Removable of system " + vm.ID + " was ejected") }) {
		t.Fatalf("no media eject event; got %v", got)
	}
}
