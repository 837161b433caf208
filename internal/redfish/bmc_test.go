package redfish

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bmlab/bmlab/internal/accounts"
	"github.com/bmlab/bmlab/internal/machine"
)

// TestBMCOfOneSystem: on a server's own BMC (AtBMC) every view is that
// server's: the collections list it alone, other systems are not found,
// whoever may reach it logs in and nobody else does, and sessions,
// accounts, subscriptions, tasks and the firmware inventory made there
// stay there.
func TestBMCOfOneSystem(t *testing.T) {
	f, images := newUpdateFixture(t)
	opt, st := withStore(t)
	opt(f.srv)
	mine, other := f.ids[1], f.ids[0]
	if _, err := st.Create(accounts.New{UserName: "other", Password: "other-password", Role: accounts.Administrator, Enabled: true, System: other}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Create(accounts.New{UserName: "everyone", Password: "everyone-pass", Role: accounts.Operator, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.UpdateSettings(context.Background(), mine, func(s *machine.Settings) error {
		s.Credentials = []machine.Credential{{Username: "own", Password: "own-password"}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	for _, coll := range []string{"Systems", "Managers", "Chassis"} {
		got := members(t, f, req{path: "/redfish/v1/" + coll, bmc: mine})
		if want := []string{"/redfish/v1/" + coll + "/" + mine}; !slices.Equal(got, want) {
			t.Errorf("%s on %s's BMC: %v, want %v", coll, mine, got, want)
		}
		if got := members(t, f, req{path: "/redfish/v1/" + coll}); len(got) != 2 {
			t.Errorf("%s on the service listener: %v, want both", coll, got)
		}
	}
	if w := f.do(req{path: "/redfish/v1/Systems/" + other, bmc: mine}); w.Code != http.StatusNotFound {
		t.Errorf("another system on this BMC: %d, want 404", w.Code)
	}

	// Logins: the service-wide user, an account bound to none and the
	// machine's own user work; another machine's account does not.
	for _, c := range []struct {
		user, pass string
		want       int
	}{
		{testUser, testPass, http.StatusOK},
		{"everyone", "everyone-pass", http.StatusOK},
		{"own", "own-password", http.StatusOK},
		{"other", "other-password", http.StatusUnauthorized},
	} {
		if w := f.do(req{path: "/redfish/v1/Systems/" + mine, bmc: mine, user: c.user, pass: c.pass}); w.Code != c.want {
			t.Errorf("%s on %s's BMC: %d, want %d", c.user, mine, w.Code, c.want)
		}
	}
	if got := members(t, f, req{path: "/redfish/v1/Systems", bmc: mine, user: "everyone", pass: "everyone-pass"}); len(got) != 1 {
		t.Errorf("an account bound to none, on one BMC: %v, want that BMC's system only", got)
	}

	// A session belongs to the BMC it was made on.
	w := f.do(req{method: http.MethodPost, path: "/redfish/v1/SessionService/Sessions", bmc: mine, noAuth: true,
		body: `{"UserName":"` + testUser + `","Password":"` + testPass + `"}`})
	if w.Code != http.StatusCreated {
		t.Fatalf("login on the BMC: %d %s", w.Code, w.Body)
	}
	tok, sess := w.Header().Get("X-Auth-Token"), w.Header().Get("Location")
	withToken := func(bmc string) int {
		return f.do(req{path: "/redfish/v1/Systems", bmc: bmc, noAuth: true, header: map[string]string{"X-Auth-Token": tok}}).Code
	}
	if got := withToken(mine); got != http.StatusOK {
		t.Errorf("the session on its BMC: %d", got)
	}
	for _, bmc := range []string{other, ""} {
		if got := withToken(bmc); got != http.StatusUnauthorized {
			t.Errorf("the session of %s's BMC on BMC %q: %d, want 401", mine, bmc, got)
		}
	}
	if got := members(t, f, req{path: "/redfish/v1/SessionService/Sessions", bmc: mine}); !slices.Equal(got, []string{sess}) {
		t.Errorf("sessions on the BMC: %v, want %s", got, sess)
	}
	if got := members(t, f, req{path: "/redfish/v1/SessionService/Sessions"}); slices.Contains(got, sess) {
		t.Errorf("the service listener lists the BMC's session %s", sess)
	}
	if w := f.do(req{path: sess}); w.Code != http.StatusNotFound {
		t.Errorf("the BMC's session read on the service listener: %d, want 404", w.Code)
	}

	// An account made on the BMC is its system's.
	w = f.do(req{method: http.MethodPost, path: "/redfish/v1/AccountService/Accounts", bmc: mine,
		body: `{"UserName":"made-here","Password":"made-here-pw","RoleId":"Operator"}`})
	if w.Code != http.StatusCreated {
		t.Fatalf("account on the BMC: %d %s", w.Code, w.Body)
	}
	made := w.Header().Get("Location")
	// At the BMC its Id is its IPMI user ID and its binding (the BMC's
	// own system) is not shown; the store binds it to the system.
	if a, ok := st.ByName(mine, "made-here"); !ok || a.System != mine || made != accountURI(strconv.Itoa(int(a.Slot))) || decode(t, w)["Oem"] != nil {
		t.Errorf("account made on %s's BMC: %+v at %s, body %s; want bound to it, named by its IPMI user ID", mine, a, made, w.Body)
	}
	names := func(bmc string) []string {
		var out []string
		for _, u := range members(t, f, req{path: "/redfish/v1/AccountService/Accounts", bmc: bmc}) {
			out = append(out, decode(t, f.do(req{path: u, bmc: bmc}))["UserName"].(string))
		}
		return out
	}
	if got := names(mine); !slices.Contains(got, "made-here") || slices.Contains(got, "other") {
		t.Errorf("accounts on %s's BMC: %v, want made-here and none of the other system's", mine, got)
	}
	if got := names(other); slices.Contains(got, "made-here") {
		t.Errorf("the other BMC lists made-here: %v", got)
	}
	w = f.do(req{method: http.MethodPost, path: "/redfish/v1/AccountService/Accounts", bmc: mine,
		body: `{"UserName":"elsewhere","Password":"elsewhere-pw","RoleId":"Operator","Oem":{"Bmlab":{"System":"` + other + `"}}}`})
	if w.Code != http.StatusForbidden {
		t.Errorf("an account for another system made on this BMC: %d, want 403", w.Code)
	}

	// The firmware inventory is this BMC's; SimpleUpdate without Targets
	// from the service-wide user updates its system.
	if got := members(t, f, req{path: "/redfish/v1/UpdateService/FirmwareInventory", bmc: mine}); len(got) != len(machine.FirmwareComponents) || slices.ContainsFunc(got, func(u string) bool { return !strings.HasSuffix(u, mine) }) {
		t.Errorf("firmware inventory on the BMC: %v", got)
	}
	const action = "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate"
	body := `{"ImageURI":"` + images + `/bios-2.3.1.bin","TransferProtocol":"HTTP"}`
	if w := f.do(req{method: http.MethodPost, path: action, body: body}); w.Code != http.StatusBadRequest {
		t.Errorf("SimpleUpdate without Targets on the service listener: %d, want 400", w.Code)
	}
	w = f.do(req{method: http.MethodPost, path: action, body: body, bmc: mine})
	if w.Code != http.StatusAccepted {
		t.Fatalf("SimpleUpdate without Targets on %s's BMC: %d %s", mine, w.Code, w.Body)
	}
	task := strings.Replace(w.Header().Get("Location"), "TaskMonitors", "Tasks", 1)
	if got := members(t, f, req{path: "/redfish/v1/TaskService/Tasks", bmc: mine}); !slices.Contains(got, task) {
		t.Errorf("tasks on the BMC: %v, want %s", got, task)
	}
	if got := members(t, f, req{path: "/redfish/v1/TaskService/Tasks", bmc: other}); slices.Contains(got, task) {
		t.Errorf("the other BMC lists task %s", task)
	}
	if v := decode(t, f.do(req{path: task, bmc: mine})); !strings.Contains(v["Messages"].([]any)[0].(map[string]any)["Message"].(string), f.name(mine)) {
		t.Errorf("task %s: %v, want an update of %s", task, v["Messages"], f.name(mine))
	}

	// An event subscription made on the BMC hears of its system only.
	w = f.do(req{method: http.MethodPost, path: "/redfish/v1/EventService/Subscriptions", bmc: mine,
		body: `{"Destination":"https://192.0.2.10/events","Protocol":"Redfish"}`})
	if w.Code != http.StatusCreated {
		t.Fatalf("subscription on the BMC: %d %s", w.Code, w.Body)
	}
	sub := w.Header().Get("Location")
	if got := members(t, f, req{path: "/redfish/v1/EventService/Subscriptions", bmc: other}); slices.Contains(got, sub) {
		t.Errorf("the other BMC lists subscription %s", sub)
	}
	if got := members(t, f, req{path: "/redfish/v1/EventService/Subscriptions", bmc: mine}); !slices.Equal(got, []string{sub}) {
		t.Errorf("subscriptions on the BMC: %v, want %s", got, sub)
	}
}

// name is a machine's name.
func (f *fixture) name(id string) string {
	m, err := f.svc.Get(id)
	if err != nil {
		f.t.Fatal(err)
	}
	return m.Name
}
