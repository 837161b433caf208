package redfish

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"

	"github.com/bmlab/bmlab/internal/testenv"
)

// listen serves the fixture on a loopback listener.
func (f *fixture) listen(t *testing.T) string {
	t.Helper()
	ts := httptest.NewServer(f.h) // 127.0.0.1, a free port
	t.Cleanup(ts.Close)
	return ts.URL
}

func TestGofish(t *testing.T) {
	testenv.Integration(t)
	for _, basic := range []bool{true, false} {
		name := map[bool]string{true: "basic", false: "session"}[basic]
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, 3)
			c := gofishConnect(t, gofish.ClientConfig{Endpoint: f.listen(t), Username: testUser, Password: testPass, BasicAuth: basic})
			systems, err := c.Service.Systems()
			if err != nil || len(systems) != 3 {
				t.Fatalf("systems: %d, %v", len(systems), err)
			}
			var sys *schemas.ComputerSystem
			for _, s := range systems {
				if s.UUID == f.ids[0] {
					sys = s
				}
			}
			if sys == nil || sys.PowerState != schemas.OffPowerState {
				t.Fatalf("system %s not found, or not off", f.ids[0])
			}
			if sys.MemorySummary.TotalSystemMemoryGiB == nil || *sys.MemorySummary.TotalSystemMemoryGiB != 8 {
				t.Errorf("memory %v", sys.MemorySummary.TotalSystemMemoryGiB)
			}
			err = sys.SetBoot(&schemas.Boot{
				BootSourceOverrideTarget:  schemas.PxeBootSource,
				BootSourceOverrideEnabled: schemas.OnceBootSourceOverrideEnabled,
				BootSourceOverrideMode:    schemas.UEFIBootSourceOverrideMode,
			})
			if err != nil {
				t.Fatalf("SetBoot: %v", err)
			}
			if _, err := sys.Reset(schemas.OnResetType); err != nil {
				t.Fatalf("Reset: %v", err)
			}
			m, _ := f.svc.Get(f.ids[0])
			if m.Power != "On" || m.Settings.Boot.Enabled != "Disabled" {
				t.Errorf("after gofish reset: power %s, boot %+v", m.Power, m.Settings.Boot)
			}
			if _, err := sys.Reset("Explode"); err == nil {
				t.Errorf("unknown reset type accepted")
			}
			procs, err := sys.Processors()
			if err != nil || len(procs) != 1 || procs[0].TotalThreads == nil || *procs[0].TotalThreads != 4 {
				t.Errorf("processors %v %v", procs, err)
			}
			nics, err := sys.EthernetInterfaces()
			if err != nil || len(nics) != 1 || nics[0].MACAddress == "" {
				t.Errorf("NICs %v %v", nics, err)
			}
			storage, err := sys.Storage()
			if err != nil || len(storage) != 1 {
				t.Fatalf("storage %v %v", storage, err)
			}
			drives, err := storage[0].Drives()
			if err != nil || len(drives) != 1 || drives[0].MediaType != schemas.HDDMediaType {
				t.Errorf("drives %d %v, want the one disk, an HDD", len(drives), err)
			}
			ctrls, err := storage[0].Controllers()
			if err != nil || len(ctrls) != 1 || ctrls[0].ID != "0" {
				t.Errorf("storage controllers %v %v, want one", ctrls, err)
			}
			if vols, err := storage[0].Volumes(); err != nil || len(vols) != 0 {
				t.Errorf("volumes %v %v, want none", vols, err)
			}
			bios, err := sys.Bios()
			if err != nil {
				t.Fatal(err)
			}
			if err := bios.UpdateBiosAttributes(schemas.SettingsAttributes{"QuietBoot": true}); err != nil {
				t.Fatalf("BIOS update: %v", err)
			}
			if m, _ := f.svc.Get(f.ids[0]); m.Settings.BIOSPending["QuietBoot"] != true {
				t.Errorf("pending BIOS %v", m.Settings.BIOSPending)
			}
			sb, err := sys.SecureBoot()
			if err != nil {
				t.Fatal(err)
			}
			sb.SecureBootEnable = true
			if err := sb.Update(); err != nil {
				t.Fatalf("secure boot update: %v", err)
			}
			managers, err := c.Service.Managers()
			if err != nil || len(managers) != 3 || managers[0].ServiceEntryPointUUID == "" {
				t.Errorf("managers %d %v", len(managers), err)
			}
			chassis, err := c.Service.Chassis()
			if err != nil || len(chassis) != 3 {
				t.Errorf("chassis %d %v", len(chassis), err)
			}
			regs, err := c.Service.Registries()
			if err != nil || len(regs) != 3 {
				t.Errorf("registries %d %v", len(regs), err)
			}
		})
	}
}

