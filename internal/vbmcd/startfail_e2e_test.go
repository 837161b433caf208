package vbmcd

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/digitalocean/go-libvirt"

	"github.com/bmlab/bmlab/internal/testenv"
)

// TestE2EStartWithMissingFile: a VM whose disk file is gone cannot start.
// Reset On is refused with 409 naming the file (not a 500: the BMC did not
// fail, the machine cannot start as it is), or, when libvirt answers after
// the power action's answer, accepted and then shown: Health Critical with
// the file in the status. With the file back, the same power-on boots.
func TestE2EStartWithMissingFile(t *testing.T) {
	ipmi := newIPMITool(t, "e2e-pass")
	lab, vm, url := markerLab(t, "e2e-nofile-", ipmi.ipmiOn)
	disk := filepath.Join(filepath.Dir(vm.SerialLog), "disk.img")
	kept := disk + ".kept"
	if err := os.Rename(disk, kept); err != nil {
		t.Fatal(err)
	}

	code, body := postJSON(t, url, "/redfish/v1/Systems/"+vm.ID+"/Actions/ComputerSystem.Reset", `{"ResetType":"On"}`)
	switch {
	case code == http.StatusConflict:
		if !strings.Contains(body, "ResourceInUse") || !strings.Contains(body, disk) {
			t.Errorf("On with the disk file gone: 409 without ResourceInUse or the file's name: %s", body)
		}
	case code/100 == 2:
		if !testenv.WaitFor(30*time.Second, func() bool {
			v := getJSON(t, url, "/redfish/v1/Systems/"+vm.ID)
			s, _ := v["Status"].(map[string]any)
			return s["Health"] == "Critical" && strings.Contains(string(mustJSON(t, v["Status"])), "disk.img")
		}) {
			t.Errorf("On with the disk file gone was accepted and the system never said why")
		}
	default:
		t.Errorf("On with the disk file gone: %d %s, want 409 naming the file (or accepted, then Critical)", code, body)
	}
	// IPMI: D5h (not in present state), or accepted and then a power
	// control fault in the chassis status.
	if out, err := ipmi.run("chassis", "power", "on"); err != nil {
		t.Logf("ipmitool chassis power on: %s", strings.TrimSpace(out))
		if !strings.Contains(out, "present state") {
			t.Errorf("ipmitool power on with the disk file gone: %v %s, want D5h (not in present state)", err, out)
		}
	} else if !testenv.WaitFor(30*time.Second, func() bool {
		out, _ := ipmi.run("chassis", "status")
		return strings.Contains(out, "Power Control Fault  : true") // §28.2 bit 4
	}) {
		t.Errorf("ipmitool power on with the disk file gone was accepted and the chassis never showed a power fault")
	}
	if s := lab.DomainState(t, vm.Name); s != libvirt.DomainShutoff {
		t.Errorf("the VM runs without its disk file (state %d)", s)
	}

	if err := os.Rename(kept, disk); err != nil {
		t.Fatal(err)
	}
	if st := sushySecureBoot(t, url, vm.ID, "reset", "On"); st.Refused != nil {
		t.Fatalf("On with the disk file back: %+v", st.Refused)
	}
	vm.WaitMarker(t, testenv.DiskMarker, 0, bootTimeout)
}
