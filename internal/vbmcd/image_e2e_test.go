package vbmcd

import (
	"fmt"
	"net"
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
// test's own) with a sushy-tools configuration mounted, as a vbmctl lab
// runs its BMC emulator's container, and python3-sushy drives the
// systems over Redfish. The image has no shell, and vbmcd runs as its own
// user.
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

	conf := filepath.Join(t.TempDir(), "sushy")
	if err := os.MkdirAll(conf, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(conf, 0o755)
	if err := os.WriteFile(filepath.Join(conf, "conf.py"), []byte(`SUSHY_EMULATOR_FAKE_DRIVER = True
SUSHY_EMULATOR_FAKE_SYSTEMS = [
    {'uuid': '27946b59-9e44-4fa7-8e91-f3527a1ef094', 'name': 'fake1', 'power_state': 'Off',
     'nics': [{'mac': '00:5c:52:31:3a:9c', 'ip': '172.22.0.100'}]},
]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	name := fmt.Sprintf("vbmcd-test-%d", os.Getpid())
	if out, err := pm("run", "-d", "--name", name, "--network", "host", "--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096",
		"-v", conf+":/etc/sushy:ro", "-e", "VBMCD_PASSWORD=image-pass-1", "localhost/bmlab/vbmcd:test",
		"--backend", "sim", "--sim-systems", "/etc/sushy/conf.py", "--sim-delay", "0", "--insecure-http", "--redfish-addr", addr, "--ipmi=false"); err != nil {
		t.Fatalf("podman run: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := pm("rm", "-f", "-t", "5", name); err != nil {
			t.Errorf("podman rm: %v\n%s", err, out)
		}
	})
	url := "http://" + addr
	if !testenv.WaitFor(30*time.Second, func() bool {
		r, err := send("GET", url+"/redfish/v1/Systems/fake1", "admin", "image-pass-1", "")
		return err == nil && r.Code == 200
	}) {
		logs, _ := pm("logs", name)
		t.Fatalf("the container's vbmcd does not answer on %s; its log:\n%s", addr, logs)
	}
	const id = "27946b59-9e44-4fa7-8e91-f3527a1ef094"
	sushy(t, url, "admin", "image-pass-1", id, "boot", "Pxe", "Once", "UEFI")
	if st := sushy(t, url, "admin", "image-pass-1", id, "reset", "On"); st.Power != "On" && st.Power != "PoweringOn" {
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
