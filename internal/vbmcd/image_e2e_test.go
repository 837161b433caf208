package vbmcd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/testenv"
)

// TestImage builds vbmcd's OCI image twice (make image: hack/image.sh)
// and finds the same digest and the same archive bytes; then Debian's
// podman loads the archive and runs it (as root, in a storage of the
// test's own) as metal3-dev-env runs sushy-tools' image (no command, the
// configuration in /root/sushy) and as BMO's vbmctl runs it (vbmcd
// sushy-emulator with sushy-emulator's flags), both with a fake-driver
// configuration; python3-sushy drives the systems over Redfish and the
// first one's changes reach a listener deciding as fake-ipa does. The
// image has no shell, vbmcd runs as its own user, and SIGTERM stops it.
//
// How podman runs here: storage vfs (no overlay in this kernel's
// containers), the runc runtime with cgroupfs (crun refuses this
// machine's hybrid cgroup hierarchy), ulimits within the session's own
// (podman's defaults would raise them, which needs CAP_SYS_RESOURCE), and
// the host's network, on loopback.
func TestImage(t *testing.T) {
	testenv.Integration(t)
	testenv.Root(t)
	podman := testenv.Command(t, "podman")
	testenv.Command(t, "runc")
	root := testenv.RepoRoot()
	var digests, sums, archives []string
	for i := range 2 {
		out := filepath.Join(t.TempDir(), fmt.Sprint(i))
		archives = append(archives, filepath.Join(out, "vbmcd-oci.tar"))
		cmd := exec.Command("bash", filepath.Join(root, "hack/image.sh"))
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "OUT="+out, "REF=bmlab/vbmcd:test", "SOURCE_DATE_EPOCH=1700000000")
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make image: %v\n%s", err, b)
		}
		d, _ := os.ReadFile(filepath.Join(out, "digest"))
		sum, err := exec.Command("sha256sum", filepath.Join(out, "vbmcd-oci.tar")).Output()
		if err != nil {
			t.Fatal(err)
		}
		digests, sums = append(digests, strings.TrimSpace(string(d))), append(sums, strings.Fields(string(sum))[0])
	}
	if digests[0] != digests[1] || sums[0] != sums[1] || !strings.HasPrefix(digests[0], "sha256:") {
		t.Fatalf("two builds of the same tree: digests %v, archives %v", digests, sums)
	}
	t.Logf("image %s", digests[0])

	store := t.TempDir()
	pm := func(args ...string) (string, error) {
		base := []string{"--root", filepath.Join(store, "root"), "--runroot", filepath.Join(store, "run"), "--tmpdir", filepath.Join(store, "tmp"),
			"--storage-driver", "vfs", "--cgroup-manager", "cgroupfs", "--events-backend", "file", "--runtime", "runc"}
		b, err := exec.Command(podman, append(base, args...)...).CombinedOutput()
		return string(b), err
	}
	loaded, err := pm("load", "-i", archives[0])
	if err != nil || !strings.Contains(loaded, "bmlab/vbmcd:test") {
		t.Fatalf("podman load: %v\n%s", err, loaded)
	}
	if d, err := pm("image", "inspect", "--format", "{{.Digest}} {{.Config.User}}", "localhost/bmlab/vbmcd:test"); err != nil || strings.TrimSpace(d) != digests[0]+" 65532:65532" {
		t.Errorf("podman sees %q (%v), want the digest %s and user 65532", d, err, digests[0])
	}

	// Two containers, as the two Metal3 tools start sushy-tools':
	// metal3-dev-env runs the image with no command and its configuration
	// directory at /root/sushy (the image's default command, vbmcd
	// sushy-emulator, finds conf.py there and listens on every address);
	// BMO's vbmctl gives the configuration file at
	// /etc/sushy/sushy-emulator.conf, named by SUSHY_EMULATOR_CONFIG, and
	// sushy-emulator's flags as the command. The first announces the
	// system's changes to a listener deciding as fake-ipa does.
	ipa, listener := newFakeIPA(t)
	devEnvPort := testenv.Port(t, "::")
	devEnv := filepath.Join(t.TempDir(), "sushy-tools")
	if err := os.MkdirAll(devEnv, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(devEnv, "conf.py"), []byte(fmt.Sprintf(`import collections
SUSHY_EMULATOR_LISTEN_PORT = %d
SUSHY_EMULATOR_FAKE_DRIVER = True
SUSHY_EMULATOR_AUTH_FILE = "/root/sushy/htpasswd"
EXTERNAL_NOTIFICATION_URL = "%s"
SUSHY_EMULATOR_FAKE_SYSTEMS = [
    {'uuid': '27946b59-9e44-4fa7-8e91-f3527a1ef094', 'name': 'fake1', 'power_state': 'Off',
     'external_notifier': True, 'nics': [{'mac': '00:5c:52:31:3a:9c', 'ip': '172.22.0.100'}]},
]
`, devEnvPort, listener)), 0o644); err != nil {
		t.Fatal(err)
	}
	// metal3-dev-env's htpasswd, as it writes it (admin, password, bcrypt
	// cost 12): vbmcd reads it as sushy-tools does (issue 46).
	if err := os.WriteFile(filepath.Join(devEnv, "htpasswd"), []byte("admin:$2b$12$/dVOBNatORwKpF.ss99KB.vESjfyONOxyH.UgRwNyZi1Xs/W2pGVS\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	vbmctlConf := filepath.Join(t.TempDir(), "sushy-emulator.conf")
	if err := os.WriteFile(vbmctlConf, []byte(`SUSHY_EMULATOR_FAKE_DRIVER = True
SUSHY_EMULATOR_FAKE_SYSTEMS = [
    {'uuid': '27946b59-9e44-4fa7-8e91-f3527a1ef095', 'name': 'fake2', 'power_state': 'Off',
     'nics': [{'mac': '00:5c:52:31:3a:9d', 'ip': '172.22.0.101'}]},
]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	vbmctlPort := testenv.Port(t, "127.0.0.1")

	run := func(name string, args ...string) {
		t.Helper()
		base := []string{"run", "-d", "--name", name, "--network", "host", "--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096",
			"-e", "VBMCD_PASSWORD=image-pass-1"}
		if out, err := pm(append(base, args...)...); err != nil {
			t.Fatalf("podman run: %v\n%s", err, out)
		}
		t.Cleanup(func() {
			if out, err := pm("rm", "-f", "-t", "5", name); err != nil {
				t.Errorf("podman rm: %v\n%s", err, out)
			}
		})
	}
	answers := func(name, url, system string) {
		t.Helper()
		if !testenv.WaitFor(30*time.Second, func() bool {
			r, err := send("GET", url+"/redfish/v1/Systems/"+system, "admin", "image-pass-1", "")
			return err == nil && r.Code == 200
		}) {
			logs, _ := pm("logs", name)
			t.Fatalf("the container's vbmcd does not answer on %s; its log:\n%s", url, logs)
		}
	}
	devName := fmt.Sprintf("vbmcd-test-devenv-%d", os.Getpid())
	run(devName, "-v", devEnv+":/root/sushy:ro", "localhost/bmlab/vbmcd:test")
	devURL := fmt.Sprintf("http://127.0.0.1:%d", devEnvPort)
	answers(devName, devURL, "fake1")
	const id1, id2 = "27946b59-9e44-4fa7-8e91-f3527a1ef094", "27946b59-9e44-4fa7-8e91-f3527a1ef095"
	sushy(t, devURL, "admin", "password", id1, "boot", "Cd", "Once", "UEFI") // the htpasswd's user
	sushy(t, devURL, "admin", "image-pass-1", id1, "reset", "On")
	ipa.waitFor(t, "fake1 booted through the container", func(_ []map[string]any, d []string) bool {
		return len(d) == 1 && d[0] == "boot fake1"
	})
	sushy(t, devURL, "admin", "image-pass-1", id1, "reset", "ForceOff")
	ipa.waitFor(t, "fake1's agent stopped", func(_ []map[string]any, d []string) bool {
		return len(d) == 2 && d[1] == "shutdown fake1"
	})
	if logs, _ := pm("logs", devName); !strings.Contains(logs, "--redfish-addr [::]:"+fmt.Sprint(devEnvPort)) ||
		!strings.Contains(logs, "--htpasswd-file /root/sushy/htpasswd") {
		t.Errorf("the dev-env container's log does not say how it maps the configuration:\n%s", logs)
	}

	name := fmt.Sprintf("vbmcd-test-vbmctl-%d", os.Getpid())
	run(name, "-v", vbmctlConf+":/etc/sushy/sushy-emulator.conf:ro", "-e", "SUSHY_EMULATOR_CONFIG=/etc/sushy/sushy-emulator.conf",
		"localhost/bmlab/vbmcd:test",
		"sushy-emulator", "--interface", "127.0.0.1", "--port", fmt.Sprint(vbmctlPort), "--storage-pool", "default", "--libvirt-uri", "qemu:///system")
	url := fmt.Sprintf("http://127.0.0.1:%d", vbmctlPort)
	answers(name, url, "fake2")
	sushy(t, url, "admin", "image-pass-1", id2, "boot", "Pxe", "Once", "UEFI")
	if st := sushy(t, url, "admin", "image-pass-1", id2, "reset", "On"); st.Power != "On" && st.Power != "PoweringOn" {
		t.Errorf("after On through the container: %+v", st)
	}
	if top, err := pm("top", name, "user", "args"); err != nil || !strings.Contains(top, "vbmcd ") || strings.Contains(top, "root") {
		t.Errorf("the container's process (want user vbmcd, not root): %v\n%s", err, top)
	}
	if out, err := pm("exec", name, "/bin/sh", "-c", "true"); err == nil {
		t.Errorf("the image has a shell: %s", out)
	}
	if out, err := pm("stop", "-t", "10", name); err != nil {
		t.Errorf("podman stop: %v\n%s", err, out)
	}
	if logs, _ := pm("logs", name); !strings.Contains(logs, "shutting down") {
		t.Errorf("vbmcd did not shut down on SIGTERM:\n%s", logs)
	}
}
