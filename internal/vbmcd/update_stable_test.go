package vbmcd

import (
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/testenv"
)

// TestSushyResourcesStableAfterBMCUpdate drives the check Ironic makes
// after a firmware update before it moves on (redfish firmware interface,
// _validate_resources_stability): the System, its Manager and its Chassis'
// NetworkAdapters read three times in a row. Right after a BMC update the
// BMC is away (--bmc-update-downtime), so the first reads fail; then all
// three answer three times in a row, well within Ironic's timeout, and the
// Manager shows the new version.
func TestSushyResourcesStableAfterBMCUpdate(t *testing.T) {
	testenv.Integration(t)
	py := testenv.Python(t, "sushy")
	const downtime = 2 * time.Second
	addr, _ := simDaemon(t, func(c *Config) {
		c.BMCUpdateDowntime = downtime
		c.MediaAllowLoopback = true
	})
	url := "http://" + addr
	id := firstSimSystem(t, addr)
	images := firmwareServer(t)
	step := func(args ...string) sushyUpdate {
		t.Helper()
		var st sushyUpdate
		cmd := exec.Command(py, append([]string{"testdata/sushy_update.py", url, "admin", "sim-pass-1", id}, args...)...)
		cmd.Env = os.Environ()
		out, err := cmd.CombinedOutput()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if err != nil || json.Unmarshal([]byte(lines[len(lines)-1]), &st) != nil {
			t.Fatalf("sushy_update.py %v: %v\n%s", args, err, out)
		}
		return st
	}

	up := step("update", images+"/fw/firmware.bin", "/redfish/v1/Managers/"+id)
	if up.Monitor == "" {
		t.Fatalf("BMC update: %+v, want a task", up)
	}
	// sushy read the task monitor (simple_update does at once) while the
	// BMC flashed; then it reboots. Ironic polls until the System, Manager
	// and NetworkAdapters answer three times in a row; start that once
	// the BMC is away.
	if !testenv.WaitFor(30*time.Second, func() bool {
		_, err := send("GET", url+"/redfish/v1/Managers/"+id, "admin", "sim-pass-1", "")
		return err != nil
	}) {
		t.Fatalf("the BMC never went away for its reboot")
	}
	start := time.Now()
	st := step("stable", "3", "0.2", "60")
	took := time.Since(start)
	if !st.Stable {
		t.Fatalf("System, Manager and NetworkAdapters did not answer three times in a row within 60 s: %+v", st)
	}
	first := ""
	if len(st.Errors) > 0 {
		first = st.Errors[0]
	}
	t.Logf("stable after %v, %d attempts, %d failed on the way (first: %s)", took.Round(time.Millisecond), st.Attempts, len(st.Errors), first)
	if len(st.Errors) == 0 || took < downtime/2 {
		t.Errorf("the poll saw no downtime (%v, errors %v): it did not test the recovery", took, st.Errors)
	}
	if mon := step("monitor", up.Monitor, "wait"); mon.State != "Completed" {
		t.Errorf("BMC update task: %+v, want Completed", mon)
	}
	if inv := step("inventory"); inv.BMC != "5.1.0" {
		t.Errorf("after the update the Manager's FirmwareVersion is %q, want 5.1.0", inv.BMC)
	}
	if slices.ContainsFunc(st.Errors, func(e string) bool { return strings.Contains(e, "500") }) {
		t.Errorf("a 500 on the way: %v", st.Errors)
	}
}
