package redfish

import (
	"strings"
	"testing"
	"time"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"

	"github.com/bmlab/bmlab/internal/testenv"
)

// TestBMCClock: gofish sets one BMC's clock (Manager DateTime and
// DateTimeLocalOffset, as Ironic's BMC clock step does) and reads it back
// skewed and in its offset while the host's clock moves on; the other BMC
// keeps the host's time; events about the skewed BMC's system carry its
// time; bad values are refused with 400 and change nothing.
func TestBMCClock(t *testing.T) {
	testenv.Integration(t)
	host := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	now := host
	f := eventFixture(t, WithClock(func() time.Time { return now }))
	l := newListener(t)
	f.subscribe(t, `{"Destination":"`+l.URL+`","Context":"clock"}`)
	c := gofishConnect(t, gofish.ClientConfig{Endpoint: f.listen(t), Username: testUser, Password: testPass, BasicAuth: true})
	mgr, err := schemas.GetManager(c, "/redfish/v1/Managers/"+f.ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if mgr.DateTime != "2026-11-24T12:00:00+00:00" || mgr.DateTimeLocalOffset != "+00:00" {
		t.Errorf("before: DateTime %q offset %q, want the host's time in +00:00", mgr.DateTime, mgr.DateTimeLocalOffset)
	}
	mgr.DateTime = "2031-01-02T03:04:05+00:00"
	mgr.DateTimeLocalOffset = "+05:30"
	if err := mgr.Update(); err != nil {
		t.Fatalf("gofish Manager.Update: %v", err)
	}
	now = host.Add(90 * time.Second)
	mgr, err = schemas.GetManager(c, "/redfish/v1/Managers/"+f.ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if mgr.DateTime != "2031-01-02T08:35:35+05:30" || mgr.DateTimeLocalOffset != "+05:30" {
		t.Errorf("after 90 s: DateTime %q offset %q, want 2031-01-02T08:35:35+05:30 and +05:30", mgr.DateTime, mgr.DateTimeLocalOffset)
	}
	other, err := schemas.GetManager(c, "/redfish/v1/Managers/"+f.ids[1])
	if err != nil || other.DateTime != "2026-11-24T12:01:30+00:00" {
		t.Errorf("the other BMC: %q (%v), want the host's time", other.DateTime, err)
	}

	// An event about the skewed BMC's system carries its time.
	if w := f.do(req{method: "POST", path: "/redfish/v1/Systems/" + f.ids[0] + "/Actions/ComputerSystem.Reset", body: `{"ResetType":"On"}`}); w.Code/100 != 2 {
		t.Fatalf("reset = %d %s", w.Code, w.Body)
	}
	ev := l.waitFor(t, "changed from Off to On", 5*time.Second)
	rec := ev["Events"].([]any)[0].(map[string]any)
	if ts, _ := rec["EventTimestamp"].(string); !strings.HasPrefix(ts, "2031-01-02T08:35:35+05:30") {
		t.Errorf("EventTimestamp %q, want the BMC's clock 2031-01-02T08:35:35+05:30", ts)
	}

	for _, body := range []string{
		`{"DateTime": "yesterday"}`,
		`{"DateTime": 5}`,
		`{"DateTimeLocalOffset": "+15:00"}`,
		`{"DateTimeLocalOffset": "0530"}`,
		`{"DateTime": "9999-12-31T23:59:59+00:00"}`,
		`{}`,
	} {
		if w := f.do(req{method: "PATCH", path: "/redfish/v1/Managers/" + f.ids[0], body: body}); w.Code != 400 {
			t.Errorf("PATCH %s: %d, want 400", body, w.Code)
		}
	}
	w := f.do(req{path: "/redfish/v1/Managers/" + f.ids[0]})
	if v := decode(t, w); v["DateTime"] != "2031-01-02T08:35:35+05:30" {
		t.Errorf("after refused PATCHes DateTime %v", v["DateTime"])
	}
}
