package vbmcd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/testenv"
)

// TestFaults: each fault set with `vbmcd fault` on a running daemon is what
// a client sees, on the face it concerns, until it is used up or cleared;
// the client then recovers.
func TestFaults(t *testing.T) {
	ipmitool := testenv.Command(t, "ipmitool")
	port := freeUDPPort(t)
	var stateDir string
	addr, _ := simDaemon(t, func(c *Config) {
		c.IPMI, c.IPMIPortBase = true, port
		stateDir = c.StateDir
	})
	base := "http://" + addr + "/redfish/v1"
	get := func(path string) (int, http.Header, string, error) {
		r, _ := http.NewRequest("GET", base+path, nil)
		r.SetBasicAuth("admin", "sim-pass-1")
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(r)
		if err != nil {
			return 0, nil, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b), nil
	}
	_, _, body, err := get("/Systems?$top=1")
	if err != nil {
		t.Fatal(err)
	}
	sys := regexp.MustCompile(`/Systems/([0-9a-f-]{36})`).FindStringSubmatch(body)[1]
	fault := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := Run(context.Background(), Streams{Out: &out, ErrOut: &out}, append([]string{"fault", "--state-dir", stateDir}, args...)); err != nil {
			t.Fatalf("vbmcd fault %v: %v\n%s", args, err, out.String())
		}
		return out.String()
	}
	tool := func(args ...string) (string, error) {
		argv := append([]string{"-I", "lanplus", "-H", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "admin", "-P", "sim-pass-1"}, args...)
		out, err := exec.Command(ipmitool, argv...).CombinedOutput()
		return string(out), err
	}

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
