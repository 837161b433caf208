package vbmcd

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virt"
	"github.com/bmlab/bmlab/internal/virttest"
)

// freshRoot gives vbmcd's default paths a fresh root of their own, made as
// / is (0755), for the rest of the test.
func freshRoot(t *testing.T) string {
	t.Helper()
	root, err := os.MkdirTemp("", "bmlab-root-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	old := defaultRoot
	defaultRoot = root
	t.Cleanup(func() { defaultRoot = old })
	return root
}

// defaultConfig is vbmcd's configuration from its flags' defaults, over the
// test's domains (the media directory left at its default).
func defaultConfig(t *testing.T, prefix string) Config {
	t.Helper()
	cfg, err := parse(t, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Backend, cfg.Libvirt = "libvirt", []virt.Host{{URI: "qemu:///system"}}
	cfg.Domains = []string{prefix + "*"}
	cfg.RedfishAddr = "127.0.0.1:0"
	cfg.Username, cfg.Password = "admin", "e2e-pass"
	cfg.StateDir = t.TempDir()
	cfg.MediaAllowLoopback = true // the test serves the image on loopback
	cfg.IPMI = false
	return cfg
}

// TestE2EDefaultMediaDirBoots (issue 25): with the default --media-dir on
// a fresh machine, vbmcd made /var/lib/bmlab 0700 and qemu could not reach
// the image ("Permission denied" at power-on). vbmcd now makes the
// directories it creates traversable by qemu's user, and the inserted ISO
// boots.
func TestE2EDefaultMediaDirBoots(t *testing.T) {
	lab := virttest.New(t, "e2e-mdir-")
	vm := lab.NewVM(t, "a", virttest.VMOptions{NoCD: true, DiskMarker: true})
	root := freshRoot(t)
	cfg := defaultConfig(t, "e2e-mdir-")
	if want := filepath.Join(root, "var/lib/bmlab/media"); cfg.MediaDir != want {
		t.Fatalf("default --media-dir %s, want %s", cfg.MediaDir, want)
	}
	out := start(t, cfg)
	re := regexp.MustCompile(`Redfish at (https://[0-9.:]+)/redfish/v1`)
	var url string
	if !testenv.WaitFor(30*time.Second, func() bool {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			url = m[1]
		}
		return url != ""
	}) {
		t.Fatalf("vbmcd did not start; output:\n%s", out.String())
	}
	for _, d := range []string{"var", "var/lib", "var/lib/bmlab"} {
		if fi, err := os.Stat(filepath.Join(root, d)); err != nil || fi.Mode().Perm()&0o001 == 0 {
			t.Errorf("%s made by vbmcd: %v %v, want traversable by others", d, fi.Mode(), err)
		}
	}
	iso := testenv.MarkerISO(t)
	img := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, iso) }))
	defer img.Close()
	if c, b := postJSON(t, url, "/redfish/v1/Managers/"+vm.ID+"/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia", `{"Image":"`+img.URL+`/boot.iso"}`); c/100 != 2 {
		t.Fatalf("InsertMedia: %d %s", c, b)
	}
	r, err := send("PATCH", url+"/redfish/v1/Systems/"+vm.ID, "admin", "e2e-pass", `{"Boot":{"BootSourceOverrideTarget":"Cd","BootSourceOverrideEnabled":"Once"}}`)
	if err != nil || r.Code/100 != 2 {
		t.Fatalf("PATCH boot: %v %d %s", err, r.Code, r.Body)
	}
	if c, b := postJSON(t, url, "/redfish/v1/Systems/"+vm.ID+"/Actions/ComputerSystem.Reset", `{"ResetType":"On"}`); c/100 != 2 {
		t.Fatalf("Reset On: %d %s", c, b)
	}
	if !testenv.WaitFor(bootTimeout, func() bool { return testenv.Count(vm.SerialLog, testenv.Marker) > 0 }) {
		m, _ := lab.Service.Get(vm.ID)
		t.Fatalf("the inserted ISO did not boot from the default media dir (power %s, fault %q)", m.Power, m.PowerFault)
	}
	lab.WaitPower(t, vm.ID, machine.PowerOff, bootTimeout)
}

// TestE2EMediaDirQemuCannotReachRefused: a media directory under a
// directory qemu cannot traverse (an old vbmcd's 0700 /var/lib/bmlab) stops
// vbmcd at start with a message naming that directory and the fix, instead
// of a "Permission denied" at the first virtual media boot.
func TestE2EMediaDirQemuCannotReachRefused(t *testing.T) {
	testenv.Libvirt(t)
	root := freshRoot(t)
	closed := filepath.Join(root, "var/lib/bmlab")
	if err := os.MkdirAll(closed, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := defaultConfig(t, "e2e-mdirno-")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := serve(ctx, cfg, testenv.Logger(t), &testenv.Buffer{}, false)
	if err == nil || !strings.Contains(err.Error(), closed+" (mode 0700") || !strings.Contains(err.Error(), "chmod o+x "+closed) {
		t.Fatalf("vbmcd with qemu unable to reach its media dir: %v; want a refusal naming %s and the fix", err, closed)
	}
}
