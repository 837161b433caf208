package redfish

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/media"
	"github.com/bmlab/bmlab/internal/sim"
	"github.com/bmlab/bmlab/internal/testenv"
)

// updateFixture is a fixture with an image cache and an image server on
// loopback: /bios-2.3.1.bin at once, /slow/bios-3.0.bin held until the
// test ends.
func newUpdateFixture(t testing.TB) (*fixture, string) {
	t.Helper()
	cache, err := media.New(media.Config{Dir: t.TempDir(), Policy: media.Policy{AllowLoopback: true}})
	if err != nil {
		t.Fatal(err)
	}
	be := sim.New(2)
	svc := machine.NewService(be, nil, machine.WithImageFetcher(cache))
	srv := New(svc, nil, WithCredentials(testUser, testPass), WithServiceUUID(testService))
	f := &fixture{t: t, be: be, svc: svc, srv: srv, h: srv.Handler()}
	for _, m := range be.List() {
		f.ids = append(f.ids, m.ID)
	}
	hold := make(chan struct{})
	images := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/bios-2.3.1.bin":
			fmt.Fprint(w, "bios payload")
		case "/slow/bios-3.0.bin":
			w.Header().Set("Content-Length", "100")
			fmt.Fprint(w, "bios")
			w.(http.Flusher).Flush()
			<-hold
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(func() {
		close(hold)
		images.Close()
		// Before the cache's directory goes (its RemoveAll runs after
		// this): an update whose image is still being fetched writes
		// into it, and RemoveAll then finds it not empty.
		testenv.WaitFor(5*time.Second, func() bool {
			for _, tk := range svc.Tasks() {
				if st := tk.Status(); st.State == machine.TaskRunning && !st.Awaiting {
					return false
				}
			}
			return true
		})
	})
	return f, images.URL
}

// TestSimpleUpdateBadInput: what can be told at once is refused with the
// Base message that says why, never a 500.
func TestSimpleUpdateBadInput(t *testing.T) {
	f, images := newUpdateFixture(t)
	const action = "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate"
	sys := "/redfish/v1/Systems/" + f.ids[0]
	for _, tc := range []struct {
		body   string
		status int
		id     string
	}{
		{`{}`, 400, "ActionParameterMissing"},
		{`{"ImageURI": 5, "Targets": ["` + sys + `"]}`, 400, "ActionParameterValueTypeError"},
		{`{"ImageURI": "", "Targets": ["` + sys + `"]}`, 400, "ActionParameterMissing"},
		{`{"ImageURI": "` + images + `/bios-2.3.1.bin"}`, 400, "ActionParameterMissing"}, // two systems: which?
		{`{"ImageURI": "` + images + `/bios-2.3.1.bin", "Targets": "` + sys + `"}`, 400, "ActionParameterValueTypeError"},
		{`{"ImageURI": "` + images + `/bios-2.3.1.bin", "Targets": [5]}`, 400, "ActionParameterValueTypeError"},
		{`{"ImageURI": "` + images + `/bios-2.3.1.bin", "Targets": []}`, 400, "ActionParameterValueNotInList"},
		{`{"ImageURI": "` + images + `/bios-2.3.1.bin", "Targets": ["` + sys + `", "` + sys + `"]}`, 400, "ActionParameterValueNotInList"},
		{`{"ImageURI": "` + images + `/bios-2.3.1.bin", "Targets": ["/redfish/v1/Systems/nope"]}`, 400, "ActionParameterValueNotInList"},
		{`{"ImageURI": "` + images + `/bios-2.3.1.bin", "Targets": ["/redfish/v1/Chassis/` + f.ids[0] + `"]}`, 400, "ActionParameterValueNotInList"},
		{`{"ImageURI": "` + images + `/bios-2.3.1.bin", "Targets": ["/redfish/v1/UpdateService/FirmwareInventory/CPLD-` + f.ids[0] + `"]}`, 400, "ActionParameterValueNotInList"},
		{`{"ImageURI": "` + images + `/bios-2.3.1.bin", "Targets": ["` + sys + `"], "TransferProtocol": "GOPHER"}`, 400, "ActionParameterValueNotInList"},
		{`{"ImageURI": "host/bios-2.3.1.bin", "Targets": ["` + sys + `"], "TransferProtocol": "TFTP"}`, 400, "ActionParameterValueNotInList"},
		{`{"ImageURI": "ftp://host/bios-2.3.1.bin", "Targets": ["` + sys + `"]}`, 400, "ActionParameterValueFormatError"},
		{`{"ImageURI": "` + images + `/bios-2.3.1.bin#sha256=12", "Targets": ["` + sys + `"]}`, 400, "ActionParameterValueFormatError"},
		{`{"ImageURI": "` + images + `/bios-2.3.1.bin", "Targets": ["` + sys + `"], "Username": "u"}`, 400, "ActionParameterUnknown"},
		{`[1]`, 400, "UnrecognizedRequestBody"},
		{`{`, 400, "MalformedJSON"},
	} {
		w := f.do(req{method: "POST", path: action, body: tc.body})
		if got := messageIDs(t, w); w.Code != tc.status || !slices.Equal(got, []string{tc.id}) {
			t.Errorf("%s: %d %v, want %d %s", tc.body, w.Code, got, tc.status, tc.id)
		}
	}

	// One image loads at a time per machine: a second is refused (409)
	// while the first is on the wire.
	w := f.do(req{method: "POST", path: action, body: `{"ImageURI": "` + images + `/slow/bios-3.0.bin", "Targets": ["` + sys + `"]}`})
	if w.Code != http.StatusAccepted || !strings.HasPrefix(w.Header().Get("Location"), monitorsURI+"/") {
		t.Fatalf("slow update: %d %s", w.Code, w.Body)
	}
	w = f.do(req{method: "POST", path: action, body: `{"ImageURI": "` + images + `/bios-2.3.1.bin", "Targets": ["` + sys + `"]}`})
	if got := messageIDs(t, w); w.Code != http.StatusConflict || !slices.Equal(got, []string{"ResourceInUse"}) {
		t.Errorf("a second update while one loads: %d %v, want 409 ResourceInUse", w.Code, got)
	}
	// Another machine is not held up by it; a Manager target is the BMC.
	w = f.do(req{method: "POST", path: action, body: `{"ImageURI": "` + images + `/bios-2.3.1.bin", "Targets": ["/redfish/v1/Managers/` + f.ids[1] + `"]}`})
	if w.Code != http.StatusAccepted {
		t.Fatalf("update of the other machine: %d %s", w.Code, w.Body)
	}
	mon := w.Header().Get("Location")
	deadline := time.Now().Add(5 * time.Second)
	for w.Code == http.StatusAccepted && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		w = f.do(req{path: mon})
	}
	v := decode(t, w)
	msgs, _ := v["Messages"].([]any)
	first, _ := msgs[0].(map[string]any)
	if w.Code != http.StatusOK || v["TaskState"] != "Exception" || first["MessageId"] != updateRegistryID+".ApplyFailed" ||
		!strings.Contains(first["Message"].(string), "wrong target") {
		t.Errorf("a BIOS image for the Manager: %d %v, want 200, Exception, ApplyFailed saying it is the wrong target", w.Code, v)
	}
}

