package vbmcd

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/digitalocean/go-libvirt"

	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virttest"
)

// TestE2EPacedPowerOn: five VMs powered on over Redfish at the same moment,
// with at most 2 starting at once and 1 s after a start finishes before the
// next begins. Every power-on is answered at once; the queued machines read
// PoweringOn; libvirt sees no domain start less than the gap after the one
// two places before it (two may start together); all five run in the end.
func TestE2EPacedPowerOn(t *testing.T) {
	const gap = time.Second
	lab := virttest.New(t, "e2e-pace-")
	var vms []*virttest.VM
	for i := range 5 {
		vms = append(vms, lab.NewVM(t, fmt.Sprint("n", i), virttest.VMOptions{NoCD: true, DiskMarker: true}))
	}
	url := daemon(t, "e2e-pace-", func(c *Config) { c.MaxStarting, c.StartGap = 2, gap })
	call := func(method, path, body string) (reply, error) {
		return send(method, url+path, "admin", "e2e-pass", body)
	}

	// Watch libvirt for each domain's start.
	started := make([]time.Time, len(vms))
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			for i, vm := range vms {
				if started[i].IsZero() && lab.DomainState(t, vm.Name) == libvirt.DomainRunning {
					started[i] = time.Now()
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()

	t0 := time.Now()
	answered := make([]time.Duration, len(vms))
	var wg sync.WaitGroup
	for i, vm := range vms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := call("POST", "/redfish/v1/Systems/"+vm.ID+"/Actions/ComputerSystem.Reset", `{"ResetType": "On"}`)
			if err != nil {
				t.Errorf("power on %s: %v", vm.Name, err)
				return
			}
			answered[i] = time.Since(t0)
			if resp.Code != http.StatusNoContent {
				t.Errorf("power on %s: %d", vm.Name, resp.Code)
			}
		}()
	}
	wg.Wait()
	poweringOn := 0
	for _, vm := range vms {
		resp, err := call("GET", "/redfish/v1/Systems/"+vm.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		var sys struct{ PowerState string }
		json.Unmarshal(resp.Body, &sys)
		if sys.PowerState == "PoweringOn" {
			poweringOn++
		}
	}
	if !testenv.WaitFor(30*time.Second, func() bool { return !slices.ContainsFunc(started, time.Time.IsZero) }) {
		t.Fatalf("not every domain started within 30 s: %v", started)
	}
	close(stop)
	<-watched

	var timeline []string
	for i := range vms {
		timeline = append(timeline, fmt.Sprintf("%s answered %v, running at %v", vms[i].Name,
			answered[i].Round(time.Millisecond), started[i].Sub(t0).Round(time.Millisecond)))
	}
	t.Logf("timeline:\n%s", strings.Join(timeline, "\n"))
	for i, a := range answered {
		if a > gap {
			t.Errorf("%s: power-on answered after %v; a queued start must be answered at once", vms[i].Name, a)
		}
	}
	if poweringOn < 3 {
		t.Errorf("right after the five power-ons, %d systems read PoweringOn; want the 3 or more still queued", poweringOn)
	}
	ts := slices.Clone(started)
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	for i := 2; i < len(ts); i++ {
		// A start begins gap after one of the two before it finished, and
		// is seen running after it began. Polled every 20 ms: within 50 ms.
		if d := ts[i].Sub(ts[i-2]); d < gap-50*time.Millisecond {
			t.Errorf("domains %d and %d running only %v apart, want at least %v with 2 starting at once", i-2, i, d, gap)
		}
	}
}
