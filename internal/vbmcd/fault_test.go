package vbmcd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virttest"
	"github.com/digitalocean/go-libvirt"
)

// TestFaults: each fault set with `vbmcd fault` on a running daemon is what
// a client sees, on the face it concerns, until it is used up or cleared;
// the client then recovers.
func TestFaults(t *testing.T) {
	ipmi := newIPMITool(t, "sim-pass-1")
	var stateDir string
	addr, _ := simDaemon(t, func(c *Config) {
		ipmi.ipmiOn(c)
		stateDir = c.StateDir
	})
	base := "http://" + addr + "/redfish/v1"
	get := func(path string) (int, http.Header, string, error) {
		r, err := send("GET", base+path, "admin", "sim-pass-1", "")
		return r.Code, r.Header, string(r.Body), err
	}
	sys := firstSimSystem(t, addr)
	fault := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := Run(context.Background(), Streams{Out: &out, ErrOut: &out}, append([]string{"fault", "--state-dir", stateDir}, args...)); err != nil {
			t.Fatalf("vbmcd fault %v: %v\n%s", args, err, out.String())
		}
		return out.String()
	}
	tool := ipmi.run

	// Two Redfish requests answered 503 with Retry-After, then served.
	fault("set", sys, "--http-errors", "2")
	for i := range 2 {
		code, h, body, err := get("/Systems/" + sys)
		if err != nil || code != 503 || h.Get("Retry-After") == "" || !strings.Contains(body, "ServiceTemporarilyUnavailable") {
			t.Fatalf("request %d under --http-errors 2: %d Retry-After %q %v %s", i, code, h.Get("Retry-After"), err, body)
		}
	}
	if code, _, _, _ := get("/Systems/" + sys); code != 200 {
		t.Fatalf("after the two errors: %d, want 200", code)
	}
	if out := fault("list"); !strings.Contains(out, "MACHINE") || strings.Contains(out, sys) {
		t.Errorf("used-up faults still listed:\n%s", out)
	}
	// 409, as during a transition.
	fault("set", sys, "--http-errors", "1", "--http-status", "409")
	if code, _, body, _ := get("/Systems/" + sys); code != 409 || !strings.Contains(body, "ResourceInUse") {
		t.Errorf("--http-status 409: %d %s", code, body)
	}

	// Latency on both faces.
	fault("set", sys, "--latency", "300ms")
	start := time.Now()
	get("/Systems/" + sys)
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("Redfish GET took %v under --latency 300ms", d)
	}
	start = time.Now()
	if out, err := tool("power", "status"); err != nil {
		t.Fatalf("ipmitool under latency: %v\n%s", err, out)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("ipmitool took %v under --latency 300ms", d)
	}
	fault("clear", sys)

	// A dropped IPMI packet: ipmitool retries and gets through.
	fault("set", sys, "--ipmi-drop", "1")
	if out, err := tool("-R", "3", "-N", "1", "power", "status"); err != nil || !strings.Contains(out, "Chassis Power is") {
		t.Errorf("ipmitool with one packet dropped: %v\n%s", err, out)
	}

	// A refused power-on: accepted, the machine stays off and says why.
	fault("set", sys, "--refuse-power-on")
	r, _ := http.NewRequest("POST", base+"/Systems/"+sys+"/Actions/ComputerSystem.Reset", strings.NewReader(`{"ResetType":"On"}`))
	r.SetBasicAuth("admin", "sim-pass-1")
	r.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(r)
	if err != nil || resp.StatusCode != 204 {
		t.Fatalf("power-on under --refuse-power-on: %v %v", resp, err)
	}
	resp.Body.Close()
	var st struct {
		PowerState string
		Status     struct{ Health string }
	}
	if !testenv.WaitFor(5*time.Second, func() bool {
		_, _, body, _ := get("/Systems/" + sys)
		json.Unmarshal([]byte(body), &st)
		return st.PowerState == "Off" && st.Status.Health == "Critical"
	}) {
		t.Errorf("after a refused power-on: %+v, want Off and Critical", st)
	}
	if out, _ := tool("chassis", "status"); !strings.Contains(out, "Power Control Fault  : true") {
		t.Errorf("IPMI does not show the refused power-on as a power fault:\n%s", out)
	}
	fault("clear", sys)

	// A BMC reboot window: nothing answers, then everything does.
	fault("set", sys, "--down", "1s")
	if _, _, _, err := get("/Systems/" + sys); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Redfish during the down window: %v, want the connection closed unanswered", err)
	}
	if out, err := tool("-R", "1", "-N", "1", "power", "status"); err == nil {
		t.Errorf("ipmitool during the down window answered:\n%s", out)
	}
	if !testenv.WaitFor(5*time.Second, func() bool { c, _, _, _ := get("/Systems/" + sys); return c == 200 }) {
		t.Errorf("Redfish not answering again after the window")
	}
	if out, err := tool("power", "status"); err != nil {
		t.Errorf("ipmitool after the window: %v\n%s", err, out)
	}

	// What a typo gets.
	var out bytes.Buffer
	err = Run(context.Background(), Streams{Out: &out, ErrOut: &out}, []string{"fault", "--state-dir", stateDir, "set", "no-such-machine", "--latency", "1s"})
	if err == nil || !strings.Contains(err.Error(), "no machine no-such-machine") {
		t.Errorf("fault on an unknown machine: %v", err)
	}
	err = Run(context.Background(), Streams{Out: &out, ErrOut: &out}, []string{"fault", "--state-dir", t.TempDir(), "list"})
	if err == nil || !strings.Contains(err.Error(), "is it running with this --state-dir") {
		t.Errorf("fault with no daemon: %v", err)
	}
}

