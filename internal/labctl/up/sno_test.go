package up_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/installertest"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/upi"
)

// TestHybridSingleNode brings up a hybrid lab of one master on real
// libvirt: bootstrap in place as kcli's sno. One domain and no bootstrap;
// the install-config asks for the bootstrap in place; the node's ISO is
// the live ISO with the merged bootstrap-in-place config embedded; the
// node boots it from its CD drive behind its blank disk (the live ISO's
// marker on the serial console), the fixture installs onto the disk and
// the node boots that; the lab network's DNS gives api, api-int and
// *.apps the node's address; down leaves nothing.
func TestHybridSingleNode(t *testing.T) {
	testenv.Libvirt(t)
	dir := testenv.QemuDir(t)
	labFile(t, dir, "hsno", 18730) // keys and pull secret
	live := filepath.Join(dir, "rhcos-live.iso")
	installertest.LiveISO(t, live)
	hosts := filepath.Join(dir, "hosts")
	if err := os.WriteFile(hosts, []byte("127.0.0.1 localhost\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "lab.yaml")
	lab := fmt.Sprintf(`apiVersion: bmlab.dev/v1alpha1
kind: Lab
name: hsno
cluster:
  baseDomain: lab.invalid
  machineNetwork: 10.198.71.0/24
  dhcpRange: {start: 10.198.71.20, end: 10.198.71.60}
  apiVIP: 10.198.71.5
  ingressVIP: 10.198.71.4
  masters: {count: 1}
  sshKey: id.pub
  image: rhcos-live.iso
  installer: %s
  hybrid: {hostsFile: %s}
`, installertest.Installer(t), hosts)
	if err := os.WriteFile(cfg, []byte(lab), 0o644); err != nil {
		t.Fatal(err)
	}
	common := []string{"--mode", "hybrid", "--profile", "tiny", "-f", cfg, "--netns", "labci"}
	t.Cleanup(func() { _, _ = labctlRun(t, append([]string{"down"}, common...)...) })
	serial := filepath.Join(dir, ".bmlab", "logs", "hsno-master-0.serial.log")
	nodes, _ := json.Marshal([]installertest.AgentNode{{Domain: "hsno-master-0", Serial: serial, Image: testenv.MarkerDisk(t)}})
	t.Setenv(installertest.EnvLiveNodes, string(nodes))
	installDir := filepath.Join(dir, "install")

	start := time.Now()
	out, err := labctlRun(t, append([]string{"up"}, common...)...)
	if err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	t.Logf("up took %s", time.Since(start))
	for _, want := range []string{"✓ install-config", "✓ network", "✓ storage", "✓ ignition", "✓ node", "✓ install-complete"} {
		if !strings.Contains(out, want) {
			t.Errorf("up output lacks %q", want)
		}
	}
	for _, not := range []string{"manifests", "control-plane", "bootstrap-complete", "remove-bootstrap", "workers"} {
		if strings.Contains(out, not) {
			t.Errorf("up output has the multi-node step %q", not)
		}
	}
	if calls := strings.Join(installertest.Calls(installDir), ","); calls != "create single-node-ignition-config,wait-for install-complete" {
		t.Errorf("installer calls %q, want create single-node-ignition-config then wait-for install-complete", calls)
	}
	if ic := readFile(t, filepath.Join(dir, ".bmlab", "install-config.yaml")); !strings.Contains(ic, "bootstrapInPlace:\n  installationDisk: /dev/vda\n") || !strings.Contains(ic, "replicas: 1") {
		t.Errorf("install-config lacks the bootstrap in place:\n%s", ic)
	}
	// One domain, no bootstrap.
	doms, err := exec.Command("virsh", "list", "--all", "--name").Output()
	if err != nil {
		t.Fatal(err)
	}
	var ours []string
	for _, d := range strings.Fields(string(doms)) {
		if strings.HasPrefix(d, "hsno-") {
			ours = append(ours, d)
		}
	}
	if strings.Join(ours, ",") != "hsno-master-0" {
		t.Errorf("the lab's domains are %v, want only hsno-master-0", ours)
	}
	// Its ISO: the live ISO with the merged bootstrap-in-place config.
	iso := filepath.Join(dir, ".bmlab", "ignition", "hsno-master-0.iso")
	ign, err := upi.EmbeddedIgnition(context.Background(), iso)
	if err != nil || ign == nil {
		t.Fatalf("the node's ISO embeds no ignition: %v", err)
	}
	var cfgIgn struct {
		Storage struct{ Files []struct{ Path string } }
		Systemd struct{ Units []struct{ Name string } }
	}
	if err := json.Unmarshal(ign, &cfgIgn); err != nil {
		t.Fatalf("embedded ignition: %v\n%s", err, ign)
	}
	paths := map[string]bool{}
	for _, f := range cfgIgn.Storage.Files {
		paths[f.Path] = true
	}
	for _, want := range []string{"/etc/hostname", installertest.InstallToDiskScript, "/usr/local/bin/bootkube.sh"} {
		if !paths[want] {
			t.Errorf("embedded ignition lacks %s", want)
		}
	}
	for _, not := range []string{"/etc/kubernetes/manifests/keepalived.yaml", "/etc/kubernetes/manifests/coredns.yaml", "/etc/kubernetes/manifests/haproxy.yaml", upi.DispatcherPath} {
		if paths[not] {
			t.Errorf("a single node's ignition has %s", not)
		}
	}
	if merged := readFile(t, filepath.Join(dir, ".bmlab", "ignition", "hsno-master-0.ign")); merged != string(ign) {
		t.Error("the ISO's ignition is not the merged config kept beside it")
	}
	// The node booted the ISO (embedded ignition), then its installed disk.
	if !testenv.WaitFor(60*time.Second, func() bool { return testenv.Count(serial, testenv.DiskMarker) > 0 }) {
		t.Errorf("hsno-master-0 never booted its installed disk (%s on %s)", testenv.DiskMarker, serial)
	}
	log := readFile(t, serial)
	if i, j := strings.Index(log, installertest.LiveISOMarker+" ignition=embedded"), strings.Index(log, testenv.DiskMarker); i < 0 || j < i {
		t.Errorf("serial log: want the live ISO with its ignition, then the disk:\n%s", log)
	}
	xml, err := exec.Command("virsh", "dumpxml", "hsno-master-0").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(xml), "<source file='"+iso+"'") || strings.Contains(string(xml), "opt/com.coreos/config") {
		t.Errorf("domain XML: want the ISO in the CD drive and no fw_cfg ignition:\n%s", xml)
	}
	if st := domState(t, "hsno-master-0"); st != "running" {
		t.Errorf("hsno-master-0 is %q, want running", st)
	}
	// api, api-int and *.apps are the node's own address.
	resolveIn(t, "labci", "10.198.71.1", map[string]string{
		"api.hsno.lab.invalid": "10.198.71.20", "api-int.hsno.lab.invalid": "10.198.71.20",
		"console-openshift-console.apps.hsno.lab.invalid": "10.198.71.20", "hsno-master-0.hsno.lab.invalid": "10.198.71.20",
	})
	if h := readFile(t, hosts); !strings.Contains(h, "10.198.71.20 api.hsno.lab.invalid\n10.198.71.20 console-openshift-console.apps.hsno.lab.invalid oauth-openshift.apps.hsno.lab.invalid\n") {
		t.Errorf("hosts file:\n%s", h)
	}
	// Up again: nothing to do.
	out, err = labctlRun(t, append([]string{"up"}, common...)...)
	if err != nil || strings.Count(out, "(no change)") != 7 {
		t.Errorf("second up = %v, want 7 unchanged steps:\n%s", err, out)
	}

	out, err = labctlRun(t, append([]string{"down"}, common...)...)
	if err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	if left := leftovers(t, "hsno", "bmnat-hsno", "baremetal", "bmlab-veth0"); len(left) > 0 {
		t.Errorf("down left %v", left)
	}
	if h := readFile(t, hosts); h != "127.0.0.1 localhost\n" {
		t.Errorf("down left the hosts entries:\n%s", h)
	}
	for _, p := range []string{installDir, iso} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("down left %s", p)
		}
	}
}
