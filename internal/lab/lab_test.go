package lab_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virt"
)

// recorder is a Reporter that remembers what each step said.
type recorder struct {
	mu      sync.Mutex
	changed map[string]bool
	notes   []string
}

func (r *recorder) Start(string) {}
func (r *recorder) Note(step, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, step+": "+msg)
}
func (r *recorder) Done(step string, changed bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.changed == nil {
		r.changed = map[string]bool{}
	}
	r.changed[step] = changed
}

// bridge makes a bridge inside libvirtd's namespace (labci), where the
// nodes' NICs join it; no address, no traffic.
func bridge(t *testing.T, name string) {
	t.Helper()
	ns := os.Getenv("LAB_NETNS")
	if ns == "" {
		ns = "labci"
	}
	_ = exec.Command("ip", "-n", ns, "link", "del", name).Run()
	for _, args := range [][]string{{"-n", ns, "link", "add", name, "type", "bridge"}, {"-n", ns, "link", "set", name, "up"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	t.Cleanup(func() { _ = exec.Command("ip", "-n", ns, "link", "del", name).Run() })
}

func tinySpec(t *testing.T, name string) lab.Spec {
	return lab.Spec{
		Name: name,
		Dir:  testenv.QemuDir(t),
		Nodes: []lab.NodeSpec{
			{Name: name + "-master-0", Role: "master", VCPUs: 1, MemoryMiB: 256, DiskGiB: 1},
			{Name: name + "-worker-0", Role: "worker", VCPUs: 1, MemoryMiB: 256, DiskGiB: 1},
		},
		Bridge:    name + "-br",
		BMC:       lab.BMCSpec{Kind: "redfish-virtualmedia", Host: "127.0.0.1", RedfishPort: 18700, Username: "admin", Password: "lab-pass"},
		VbmcdPath: testenv.Binary(t, "vbmcd"),
	}
}

func TestUpAgainDownUp(t *testing.T) {
	testenv.Libvirt(t)
	ctx := context.Background()
	spec := tinySpec(t, "ltup")
	bridge(t, spec.Bridge)
	rep := &recorder{}
	l, err := lab.Open(ctx, spec, "qemu:///system", testenv.Logger(t), rep)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Down(context.Background()) })
	if err := l.Up(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if !rep.changed["nodes"] || !rep.changed["bmcs"] {
		t.Errorf("first up changed %v, want nodes and bmcs", rep.changed)
	}
	// Every node's BMC answers with the UUID of the domain whose NIC has the
	// node's boot MAC.
	lc, _ := l.Be.Conn().Client()
	for i, n := range l.Spec.Nodes {
		m, err := l.Be.Get(n.Name)
		if err != nil {
			t.Fatal(err)
		}
		if m.ID != n.UUID || len(m.NICs) != 1 || m.NICs[0].MAC != n.MAC {
			t.Errorf("%s: domain uuid %s NICs %+v, want uuid %s MAC %s", n.Name, m.ID, m.NICs, n.UUID, n.MAC)
		}
		if addr := l.Spec.BMCAddress(i); !strings.HasSuffix(addr, "/redfish/v1/Systems/"+n.UUID) {
			t.Errorf("BMC address %s", addr)
		}
		if found, owner, _ := virt.DomainOwner(ctx, lc, n.Name, lab.LabNS); !found || owner != "ltup" {
			t.Errorf("%s: found %v owner %q", n.Name, found, owner)
		}
	}
	pid := l.State.Vbmcd.PID

	// Up again changes nothing and keeps the same vbmcd.
	rep2 := &recorder{}
	l.Rep = rep2
	if err := l.Up(ctx, ""); err != nil {
		t.Fatal(err)
	}
	for step, ch := range rep2.changed {
		if ch {
			t.Errorf("second up changed step %s", step)
		}
	}
	if l.State.Vbmcd.PID != pid {
		t.Errorf("second up restarted vbmcd")
	}

	// A virtual-media boot of one node through the lab's BMC shows the marker.
	iso := testenv.MarkerISO(t)
	img := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, iso) }))
	defer img.Close()
	n := l.Spec.Nodes[0]
	base := fmt.Sprintf("https://127.0.0.1:%d/redfish/v1", spec.BMC.RedfishPort)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/Managers/" + n.UUID + "/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia", `{"Image":"` + img.URL + `/boot.iso"}`},
		{"PATCH", "/Systems/" + n.UUID, `{"Boot":{"BootSourceOverrideTarget":"Cd","BootSourceOverrideEnabled":"Once"}}`},
		{"POST", "/Systems/" + n.UUID + "/Actions/ComputerSystem.Reset", `{"ResetType":"On"}`},
	} {
		req, _ := http.NewRequest(c.method, base+c.path, strings.NewReader(c.body))
		req.SetBasicAuth("admin", "lab-pass")
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("%s %s: %d", c.method, c.path, resp.StatusCode)
		}
	}
	serial := filepath.Join(lab.StateDir(spec.Dir), "logs", n.Name+".serial.log")
	if !testenv.WaitFor(120*time.Second, func() bool { return testenv.Count(serial, testenv.Marker) > 0 }) {
		t.Fatalf("the marker never appeared in %s", serial)
	}

	// Down removes the domains and vbmcd; up after down works again.
	if err := l.Down(ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range l.Spec.Nodes {
		if found, _, _ := virt.DomainOwner(ctx, lc, n.Name, lab.LabNS); found {
			t.Errorf("%s left behind by down", n.Name)
		}
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); len(b) > 0 {
			t.Errorf("vbmcd (pid %d) still runs after down", pid)
		}
	}
	if err := l.Up(ctx, "nodes"); err != nil {
		t.Fatalf("up after down: %v", err)
	}
}

func TestForeignDomainStopsTheRun(t *testing.T) {
	testenv.Libvirt(t)
	ctx := context.Background()
	spec := tinySpec(t, "ltfor")
	l, err := lab.Open(ctx, spec, "qemu:///system", testenv.Logger(t), &recorder{})
	if err != nil {
		t.Fatal(err)
	}
	lc, _ := l.Be.Conn().Client()
	foreign := virt.DomainSpec{Name: spec.Nodes[0].Name, MemoryMiB: 64, NICs: []virt.NICSpec{{Bridge: "nowhere"}}}
	if _, err := virt.DefineDomain(ctx, lc, foreign, virt.Firmware{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = virt.DeleteDomain(context.Background(), lc, foreign.Name) })
	err = l.Up(ctx, "")
	if err == nil || !strings.Contains(err.Error(), "not this lab's") {
		t.Fatalf("up over a foreign domain: %v", err)
	}
	if err := l.Down(ctx); err != nil {
		t.Fatal(err)
	}
	if found, _, _ := virt.DomainOwner(ctx, lc, foreign.Name, lab.LabNS); !found {
		t.Errorf("down removed a foreign domain")
	}
}

func TestQemuCanReach(t *testing.T) {
	testenv.Root(t)
	dir := t.TempDir() // 0700: qemu cannot enter it
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	err := lab.QemuCanReach(filepath.Join(dir))
	if err == nil || !strings.Contains(err.Error(), "permission denied for qemu") {
		t.Errorf("err %v", err)
	}
	if err := lab.QemuCanReach(testenv.QemuDir(t)); err != nil {
		t.Errorf("a 0777 dir under /tmp: %v", err)
	}
}