func TestSushy(t *testing.T) {
	testenv.Integration(t)
	py := testenv.Python(t, "sushy")
	f := newFixture(t, 2)
	runToDone(t, "sushy", exec.Command(py, "testdata/sushy_client.py", f.listen(t), testUser, testPass, f.ids[0], "sim-0001"))
}

// TestSushyEvents: Ironic's subscription calls through sushy, and a test
// event delivered to the listener they named.
func TestSushyEvents(t *testing.T) {
	testenv.Integration(t)
	py := testenv.Python(t, "sushy")
	f := eventFixture(t)
	out, err := exec.Command(py, "testdata/sushy_events.py", f.listen(t), testUser, testPass).CombinedOutput()
	t.Logf("sushy:\n%s", out)
	if err != nil {
		t.Fatalf("sushy event client failed: %v", err)
	}
}

// TestRedfishtoolAccounts: redfishtool's user administration against the
// AccountService: add a user, log in as it, change its password and role,
// disable it, delete it.
func TestRedfishtoolAccounts(t *testing.T) {
	testenv.Integration(t)
	rt := testenv.Command(t, "redfishtool")
	opt, _ := withStore(t)
	f := newFixture(t, 1, opt)
	host := strings.TrimPrefix(f.listen(t), "http://")
	run := func(user, pass string, args ...string) (string, error) {
		t.Helper()
		base := []string{"-r", host, "-S", "Never", "-A", "Basic", "-u", user, "-p", pass}
		out, err := exec.Command(rt, append(base, args...)...).CombinedOutput()
		return string(out), err
	}
	admin := func(args ...string) string {
		t.Helper()
		out, err := run(testUser, testPass, args...)
		if err != nil {
			t.Fatalf("redfishtool %v: %v\n%s", args, err, out)
		}
		return out
	}
	if out := admin("AccountService", "Roles", "list"); !strings.Contains(out, "ReadOnly") || !strings.Contains(out, "Operator") {
		t.Errorf("Roles list:\n%s", out)
	}
	admin("AccountService", "adduser", "rtuser", "rt-pass-1", "ReadOnly")
	if out := admin("AccountService", "Accounts", "list"); !strings.Contains(out, "rtuser") {
		t.Errorf("Accounts list lacks rtuser:\n%s", out)
	}
	if out, err := run("rtuser", "rt-pass-1", "-I", f.ids[0], "Systems", "get"); err != nil || !strings.Contains(out, "PowerState") {
		t.Errorf("the new ReadOnly user cannot read: %v\n%s", err, out)
	}
	if out, err := run("rtuser", "rt-pass-1", "-I", f.ids[0], "Systems", "reset", "On"); err == nil {
		t.Errorf("a ReadOnly user powered a system on:\n%s", out)
	}
	admin("AccountService", "setpassword", "rtuser", "rt-pass-2")
	if _, err := run("rtuser", "rt-pass-1", "Systems"); err == nil {
		t.Errorf("the old password still works")
	}
	admin("AccountService", "useradmin", "rtuser", "setRoleId", "Operator")
	if out, err := run("rtuser", "rt-pass-2", "-I", f.ids[0], "Systems", "reset", "On"); err != nil {
		t.Errorf("the user made Operator cannot power on: %v\n%s", err, out)
	}
	admin("AccountService", "useradmin", "rtuser", "disable")
	if _, err := run("rtuser", "rt-pass-2", "Systems"); err == nil {
		t.Errorf("a disabled account logged in")
	}
	admin("AccountService", "deleteuser", "rtuser")
	if out := admin("AccountService", "Accounts", "list"); strings.Contains(out, "rtuser") {
		t.Errorf("rtuser still listed:\n%s", out)
	}
}