// TestE2EFaults: faults from the config, on the libvirt backend and real
// qemu. A 409 from the first request on; a power-on accepted and refused,
// with libvirt's domain staying shut off; a media insert held with nothing
// in the drive. Cleared at run time, the held insert goes on and the
// machine boots the image.
func TestE2EFaults(t *testing.T) {
	lab := virttest.New(t, "e2e-fault-")
	a := lab.NewVM(t, "a", virttest.VMOptions{NoCD: true, DiskMarker: true})
	b := lab.NewVM(t, "b", virttest.VMOptions{NoCD: true, DiskMarker: true})
	var stateDir string
	url := daemon(t, "e2e-fault-", func(c *Config) {
		stateDir = c.StateDir
		c.Faults = []faultSpec{
			{Machine: a.Name, HTTPErrors: 1, HTTPStatus: 409},
			{Machine: b.ID, RefusePowerOn: true, MediaStuck: true},
		}
	})
	img := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, testenv.MarkerISO(t)) }))
	defer img.Close()
	do := func(method, path, body string) (int, http.Header, string) {
		t.Helper()
		r, err := send(method, url+path, "admin", "e2e-pass", body)
		if err != nil {
			t.Fatal(err)
		}
		return r.Code, r.Header, string(r.Body)
	}

	// From the config: in force from the first request.
	if code, _, body := do("GET", "/redfish/v1/Systems/"+a.ID, ""); code != 409 || !strings.Contains(body, "ResourceInUse") {
		t.Errorf("first GET under the configured fault: %d %s", code, body)
	}
	if code, _, _ := do("GET", "/redfish/v1/Systems/"+a.ID, ""); code != 200 {
		t.Errorf("second GET: %d, want 200", code)
	}
	var out bytes.Buffer
	fault := func(args ...string) {
		t.Helper()
		out.Reset()
		if err := Run(context.Background(), Streams{Out: &out, ErrOut: &out}, append([]string{"fault", "--state-dir", stateDir}, args...)); err != nil {
			t.Fatalf("vbmcd fault %v: %v\n%s", args, err, out.String())
		}
	}

	// Ironic's client rides out a busy BMC: sushy retries a GET answered
	// 503, 3 s apart, and gets the system.
	fault("set", a.Name, "--http-errors", "2")
	start := time.Now()
	if st := sushy(t, url, "admin", "e2e-pass", a.ID, "show"); st.Power != "Off" {
		t.Errorf("sushy through two 503s read %+v", st)
	}
	if d := time.Since(start); d < 6*time.Second {
		t.Errorf("sushy read the system in %v: it cannot have met the two 503s (it waits 3 s before each retry)", d)
	}

	// A refused power-on: accepted; libvirt's domain stays shut off, and
	// the system says why.
	if code, _, body := do("POST", "/redfish/v1/Systems/"+b.ID+"/Actions/ComputerSystem.Reset", `{"ResetType":"On"}`); code != 204 {
		t.Fatalf("Reset On under refusePowerOn: %d %s", code, body)
	}
	var sys struct {
		PowerState string
		Status     struct{ Health string }
	}
	if !testenv.WaitFor(10*time.Second, func() bool {
		_, _, body := do("GET", "/redfish/v1/Systems/"+b.ID, "")
		json.Unmarshal([]byte(body), &sys)
		return sys.PowerState == "Off" && sys.Status.Health == "Critical"
	}) {
		t.Errorf("after the refused power-on: %+v, want Off and Critical", sys)
	}
	if st := lab.DomainState(t, b.Name); st != libvirt.DomainShutoff {
		t.Errorf("libvirt says the refused domain is in state %d, want shut off", st)
	}

	// A held insert: the task runs on, the drive stays empty.
	code, h, body := do("POST", "/redfish/v1/Managers/"+b.ID+"/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia", `{"Image":"`+img.URL+`/boot.iso"}`)
	if code != 202 || h.Get("Location") == "" {
		t.Fatalf("InsertMedia under mediaStuck: %d %s", code, body)
	}
	var accepted struct {
		ID string `json:"@odata.id"`
	}
	json.Unmarshal([]byte(body), &accepted)
	task := accepted.ID // the Task, which outlives its monitor
	if !strings.HasPrefix(task, "/redfish/v1/TaskService/Tasks/") {
		t.Fatalf("InsertMedia answered no task: %s", body)
	}
	taskState := func() string {
		var tk struct{ TaskState string }
		_, _, body := do("GET", task, "")
		json.Unmarshal([]byte(body), &tk)
		return tk.TaskState
	}
	deadline := time.Now().Add(2 * time.Second) // the 1 MB image loads in milliseconds
	for time.Now().Before(deadline) {
		if s := taskState(); s != "Running" {
			t.Fatalf("held insert: task %s, want Running", s)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if x := lab.LiveXML(t, b.Name, libvirt.DomainXMLInactive); strings.Contains(x, ".iso") {
		t.Errorf("a held insert put an image into the domain:\n%s", x)
	}

	// Cleared at run time: the insert completes, the machine boots it.
	fault("clear", b.Name)
	if !testenv.WaitFor(10*time.Second, func() bool { return taskState() == "Completed" }) {
		_, _, body := do("GET", task, "")
		t.Fatalf("the insert did not complete once the fault was cleared: %s %s", task, body)
	}
	if code, _, body := do("PATCH", "/redfish/v1/Systems/"+b.ID, `{"Boot":{"BootSourceOverrideTarget":"Cd","BootSourceOverrideEnabled":"Once"}}`); code/100 != 2 {
		t.Fatalf("PATCH boot: %d %s", code, body)
	}
	if code, _, body := do("POST", "/redfish/v1/Systems/"+b.ID+"/Actions/ComputerSystem.Reset", `{"ResetType":"On"}`); code != 204 {
		t.Fatalf("Reset On after clearing: %d %s", code, body)
	}
	b.WaitMarker(t, testenv.Marker, 0, bootTimeout)
	_, _, body = do("GET", "/redfish/v1/Systems/"+b.ID, "")
	json.Unmarshal([]byte(body), &sys)
	if sys.Status.Health != "OK" {
		t.Errorf("after a good power-on the health is %q, want OK", sys.Status.Health)
	}
}
