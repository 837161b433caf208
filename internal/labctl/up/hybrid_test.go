package up_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/installertest"
	"github.com/bmlab/bmlab/internal/plan"
	"github.com/bmlab/bmlab/internal/testenv"
)

// hybridLab writes a hybrid lab of one master and one worker (plus the
// bootstrap) whose "RHCOS image" is the disk marker as qcow2, with the
// fixture openshift-install and a hosts file of its own.
func hybridLab(t *testing.T, dir, name, net string) (cfg string, hosts string) {
	t.Helper()
	labFile(t, dir, name, 18720) // keys and pull secret
	img := filepath.Join(dir, "rhcos.qcow2")
	if out, err := exec.Command(testenv.Command(t, "qemu-img"), "convert", "-O", "qcow2", testenv.MarkerDisk(t), img).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img convert: %v\n%s", err, out)
	}
	hosts = filepath.Join(dir, "hosts")
	if err := os.WriteFile(hosts, []byte("127.0.0.1 localhost\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lab := fmt.Sprintf(`apiVersion: bmlab.dev/v1alpha1
kind: Lab
name: %s
cluster:
  clusterName: %s
  baseDomain: lab.invalid
  machineNetwork: %s.0/24
  dhcpRange: {start: %s.20, end: %s.60}
  apiVIP: %s.5
  ingressVIP: %s.4
  masters: {count: 1}
  workers: {count: 1}
  sshKey: id.pub
  image: rhcos.qcow2
  installer: %s
  hybrid: {hostsFile: %s}
`, name, name, net, net, net, net, net, installertest.Installer(t), hosts)
	cfg = filepath.Join(dir, "lab.yaml")
	if err := os.WriteFile(cfg, []byte(lab), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg, hosts
}

// TestHybridEndToEnd runs the hybrid flow with the fixture installer on
// real libvirt: a failing bootstrap-complete keeps everything and says how
// to gather logs; up again resumes, removes the bootstrap (domain, disk,
// ignition, nothing else), starts the workers and finishes; the nodes boot
// their thin clones with the ignition on fw_cfg; down leaves nothing.
func TestHybridEndToEnd(t *testing.T) {
	testenv.Libvirt(t)
	dir := testenv.QemuDir(t)
	cfg, hosts := hybridLab(t, dir, "hyb", "10.198.66")
	common := []string{"--mode", "hybrid", "--profile", "tiny", "-f", cfg, "--netns", "labci"}
	t.Cleanup(func() { _, _ = labctlRun(t, append([]string{"down"}, common...)...) })
	installDir := filepath.Join(dir, "install")

	t.Setenv(installertest.EnvBootstrapExit, "5")
	start := time.Now()
	out, err := labctlRun(t, append([]string{"up"}, common...)...)
	if err == nil {
		t.Fatal("up with a failing bootstrap-complete succeeded")
	}
	t.Logf("up to the failing wait took %s", time.Since(start))
	for _, want := range []string{"the bootstrap did not complete; everything is kept",
		"Logs: " + filepath.Join(installDir, ".openshift_install.log") + " (the installer's), " + filepath.Join(installDir, "openshift-install.out") + " (what it printed, every run)",
		"openshift-install gather bootstrap --dir " + installDir + " --bootstrap 10.198.66.20 --master 10.198.66.21"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	for _, want := range []string{"✓ install-config", "✓ network", "✓ storage", "✓ manifests", "✓ ignition", "✓ control-plane", "✗ bootstrap-complete"} {
		if !strings.Contains(out, want) {
			t.Errorf("up output lacks %q", want)
		}
	}
	if n := slices.Index(installertest.Calls(installDir), "wait-for bootstrap-complete"); n < 0 || strings.Count(strings.Join(installertest.Calls(installDir), "\n"), "wait-for bootstrap-complete") != 3 {
		t.Errorf("installer calls %v, want 3 bootstrap-complete attempts", installertest.Calls(installDir))
	}
	for _, d := range []string{"hyb-bootstrap", "hyb-master-0"} {
		if st := domState(t, d); st != "running" {
			t.Errorf("%s is %q after the failed wait, want running (kept)", d, st)
		}
	}
	if st := domState(t, "hyb-worker-0"); st != "" {
		t.Errorf("the worker exists (%q) before the bootstrap completed", st)
	}
	bootIgn := filepath.Join(dir, ".bmlab", "ignition", "hyb-bootstrap.ign")
	if _, err := os.Stat(bootIgn); err != nil {
		t.Errorf("the bootstrap's ignition is gone after a failure: %v", err)
	}
	// The nodes boot their clone of the image, with their ignition on fw_cfg.
	serial := filepath.Join(dir, ".bmlab", "logs", "hyb-master-0.serial.log")
	if !testenv.WaitFor(60*time.Second, func() bool { return testenv.Count(serial, testenv.DiskMarker) > 0 }) {
		t.Errorf("hyb-master-0 never printed %s on %s", testenv.DiskMarker, serial)
	}
	masterIgn := filepath.Join(dir, ".bmlab", "ignition", "hyb-master-0.ign")
	if cmdline := qemuCmdline(t, "hyb-master-0"); !strings.Contains(cmdline, "name=opt/com.coreos/config,file="+masterIgn) {
		t.Errorf("qemu of hyb-master-0 lacks the fw_cfg ignition:\n%s", cmdline)
	}
	var ign struct {
		Ignition struct{ Version string }
		Storage  struct{ Files []struct{ Path string } }
	}
	b, err := os.ReadFile(masterIgn)
	if err != nil || json.Unmarshal(b, &ign) != nil || ign.Ignition.Version == "" {
		t.Fatalf("master ignition: %v\n%s", err, b)
	}
	var paths []string
	for _, f := range ign.Storage.Files {
		paths = append(paths, f.Path)
	}
	for _, want := range []string{"/etc/hostname", "/etc/kubernetes/manifests/keepalived.yaml", "/etc/kubernetes/manifests/coredns.yaml"} {
		if !slices.Contains(paths, want) {
			t.Errorf("master ignition lacks %s: %v", want, paths)
		}
	}

	// Resume: bootstrap-complete now succeeds.
	t.Setenv(installertest.EnvBootstrapExit, "0")
	out, err = labctlRun(t, append([]string{"up"}, common...)...)
	if err != nil {
		t.Fatalf("up again: %v\n%s", err, out)
	}
	for _, want := range []string{"✓ install-config (no change)", "✓ manifests (no change)", "✓ ignition (no change)", "✓ bootstrap-complete", "✓ remove-bootstrap", "✓ workers", "✓ install-complete", filepath.Join(installDir, "auth", "kubeconfig")} {
		if !strings.Contains(out, want) {
			t.Errorf("resumed up lacks %q:\n%s", want, out)
		}
	}
	if st := domState(t, "hyb-bootstrap"); st != "" {
		t.Errorf("the bootstrap domain is still there (%s)", st)
	}
	if _, err := os.Stat(bootIgn); err == nil {
		t.Error("the bootstrap's ignition is still there")
	}
	if _, err := os.Stat(filepath.Join(dir, ".bmlab", "disks", "hyb-bootstrap.qcow2")); err == nil {
		t.Error("the bootstrap's disk is still there")
	}
	for _, d := range []string{"hyb-master-0", "hyb-worker-0"} {
		if st := domState(t, d); st != "running" {
			t.Errorf("%s is %q, want running", d, st)
		}
	}
	if _, err := os.Stat(masterIgn); err != nil {
		t.Errorf("removing the bootstrap took the master's ignition: %v", err)
	}
	h, _ := os.ReadFile(hosts)
	if !strings.Contains(string(h), "10.198.66.5 api.hyb.lab.invalid") || !strings.Contains(string(h), "10.198.66.4 console-openshift-console.apps.hyb.lab.invalid oauth-openshift.apps.hyb.lab.invalid") || !strings.HasPrefix(string(h), "127.0.0.1 localhost\n") {
		t.Errorf("hosts file:\n%s", h)
	}
	calls := strings.Join(installertest.Calls(installDir), "\n")
	if strings.Count(calls, "create manifests") != 1 || strings.Count(calls, "create ignition-configs") != 1 || strings.Count(calls, "wait-for install-complete") != 1 {
		t.Errorf("installer calls:\n%s", calls)
	}
	// Up once more: nothing to do.
	out, err = labctlRun(t, append([]string{"up"}, common...)...)
	if err != nil || strings.Count(out, "(no change)") != 11 {
		t.Errorf("third up = %v, want 11 unchanged steps:\n%s", err, out)
	}

	// A worker shut off on purpose stays off on the next up, which says
	// so; up --start-stopped starts it.
	if out, err := exec.Command("virsh", "destroy", "hyb-worker-0").CombinedOutput(); err != nil {
		t.Fatalf("virsh destroy: %v\n%s", err, out)
	}
	out, err = labctlRun(t, append([]string{"up"}, common...)...)
	if err != nil || !strings.Contains(out, "left hyb-worker-0 off: it was shut off after up started it") {
		t.Errorf("up with a worker shut off = %v, want it left off and said:\n%s", err, out)
	}
	if st := domState(t, "hyb-worker-0"); st != "shut off" {
		t.Errorf("hyb-worker-0 is %q after up, want shut off", st)
	}
	if out, err := labctlRun(t, append([]string{"up", "--start-stopped"}, common...)...); err != nil {
		t.Errorf("up --start-stopped: %v\n%s", err, out)
	}
	if st := domState(t, "hyb-worker-0"); st != "running" {
		t.Errorf("hyb-worker-0 is %q after up --start-stopped, want running", st)
	}

	out, err = labctlRun(t, append([]string{"down"}, common...)...)
	if err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	if left := leftovers(t, "hyb", "bmnat-hyb", "baremetal", "bmlab-veth0"); len(left) > 0 {
		t.Errorf("down left %v", left)
	}
	if h, _ := os.ReadFile(hosts); string(h) != "127.0.0.1 localhost\n" {
		t.Errorf("down left the hosts entries:\n%s", h)
	}
	if _, err := os.Stat(installDir); err == nil {
		t.Error("down left the installer's assets, which a later up would resume from")
	}
}

func domState(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("virsh", "domstate", name).CombinedOutput()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// qemuCmdline is the command line of the qemu running the domain.
func qemuCmdline(t *testing.T, name string) string {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 0 && strings.Contains(args[0], "qemu-system") && slices.Contains(args, "guest="+name+",debug-threads=on") {
			return strings.Join(args, " ")
		}
	}
	t.Fatalf("no qemu process for %s", name)
	return ""
}

// TestTwoHybridLabsOneNetwork: lab B joins lab A's network (its veth goes
// to A's NAT bridge). With A's VIPs and router IDs it is refused before
// anything is made, naming each; with its own it passes preflight.
func TestTwoHybridLabsOneNetwork(t *testing.T) {
	testenv.Libvirt(t)
	dirA, dirB := testenv.QemuDir(t), testenv.QemuDir(t)
	cfgA, _ := hybridLab(t, dirA, "hya", "10.198.68")
	commonA := []string{"--mode", "hybrid", "--profile", "tiny", "-f", cfgA, "--netns", "labci"}
	labUp(t, "control-plane", commonA...)
	cfgB, _ := hybridLab(t, dirB, "hyb2", "10.198.68")
	joinA := "network:\n  libvirtBridge: bmnat-hya\n  bridges: [{name: bm-hyb2}]\n  veths: [{name: hyb2-veth0, master: bm-hyb2, peer: hyb2-veth1, peerMaster: bmnat-hya}]\n"
	b, err := os.ReadFile(cfgB)
	if err != nil {
		t.Fatal(err)
	}
	// Same VIPs as A, and A's router IDs forced.
	apiID, ingID := plan.RouterIDs("hya")
	same := strings.Replace(string(b), "  hybrid: {", fmt.Sprintf("  hybrid: {apiRouterID: %d, ingressRouterID: %d, ", apiID, ingID), 1) + joinA
	if err := os.WriteFile(cfgB, []byte(same), 0o644); err != nil {
		t.Fatal(err)
	}
	commonB := []string{"--mode", "hybrid", "--profile", "tiny", "-f", cfgB, "--netns", "labci"}
	t.Cleanup(func() { _, _ = labctlRun(t, append([]string{"down"}, commonB...)...) })
	_, err = labctlRun(t, append([]string{"up", "--until", "preflight"}, commonB...)...)
	for _, want := range []string{
		`lab "hya" on the same network bmnat-hya holds apiVIP 10.198.68.5: give this lab another (cluster.apiVIP)`,
		`lab "hya" on the same network bmnat-hya holds ingressVIP 10.198.68.4: give this lab another (cluster.ingressVIP)`,
		fmt.Sprintf(`holds apiRouterID %d: give this lab another (cluster.hybrid.apiRouterID)`, apiID),
		fmt.Sprintf(`holds ingressRouterID %d: give this lab another (cluster.hybrid.ingressRouterID)`, ingID),
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("B with A's VIPs and IDs: %v\nwant %q", err, want)
		}
	}
	// Its own VIPs, and router IDs from its own name, but only joined to
	// A's bridge: A's network would give its nodes no reservation and no
	// api record (the broken join), so it stops.
	own := strings.NewReplacer("apiVIP: 10.198.68.5", "apiVIP: 10.198.68.7", "ingressVIP: 10.198.68.4", "ingressVIP: 10.198.68.6").Replace(string(b)) + joinA
	if err := os.WriteFile(cfgB, []byte(own), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := labctlRun(t, append([]string{"up", "--until", "preflight"}, commonB...)...); err == nil ||
		!strings.Contains(err.Error(), `network.shared: the lab joins bridge bmnat-hya of libvirt network "hya-machine", whose DHCP and DNS would know nothing of its nodes`) {
		t.Errorf("B only joined to A's bridge: %v; want the network.shared fix", err)
	}
	// Sharing A's network, with addresses of its own: B comes up, and A's
	// network reserves B's addresses and answers B's names.
	shared := strings.Replace(own, "dhcpRange: {start: 10.198.68.20, end: 10.198.68.60}", "dhcpRange: {start: 10.198.68.100, end: 10.198.68.120}", 1) + "  shared: hya-machine\n"
	if err := os.WriteFile(cfgB, []byte(shared), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := labctlRun(t, append([]string{"up", "--until", "control-plane"}, commonB...)...); err != nil {
		t.Fatalf("B sharing A's network: %v\n%s", err, out)
	}
	bNames := map[string]string{"api-int.hyb2.lab.invalid": "10.198.68.7", "api.hyb2.lab.invalid": "10.198.68.7",
		"hyb2-master-0.hyb2.lab.invalid": "10.198.68.101", "console-openshift-console.apps.hyb2.lab.invalid": "10.198.68.6",
		"hya-master-0.hya.lab.invalid": "10.198.68.21"}
	resolveIn(t, "labci", "10.198.68.1", bNames)
	if hf := readFile(t, "/var/lib/libvirt/dnsmasq/hya-machine.hostsfile"); !strings.Contains(hf, ",10.198.68.101,hyb2-master-0") {
		t.Errorf("A's network lacks B's reservation:\n%s", hf)
	}
	if out, err := labctlRun(t, append([]string{"net", "check"}, commonA...)...); err != nil {
		t.Errorf("A's net check with B on its network: %v\n%s", err, out)
	}
	// A cannot take its network from under B; B's down leaves A whole.
	if out, err := labctlRun(t, append([]string{"net", "down"}, commonA...)...); err == nil || !strings.Contains(out+err.Error(), "carries the entries of labs hyb2") {
		t.Errorf("A's net down with B on its network: %v\n%s", err, out)
	}
	if out, err := labctlRun(t, append([]string{"down"}, commonB...)...); err != nil {
		t.Fatalf("down B: %v\n%s", err, out)
	}
	if out, err := labctlRun(t, append([]string{"net", "repair"}, commonA...)...); err != nil {
		t.Errorf("A's net repair after B left: %v\n%s", err, out)
	}
	if out, err := labctlRun(t, append([]string{"net", "check"}, commonA...)...); err != nil {
		t.Errorf("A's net check after B left: %v\n%s", err, out)
	}
	delete(bNames, "hya-master-0.hya.lab.invalid")
	for name := range bNames {
		if addrs, err := lookupIn("labci", "10.198.68.1", name); err == nil {
			t.Errorf("%s still resolves after B's down: %v", name, addrs)
		}
	}
	resolveIn(t, "labci", "10.198.68.1", map[string]string{"api-int.hya.lab.invalid": "10.198.68.5", "hya-master-0.hya.lab.invalid": "10.198.68.21"})
	if a, b := plan.RouterIDs("hya"); a == apiID && b == ingID {
		bAPI, bIng := plan.RouterIDs("hyb2")
		if bAPI == a || bAPI == b || bIng == a || bIng == b {
			t.Errorf("the two cluster names draw overlapping router IDs: %d,%d and %d,%d", a, b, bAPI, bIng)
		}
	}
}
