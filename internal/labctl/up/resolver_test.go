package up_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/testenv"
)

// TestHostResolverDnsmasq: with network.hostResolver: dnsmasq, the network
// step writes the lab's drop-in, and a real dnsmasq reading that directory
// as NetworkManager's dnsmasq plugin does (--conf-dir) answers every name
// of the cluster, *.apps included, by forwarding the cluster's domain to
// the lab's NAT network (libvirt's dnsmasq), and nothing else; net check
// reports the drop-in changed, net repair writes it back, down removes it.
// Everything runs in labci: the lab's network, libvirt's dnsmasq and the
// "host" dnsmasq on 127.0.24.53.
func TestHostResolverDnsmasq(t *testing.T) {
	testenv.Libvirt(t)
	dnsmasq := testenv.Command(t, "dnsmasq")
	dir := testenv.QemuDir(t)
	cfg, _ := hybridLab(t, dir, "hres", "10.198.72")
	dropDir := filepath.Join(dir, "dnsmasq.d")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, append(b, []byte("network:\n  hostResolver: dnsmasq\n  hostResolverDir: "+dropDir+"\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	common := []string{"--mode", "hybrid", "--profile", "tiny", "-f", cfg, "--netns", "labci"}
	out := labUp(t, "network", common...)
	dropIn := filepath.Join(dropDir, "bmlab-hres.conf")
	want := "# bmlab lab hres: the names of cluster hres.lab.invalid for this host. labctl writes this\n" +
		"# file (`labctl up`, `labctl net repair`) and removes it (`labctl down`).\n" +
		"server=/hres.lab.invalid/10.198.72.1\n"
	if got := readFile(t, dropIn); got != want {
		t.Fatalf("drop-in:\n%s\nwant:\n%s", got, want)
	}
	if !strings.Contains(out, "host resolver: wrote "+dropIn) {
		t.Errorf("up does not say it wrote the drop-in:\n%s", out)
	}

	// The host's dnsmasq, as NetworkManager's plugin runs it: its
	// configuration directory, no upstream of its own (--no-resolv), so
	// any name outside the drop-in's domain goes nowhere.
	var log testenv.Buffer
	cmd := exec.Command("ip", "netns", "exec", "labci", dnsmasq, "--keep-in-foreground", "--conf-dir="+dropDir,
		"--no-resolv", "--no-hosts", "--bind-interfaces", "--listen-address=127.0.24.53", "--pid-file=", "--log-queries", "--log-facility=-")
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if !testenv.WaitFor(20*time.Second, func() bool { _, err := lookupIn("labci", "127.0.24.53", "api.hres.lab.invalid"); return err == nil }) {
		t.Fatalf("the host's dnsmasq never answered api.hres.lab.invalid:\n%s", log.String())
	}
	resolveIn(t, "labci", "127.0.24.53", map[string]string{
		"api.hres.lab.invalid": "10.198.72.5", "api-int.hres.lab.invalid": "10.198.72.5",
		"console-openshift-console.apps.hres.lab.invalid": "10.198.72.4",
		"any-route-at-all.apps.hres.lab.invalid":          "10.198.72.4",
		"hres-master-0.hres.lab.invalid":                  "10.198.72.21",
	})
	if addrs, err := lookupIn("labci", "127.0.24.53", "api.other.invalid"); err == nil {
		t.Errorf("a name outside the cluster's domain resolved: %v", addrs)
	}
	if !strings.Contains(log.String(), "forwarded any-route-at-all.apps.hres.lab.invalid to 10.198.72.1") {
		t.Errorf("the host's dnsmasq did not forward *.apps to the lab network's DNS:\n%s", log.String())
	}

	// Drift: net check reports it, net repair writes it back.
	if err := os.WriteFile(dropIn, []byte(want+"server=/hres.lab.invalid/10.198.72.99\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = labctlRun(t, append([]string{"net", "check"}, common...)...)
	if err == nil || !strings.Contains(out, dropIn) || !strings.Contains(out, "changed") {
		t.Errorf("net check with the drop-in changed = %v, want it reported:\n%s", err, out)
	}
	if out, err := labctlRun(t, append([]string{"net", "repair"}, common...)...); err != nil {
		t.Errorf("net repair: %v\n%s", err, out)
	}
	if got := readFile(t, dropIn); got != want {
		t.Errorf("after repair:\n%s", got)
	}
	if out, err := labctlRun(t, append([]string{"net", "check"}, common...)...); err != nil {
		t.Errorf("net check after repair: %v\n%s", err, out)
	}

	if out, err := labctlRun(t, append([]string{"down"}, common...)...); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	if _, err := os.Stat(dropIn); err == nil {
		t.Error("down left the drop-in")
	}
}
