package redfish

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/bmlab/bmlab/internal/accounts"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
)

// TestSushySimpleUpdateWithoutTargets: sushy 4.3 sends SimpleUpdate
// without Targets. An account bound to one system (a stored one, or a
// machine's own user) updates that system; the service's global account,
// which reaches both, is refused with 400 ActionParameterMissing that names
// the accounts that would work.
func TestSushySimpleUpdateWithoutTargets(t *testing.T) {
	testenv.Integration(t)
	py := testenv.Python(t, "sushy")
	f, images := newUpdateFixture(t)
	opt, st := withStore(t)
	opt(f.srv)
	if _, err := st.Create(accounts.New{UserName: "node0", Password: "node0-password", Role: accounts.Operator, Enabled: true, System: f.ids[0]}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.UpdateSettings(context.Background(), f.ids[1], func(s *machine.Settings) error {
		s.Credentials = []machine.Credential{{Username: "node1", Password: "node1-password"}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	url := f.listen(t)
	type result struct {
		Monitor    string
		StatusCode int `json:"status_code"`
		Detail     string
		Messages   []struct{ ID, Message, Resolution string }
	}
	run := func(user, pass string) result {
		t.Helper()
		out, err := exec.Command(py, "testdata/sushy_update_notargets.py", url, user, pass, images+"/bios-2.3.1.bin").CombinedOutput()
		if err != nil {
			t.Fatalf("sushy as %s: %v\n%s", user, err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		var r result
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
			t.Fatalf("sushy as %s: %v\n%s", user, err, out)
		}
		return r
	}

	for i, user := range []string{"node0", "node1"} {
		r := run(user, user+"-password")
		if r.Monitor == "" {
			t.Fatalf("%s (bound to %s): %+v, want a task", user, f.ids[i], r)
		}
		task, err := f.svc.Task(r.Monitor[strings.LastIndex(r.Monitor, "/")+1:])
		if err != nil || task.MachineID != f.ids[i] {
			t.Errorf("%s: task %+v (%v), want one for %s", user, task, err, f.ids[i])
		}
	}

	r := run(testUser, testPass)
	if r.StatusCode != 400 || len(r.Messages) != 1 || trimRegistry(r.Messages[0].ID) != "ActionParameterMissing" {
		t.Fatalf("global account: %+v, want 400 ActionParameterMissing", r)
	}
	text := r.Detail
	for _, want := range []string{"node0 (system " + f.ids[0] + ")", "node1 (system " + f.ids[1] + ")"} {
		if !strings.Contains(text, want) {
			t.Errorf("the refusal does not name %q: %s", want, text)
		}
	}
}

// TestNICFirmwareRelatedItemIsAnArray: a machine without NICs has a NIC
// firmware item whose RelatedItem is [] (the schema has no null; DMTF's
// Service-Validator failed it).
func TestNICFirmwareRelatedItemIsAnArray(t *testing.T) {
	m := &machine.Machine{ID: "0b6c7e4e-0000-4000-8000-000000000001", Name: "no-nics"}
	b, err := json.Marshal(softwareInventory(m, machine.FirmwareNIC, identity{}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"RelatedItem":[]`) {
		t.Errorf("NIC firmware of a machine without NICs: %s, want RelatedItem []", b)
	}
}

// TestSimpleUpdateRefusalNamesOnlyWhatTheCallerManages: the refusal of a
// SimpleUpdate without Targets names the accounts that would work only to
// a caller who may see them (issue 46: it named every bound account and
// its system to any caller with ConfigureUsers reaching several systems).
// A machine's own user whose credentials two machines share reaches both,
// manages no account, and is told how without a name; the global
// administrator, who sees every account, is told their names.
func TestSimpleUpdateRefusalNamesOnlyWhatTheCallerManages(t *testing.T) {
	f, images := newUpdateFixture(t)
	opt, st := withStore(t)
	opt(f.srv)
	if _, err := st.Create(accounts.New{UserName: "node0", Password: "node0-password", Role: accounts.Operator, Enabled: true, System: f.ids[0]}); err != nil {
		t.Fatal(err)
	}
	for _, id := range f.ids {
		if _, err := f.svc.UpdateSettings(context.Background(), id, func(s *machine.Settings) error {
			s.Credentials = []machine.Credential{{Username: "shared", Password: "shared-password"}}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	update := func(user, pass string) string {
		w := f.do(req{method: "POST", path: "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate", user: user, pass: pass,
			body: `{"ImageURI":"` + images + `/bios-2.3.1.bin"}`})
		if w.Code != 400 {
			t.Fatalf("SimpleUpdate without Targets as %s: %d %s, want 400", user, w.Code, w.Body)
		}
		return w.Body.String()
	}
	if body := update("shared", "shared-password"); strings.Contains(body, "node0") || strings.Contains(body, "Accounts that would work") {
		t.Errorf("a machine's own user reaching two systems is told of accounts: %s", body)
	}
	if body := update(testUser, testPass); !strings.Contains(body, "node0 (system "+f.ids[0]+")") || !strings.Contains(body, "shared (system ") {
		t.Errorf("the global administrator is not told the accounts that would work: %s", body)
	}
}
