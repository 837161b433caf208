package redfish

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
)

// TestDellOEMSushyOEMIdrac: Debian 13's sushy 5.5 and sushy-oem-idrac 5.0
// (Ironic 29's idrac hardware type's libraries, from its trixie root, made
// importable by the vendor overlay alone) drive an iDRAC 9 and an iDRAC 10
// at BMCs of their own, every Dell call the package's own code
// (testdata/sushy_oem_idrac.py): the Dell manager extension, the Lifecycle
// Controller's status, the boot device set through the OEM import, the
// export, an import whose job completes at the next boot and leaves the
// machine with the profile's BIOS attribute and boot order (read over the
// standard resources), an import with an unknown attribute (reported as
// Ironic reads failures), a job deleted from the queue, the iDRAC reset.
// An iDRAC 10 with its quirk scp-target-list refuses the package's string
// Target, as the iDRAC 10 that jetlag PR 878 sends ["ALL"] to.
func TestDellOEMSushyOEMIdrac(t *testing.T) {
	testenv.Integration(t)
	py := testenv.Python29(t, "sushy_oem_idrac", "sushy")
	script := py.Script(t, "testdata/sushy_oem_idrac.py")
	f, views := personalityFixture(t, allQuirksOff)
	run := func(t *testing.T, id, mode string) {
		t.Helper()
		ts := listenAtBMC(t, f.h, id)
		ca := writeServerCA(t, filepath.Join(py.Dir(), "ca-"+id+".pem"), ts)
		cmd := py.Command(script, ts.URL, ca, testUser, testPass, mode, f.images.URL+"/small.iso")
		cmd.Env = append(cmd.Env, "REQUESTS_CA_BUNDLE="+ca)
		runToDone(t, "sushy-oem-idrac", cmd)
	}
	setQuirks := func(t *testing.T, id, q string) {
		t.Helper()
		if _, err := f.svc.UpdateSettings(context.Background(), id, func(s *machine.Settings) error { s.Quirks = q; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range views {
		switch v.Personality {
		case "idrac9":
			t.Run("idrac9", func(t *testing.T) { run(t, v.UUID, "all") })
		case "idrac10":
			t.Run("idrac10-target-string-refused", func(t *testing.T) {
				setQuirks(t, v.UUID, "scp-target-list")
				run(t, v.UUID, "refused")
			})
			t.Run("idrac10", func(t *testing.T) {
				setQuirks(t, v.UUID, allQuirksOff)
				run(t, v.UUID, "all")
			})
		}
	}
}

// TestDellOEMRefusals: what Dell's OEM refuses, with the status and Base
// message, changing nothing; another vendor has none of it; $expand is
// taken on the job queue alone.
func TestDellOEMRefusals(t *testing.T) {
	f, views := personalityFixture(t, allQuirksOff)
	dell9, dell10, ilo := views[1].UUID, views[2].UUID, views[3].UUID
	if _, err := f.svc.UpdateSettings(context.Background(), dell10, func(s *machine.Settings) error { s.Quirks = "scp-target-list"; return nil }); err != nil {
		t.Fatal(err)
	}
	imp := func(id string) string {
		return managerURI(id) + "/Actions/Oem/EID_674_Manager.ImportSystemConfiguration"
	}
	exp := func(id string) string {
		return managerURI(id) + "/Actions/Oem/EID_674_Manager.ExportSystemConfiguration"
	}
	const buf = `"ImportBuffer":"<SystemConfiguration><Component FQDD=\"BIOS.Setup.1-1\"><Attribute Name=\"QuietBoot\">True</Attribute></Component></SystemConfiguration>"`
	for _, tc := range []struct {
		name, path, body string
		code             int
		msg              string
	}{
		{"no ShareParameters", imp(dell9), `{` + buf + `}`, http.StatusBadRequest, "ActionParameterMissing"},
		{"no Target", imp(dell9), `{"ShareParameters":{},` + buf + `}`, http.StatusBadRequest, "ActionParameterMissing"},
		{"a list at iDRAC 9", imp(dell9), `{"ShareParameters":{"Target":["ALL"]},` + buf + `}`, http.StatusBadRequest, "ActionParameterValueTypeError"},
		{"a string at iDRAC 10", imp(dell10), `{"ShareParameters":{"Target":"ALL"},` + buf + `}`, http.StatusBadRequest, "ActionParameterValueTypeError"},
		{"an unknown target", imp(dell9), `{"ShareParameters":{"Target":"DISKS"},` + buf + `}`, http.StatusBadRequest, "ActionParameterValueNotInList"},
		{"a network share", imp(dell9), `{"ShareParameters":{"Target":"ALL","IPAddress":"192.0.2.1","ShareName":"x"}}`, http.StatusBadRequest, "ActionParameterNotSupported"},
		{"an NFS share", exp(dell9), `{"ShareParameters":{"Target":"ALL","ShareType":"NFS"}}`, http.StatusBadRequest, "ActionParameterValueNotInList"},
		{"no ImportBuffer", imp(dell9), `{"ShareParameters":{"Target":"ALL"}}`, http.StatusBadRequest, "ActionParameterMissing"},
		{"not a profile", imp(dell9), `{"ShareParameters":{"Target":"ALL"},"ImportBuffer":"hello"}`, http.StatusBadRequest, "ActionParameterValueFormatError"},
		{"broken XML", imp(dell9), `{"ShareParameters":{"Target":"ALL"},"ImportBuffer":"<SystemConfiguration><Component>"}`, http.StatusBadRequest, "ActionParameterValueFormatError"},
		{"a bad ShutdownType", imp(dell9), `{"ShareParameters":{"Target":"ALL"},"ShutdownType":"Now",` + buf + `}`, http.StatusBadRequest, "ActionParameterValueNotInList"},
		{"an unknown parameter", imp(dell9), `{"ShareParameters":{"Target":"ALL"},"Force":true,` + buf + `}`, http.StatusBadRequest, "ActionParameterUnknown"},
		{"a bad ExportFormat", exp(dell9), `{"ShareParameters":{"Target":"ALL"},"ExportFormat":"YAML"}`, http.StatusBadRequest, "ActionParameterValueNotInList"},
		{"an unknown job", managerURI(dell9) + "/Oem/Dell/DellJobService/Actions/DellJobService.DeleteJobQueue", `{"JobID":"JID_123456789012"}`, http.StatusBadRequest, "ActionParameterValueNotInList"},
		{"a job id of the wrong type", managerURI(dell9) + "/Oem/Dell/DellJobService/Actions/DellJobService.DeleteJobQueue", `{"JobID":7}`, http.StatusBadRequest, "ActionParameterValueTypeError"},
		{"an iDRAC reset of no kind", managerURI(dell9) + "/Oem/Dell/DelliDRACCardService/Actions/DelliDRACCardService.iDRACReset", `{"Force":"Hard"}`, http.StatusBadRequest, "ActionParameterValueNotInList"},
		{"Dell's import on an iLO", imp(ilo), `{"ShareParameters":{"Target":"ALL"},` + buf + `}`, http.StatusNotFound, "ResourceNotFound"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := f.post(tc.path, tc.body)
			wantCode(t, w, tc.code, tc.name)
			if ids := messageIDs(t, w); len(ids) == 0 || ids[0] != tc.msg {
				t.Errorf("messages %v, want %s", ids, tc.msg)
			}
		})
	}
	for _, id := range []string{dell9, dell10} {
		if m, _ := f.svc.Get(id); len(m.Settings.BIOSPending) != 0 {
			t.Errorf("a refused import staged %v", m.Settings.BIOSPending)
		}
	}
	for _, p := range []string{managerURI(ilo) + "/Oem/Dell/DellJobService", managerURI(ilo) + "/Oem/Dell/Jobs"} {
		wantCode(t, f.do(req{path: p}), http.StatusNotFound, p)
	}
	wantCode(t, f.do(req{path: managerURI(dell9) + "/Oem/Dell/Jobs?$expand=.($levels=1)"}), http.StatusOK, "the job queue expanded")
	wantCode(t, f.do(req{path: managerURI(dell9) + "/VirtualMedia?$expand=*"}), http.StatusNotImplemented, "$expand elsewhere")
	wantCode(t, f.do(req{path: "/redfish/v1/TaskService/Tasks/JID_000000009999"}), http.StatusNotFound, "an unknown job's task")
}

// TestDellOEMExportXMLAndShutdown: an XML export answers the profile as
// iDRAC writes it (read-only attributes as comments); an import with the
// default ShutdownType reboots a running server itself, and its job is
// done by that boot.
func TestDellOEMExportXMLAndShutdown(t *testing.T) {
	f, views := personalityFixture(t, allQuirksOff)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.svc.Watch(ctx) // a guest's reboot applies what waits for a boot, as in vbmcd
	id := views[1].UUID
	w := f.post(managerURI(id)+"/Actions/Oem/EID_674_Manager.ExportSystemConfiguration", `{"ShareParameters":{"Target":"BIOS,IDRAC"},"ExportFormat":"XML"}`)
	wantCode(t, w, http.StatusAccepted, "export")
	loc := w.Header().Get("Location")
	x := f.do(req{path: loc})
	wantCode(t, x, http.StatusOK, "the export's task")
	body := x.Body.String()
	for _, want := range []string{`<Component FQDD="BIOS.Setup.1-1">`, `<Attribute Name="ProcVirtualization">Enabled</Attribute>`,
		`<!-- <Attribute Name="TpmSecurity">Off</Attribute> -->`, `<Attribute Name="ServerBoot.1#FirstBootDevice">Normal</Attribute>`} {
		if !strings.Contains(body, want) {
			t.Errorf("the XML export lacks %s:\n%s", want, body)
		}
	}
	if strings.Contains(body, "LegacyBootProto") {
		t.Errorf("a BIOS,IDRAC export has a NIC component:\n%s", body)
	}
	wantCode(t, f.post(systemURI(id)+"/Actions/ComputerSystem.Reset", `{"ResetType":"On"}`), http.StatusNoContent, "power on")
	w = f.post(managerURI(id)+"/Actions/Oem/EID_674_Manager.ImportSystemConfiguration",
		`{"ShareParameters":{"Target":"ALL"},"ImportBuffer":"<SystemConfiguration><Component FQDD=\"BIOS.Setup.1-1\"><Attribute Name=\"PxeRetryCount\">7</Attribute></Component></SystemConfiguration>"}`)
	wantCode(t, w, http.StatusAccepted, "import")
	loc = w.Header().Get("Location")
	var task *httptest.ResponseRecorder
	testenv.WaitFor(10*time.Second, func() bool {
		task = f.do(req{path: loc})
		return task.Code != http.StatusAccepted
	})
	wantCode(t, task, http.StatusOK, "the import's task after the reboot vbmcd made")
	if v := decode(t, task); v["TaskState"] != "Completed" {
		t.Errorf("task %v", v)
	}
	if m, _ := f.svc.Get(id); m.Settings.CurrentBIOS()["PxeRetryCount"] != 7 {
		t.Errorf("PxeRetryCount %v after the import", m.Settings.CurrentBIOS()["PxeRetryCount"])
	}
}
