package redfish

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/testenv"
)

// TestVolumes: a RAID volume made over a drive with POST, listed, read and
// deleted; what the controller cannot make is refused with the message
// that says why.
func TestVolumes(t *testing.T) {
	f := newFixture(t, 1)
	vols := f.sys(0) + "/Storage/1/Volumes"
	drive := `{"@odata.id": "` + f.sys(0) + `/Storage/1/Drives/vda"}`
	coll := decode(t, f.do(req{path: vols}))
	if at, _ := coll["@Redfish.OperationApplyTimeSupport"].(map[string]any); at == nil || at["SupportedValues"].([]any)[0] != "OnReset" {
		t.Fatalf("Volumes without OperationApplyTimeSupport OnReset: %v", coll)
	}
	for _, tc := range []struct {
		name, body string
		status     int
		id         string
	}{
		{"RAID5", `{"RAIDType": "RAID5", "Links": {"Drives": [` + drive + `]}}`, 400, "PropertyValueNotInList"},
		{"RAID1 over one drive", `{"RAIDType": "RAID1", "Links": {"Drives": [` + drive + `]}}`, 400, "GeneralError"},
		{"no drives", `{"RAIDType": "RAID0"}`, 400, "PropertyMissing"},
		{"a drive of another system", `{"RAIDType": "RAID0", "Links": {"Drives": [{"@odata.id": "/redfish/v1/Systems/x/Storage/1/Drives/vda"}]}}`, 400, "PropertyValueNotInList"},
		{"an unknown drive", `{"RAIDType": "RAID0", "Links": {"Drives": [{"@odata.id": "` + f.sys(0) + `/Storage/1/Drives/vdq"}]}}`, 400, "GeneralError"},
		{"too big", `{"RAIDType": "RAID0", "CapacityBytes": 999999999999999, "Links": {"Drives": [` + drive + `]}}`, 400, "GeneralError"},
		{"Immediate", `{"RAIDType": "RAID0", "@Redfish.OperationApplyTime": "Immediate", "Links": {"Drives": [` + drive + `]}}`, 400, "PropertyValueNotInList"},
	} {
		w := f.do(req{method: "POST", path: vols, body: tc.body})
		if got := messageIDs(t, w); w.Code != tc.status || len(got) == 0 || got[0] != tc.id {
			t.Errorf("%s: %d %v, want %d %s", tc.name, w.Code, got, tc.status, tc.id)
		}
	}
	w := f.do(req{method: "POST", path: vols, body: `{"RAIDType": "RAID0", "Name": "data", "CapacityBytes": 10737418240, "@Redfish.OperationApplyTime": "OnReset", "Links": {"Drives": [` + drive + `]}}`})
	// OnReset is deferred work: 202 and a task monitor that runs until the
	// next reset (issue 25: a 201 made Ironic's RAID step hang the next).
	mon := w.Header().Get("Location")
	if w.Code != http.StatusAccepted || !strings.HasPrefix(mon, "/redfish/v1/TaskService/TaskMonitors/") {
		t.Fatalf("create: %d Location %q %s, want 202 and a task monitor", w.Code, mon, w.Body.String())
	}
	wantCode(t, f.do(req{path: mon}), http.StatusAccepted, "the monitor before the reset")
	wantCode(t, f.do(req{method: "POST", path: f.sys(0) + "/Actions/ComputerSystem.Reset", body: `{"ResetType": "On"}`}), http.StatusNoContent, "reset")
	var task map[string]any
	if !testenv.WaitFor(5*time.Second, func() bool {
		w := f.do(req{path: mon})
		task = decode(t, w)
		return w.Code == http.StatusOK
	}) || task["TaskState"] != "Completed" || task["TaskStatus"] != "OK" {
		t.Fatalf("the monitor after the reset: %v, want 200 and a Completed task", task)
	}
	loc := vols + "/1"
	v := decode(t, f.do(req{path: loc}))
	if v["RAIDType"] != "RAID0" || v["CapacityBytes"] != float64(10<<30) || v["Name"] != "data" ||
		v["Links"].(map[string]any)["Drives"].([]any)[0].(map[string]any)["@odata.id"] != f.sys(0)+"/Storage/1/Drives/vda" {
		t.Errorf("volume: %v", v)
	}
	if got := members(t, f, req{path: vols}); len(got) != 1 || got[0] != loc {
		t.Errorf("Volumes lists %v, want [%s]", got, loc)
	}
	wantCode(t, f.do(req{method: "DELETE", path: loc}), http.StatusNoContent, "delete")
	wantCode(t, f.do(req{path: loc}), http.StatusNotFound, "GET after delete")
	wantCode(t, f.do(req{method: "DELETE", path: loc}), http.StatusNotFound, "delete again")

	// A volume deleted before the reset that would make it: its task ends
	// Cancelled.
	w = f.do(req{method: "POST", path: vols, body: `{"RAIDType": "RAID0", "Links": {"Drives": [` + drive + `]}}`})
	mon = w.Header().Get("Location")
	wantCode(t, w, http.StatusAccepted, "second create")
	wantCode(t, f.do(req{method: "DELETE", path: vols + "/1"}), http.StatusNoContent, "delete before the reset")
	if w := f.do(req{path: mon}); w.Code != http.StatusOK || decode(t, w)["TaskState"] != "Cancelled" {
		t.Errorf("the monitor of a volume deleted before the reset: %d %s, want 200 Cancelled", w.Code, w.Body.String())
	}
}