// BenchmarkSimpleUpdate measures how long SimpleUpdate takes to answer
// (202 with the task): the image is fetched after the answer.
func BenchmarkSimpleUpdate(b *testing.B) {
	f, images := newUpdateFixture(b)
	body := `{"ImageURI": "` + images + `/bios-2.3.1.bin", "Targets": ["/redfish/v1/Systems/` + f.ids[0] + `"]}`
	var worst time.Duration
	for b.Loop() {
		start := time.Now()
		w := f.do(req{method: "POST", path: updateServiceURI + "/Actions/" + simpleUpdateAction, body: body})
		took := time.Since(start)
		if w.Code != http.StatusAccepted {
			b.Fatalf("SimpleUpdate: %d %s", w.Code, w.Body)
		}
		worst = max(worst, took)
		b.StopTimer()
		t, err := f.svc.Task(strings.TrimPrefix(w.Header().Get("Location"), monitorsURI+"/"))
		if err != nil {
			b.Fatal(err)
		}
		for st := t.Status(); st.State == machine.TaskRunning && !st.Awaiting; st = t.Status() {
			time.Sleep(time.Millisecond)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(worst.Microseconds())/1000, "max-ms")
	if worst > 100*time.Millisecond {
		b.Errorf("SimpleUpdate took %v to answer at worst; the bound is 100 ms", worst)
	}
}

// BenchmarkFirmwareFlow is the BMC's share of Ironic's BIOS update flow on
// a simulated machine, the image on loopback: SimpleUpdate, the task
// monitor polled until the update waits for the reset, ForceRestart, the
// monitor read once more (Completed), the new version read from the
// system and the firmware inventory.
func BenchmarkFirmwareFlow(b *testing.B) {
	f, images := newUpdateFixture(b)
	sys := "/redfish/v1/Systems/" + f.ids[0]
	do := func(method, path, body string, want int) *httptest.ResponseRecorder {
		w := f.do(req{method: method, path: path, body: body})
		if w.Code != want {
			b.Fatalf("%s %s: %d %s", method, path, w.Code, w.Body.String())
		}
		return w
	}
	do("POST", sys+"/Actions/ComputerSystem.Reset", `{"ResetType": "On"}`, http.StatusNoContent)
	body := `{"ImageURI": "` + images + `/bios-2.3.1.bin", "Targets": ["` + sys + `"]}`
	for b.Loop() {
		mon := do("POST", updateServiceURI+"/Actions/"+simpleUpdateAction, body, http.StatusAccepted).Header().Get("Location")
		for !strings.Contains(do("GET", mon, "", http.StatusAccepted).Body.String(), "AwaitToActivate") {
			time.Sleep(100 * time.Microsecond)
		}
		do("POST", sys+"/Actions/ComputerSystem.Reset", `{"ResetType": "ForceRestart"}`, http.StatusNoContent)
		if v := decode(b, do("GET", mon, "", http.StatusOK)); v["TaskState"] != "Completed" {
			b.Fatalf("after the reset the task is %v", v["TaskState"])
		}
		if v := decode(b, do("GET", sys, "", http.StatusOK)); v["BiosVersion"] != "2.3.1" {
			b.Fatalf("BiosVersion %v after the reset", v["BiosVersion"])
		}
		if v := decode(b, do("GET", firmwareInventoryURI+"/BIOS-"+f.ids[0], "", http.StatusOK)); v["Version"] != "2.3.1" {
			b.Fatalf("inventory version %v after the reset", v["Version"])
		}
		// The next round updates from the factory version again.
		if _, err := f.svc.UpdateSettings(context.Background(), f.ids[0], func(st *machine.Settings) error {
			st.Firmware = nil
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
}