func TestRedfishtool(t *testing.T) {
	testenv.Integration(t)
	rt := testenv.Command(t, "redfishtool")
	f := newFixture(t, 2)
	host := strings.TrimPrefix(f.listen(t), "http://")
	run := func(args ...string) string {
		t.Helper()
		base := []string{"-r", host, "-S", "Never", "-u", testUser, "-p", testPass}
		out, err := exec.Command(rt, append(base, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("redfishtool %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	for _, auth := range []string{"Basic", "Session"} {
		if out := run("-A", auth, "Systems"); !strings.Contains(out, f.ids[1]) {
			t.Errorf("%s: Systems lacks %s:\n%s", auth, f.ids[1], out)
		}
		if out := run("-A", auth, "-I", f.ids[0], "Systems", "get"); !strings.Contains(out, `"PowerState"`) {
			t.Errorf("%s: system get:\n%s", auth, out)
		}
	}
	run("-A", "Session", "-I", f.ids[0], "Systems", "reset", "On")
	run("-A", "Basic", "-I", f.ids[0], "Systems", "setBootOverride", "Continuous", "Hdd")
	m, _ := f.svc.Get(f.ids[0])
	if m.Power != "On" || m.Settings.Boot.Target != "Hdd" || m.Settings.Boot.Enabled != "Continuous" {
		t.Errorf("after redfishtool: power %s boot %+v", m.Power, m.Settings.Boot)
	}
	if out := run("-A", "Basic", "Managers"); !strings.Contains(out, f.ids[0]) {
		t.Errorf("Managers:\n%s", out)
	}
	if out := run("-A", "Basic", "SessionService"); !strings.Contains(out, "SessionTimeout") {
		t.Errorf("SessionService:\n%s", out)
	}
}

// recorded is a handler that keeps every request's method, path, Content-Type
// and answer, for tests that show what a client sent.
type recorded struct {
	h  http.Handler
	mu sync.Mutex
	l  []string // "METHOD PATH [Content-Type] → STATUS"
}

func (rec *recorded) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sr := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	rec.h.ServeHTTP(sr, r)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.l = append(rec.l, fmt.Sprintf("%s %s [%s] → %d", r.Method, r.URL.Path, r.Header.Get("Content-Type"), sr.status))
}

// lines returns what was recorded of changes (not GETs).
func (rec *recorded) changes() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []string
	for _, l := range rec.l {
		if !strings.HasPrefix(l, "GET ") {
			out = append(out, l)
		}
	}
	return out
}

// TestSushyEveryAction: each action and change Ironic makes through
// python3-sushy (SessionOrBasicAuth, Ironic's default) still succeeds now
// that a POST without a JSON Content-Type is refused (issue 32): sushy's
// EjectMedia and ResetBios try without a body first, are answered 415, and
// send {} as JSON; nothing ends in a 415.
func TestSushyEveryAction(t *testing.T) {
	testenv.Integration(t)
	py := testenv.Python(t, "sushy")
	f := eventFixture(t)
	rec := &recorded{h: f.h}
	ts := httptest.NewServer(rec)
	t.Cleanup(ts.Close)
	runToDone(t, "sushy", exec.Command(py, "testdata/sushy_actions.py", ts.URL, testUser, testPass, f.ids[0]))
	changes := rec.changes()
	t.Logf("what sushy sent:\n%s", strings.Join(changes, "\n"))
	refused := map[string]bool{}
	for _, l := range changes {
		path := strings.Fields(l)[1]
		switch {
		case strings.HasSuffix(l, "→ 415"):
			refused[path] = true
		case strings.Contains(l, "[application/json]") && !strings.HasSuffix(l, "→ 415"):
			delete(refused, path)
		}
	}
	for p := range refused {
		t.Errorf("sushy's %s ended refused (415)", p)
	}
	for _, want := range []string{"VirtualMedia.EjectMedia", "Bios.ResetBios", "Manager.Reset", "EventService.SubmitTestEvent", "SecureBoot.ResetKeys"} {
		if !slices.ContainsFunc(changes, func(l string) bool {
			return strings.Contains(l, want) && strings.HasSuffix(l, "→ 204") || strings.Contains(l, want) && strings.HasSuffix(l, "→ 200")
		}) {
			t.Errorf("no successful %s among what sushy sent", want)
		}
	}
}

// TestFenceRedfish: fence_redfish (Debian's fence-agents, what a two-node
// cluster fences with) reads and changes power over HTTPS, JSON-typed as
// the refusal of untyped POSTs (issue 32) needs.
func TestFenceRedfish(t *testing.T) {
	testenv.Integration(t)
	fence := testenv.Command(t, "fence_redfish")
	f := newFixture(t, 1)
	rec := &recorded{h: f.h}
	ts := httptest.NewTLSServer(rec)
	t.Cleanup(ts.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(ts.URL, "https://"))
	run := func(action string) string {
		t.Helper()
		out, err := exec.Command(fence, "--ip=127.0.0.1", "--ipport="+port, "--username="+testUser, "--password="+testPass,
			"--ssl-insecure", "--systems-uri=/redfish/v1/Systems/"+f.ids[0], "--action="+action).CombinedOutput()
		if err != nil && action != "status" {
			t.Fatalf("fence_redfish --action=%s: %v\n%s", action, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if out := run("status"); !strings.Contains(out, "OFF") {
		t.Errorf("status of an Off system: %q", out)
	}
	run("on")
	if out := run("status"); !strings.Contains(out, "ON") {
		t.Errorf("status after on: %q", out)
	}
	run("reboot")
	run("off")
	if m, _ := f.svc.Get(f.ids[0]); m.Power != "Off" {
		t.Errorf("power %s after fence_redfish off", m.Power)
	}
	for _, l := range rec.changes() {
		if strings.HasSuffix(l, "→ 415") || !strings.Contains(l, "[application/json]") {
			t.Errorf("fence_redfish sent %s", l)
		}
	}
}
