package labctl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/labctl"
	"github.com/bmlab/bmlab/internal/netplumb/netnstest"
	"github.com/bmlab/bmlab/internal/testenv"
)

// run runs labctl as main would and returns its stdout and error.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := labctl.Run(context.Background(), zap.NewNop(), labctl.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, args)
	if errOut.Len() > 0 {
		t.Errorf("labctl %s wrote to stderr (errors are for the caller to print):\n%s", strings.Join(args, " "), errOut.String())
	}
	return out.String(), err
}

// labFile writes a lab configuration whose NetworkManager directory exists
// (so NetworkManager counts as present) and returns its path and conf.d.
func labFile(t *testing.T, yaml string) (path, confDir string) {
	t.Helper()
	dir := t.TempDir()
	confDir = filepath.Join(dir, "NetworkManager", "conf.d")
	if err := os.MkdirAll(filepath.Dir(confDir), 0o755); err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, "lab.yaml")
	yaml += "\n  networkManagerConfDir: " + confDir + "\n"
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, confDir
}

type checkJSON struct {
	Lab         string `json:"lab"`
	InSync      bool   `json:"inSync"`
	Differences []struct {
		Object, Kind string
	} `json:"differences"`
}

func TestNetCheckRepairDown(t *testing.T) {
	ns, h := netnstest.New(t)
	netnstest.Bridge(t, h, "lvbr0")
	// A libvirt bridge of its own: without --no-libvirt the lab would bring
	// its own NAT network, which these links-only tests leave out.
	cfg, confDir := labFile(t, "name: clitest\nnetwork:\n  libvirtBridge: lvbr0")
	base := []string{"net", "--netns", ns, "--no-libvirt", "-f", cfg}
	cmd := func(sub string, extra ...string) []string {
		return append(append([]string{"net", sub}, base[1:]...), extra...)
	}

	out, err := run(t, cmd("check")...)
	if err == nil || !strings.Contains(err.Error(), "4 difference(s); run `labctl net repair`") {
		t.Fatalf("check on an empty namespace = %v, want 4 differences", err)
	}
	for _, want := range []string{"baremetal    missing", "bmlab-veth0  missing", "bmlab-veth1  missing", "NetworkManager  unmanaged-missing"} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("check table lacks %q:\n%s", want, out)
		}
	}

	out, err = run(t, cmd("repair")...)
	if err != nil {
		t.Fatalf("repair: %v\n%s", err, out)
	}
	if !strings.Contains(out, "OBJECT") || !strings.Contains(out, "✓ create bmlab-veth0 bmlab-veth1") ||
		!strings.Contains(out, "NetworkManager found: wrote "+confDir) {
		t.Errorf("repair did not print the plan, then the steps and the snippet:\n%s", out)
	}
	snippet, err := os.ReadFile(filepath.Join(confDir, "90-bmlab-clitest.conf"))
	if err != nil || !strings.Contains(string(snippet), "interface-name:baremetal;interface-name:bmlab-veth0;interface-name:bmlab-veth1") {
		t.Errorf("snippet: %v\n%s", err, snippet)
	}

	out, err = run(t, cmd("check", "-o", "json")...)
	if err != nil {
		t.Fatalf("check after repair: %v\n%s", err, out)
	}
	var rep checkJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil || !rep.InSync || rep.Lab != "clitest" || len(rep.Differences) != 0 {
		t.Errorf("check -o json after repair = %+v, %v:\n%s", rep, err, out)
	}

	// Break it from outside, as a user's tools would.
	ip := testenv.Command(t, "ip")
	if o, err := exec.Command(ip, "-n", ns, "link", "set", "baremetal", "down").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, o)
	}
	out, err = run(t, cmd("check", "-o", "json")...)
	if err == nil {
		t.Fatal("check with baremetal down succeeded")
	}
	rep = checkJSON{}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("check -o json: %v\n%s", err, out)
	}
	if d := cmp.Diff(checkJSON{Lab: "clitest", Differences: []struct{ Object, Kind string }{{"baremetal", "down"}}}, rep); d != "" {
		t.Errorf("check -o json (-want +got):\n%s", d)
	}
	out, err = run(t, cmd("repair")...)
	if err != nil || !strings.Contains(out, "✓ set-up baremetal") || strings.Contains(out, "✓ create") {
		t.Errorf("repair of a down bridge = %v:\n%s", err, out)
	}

	out, err = run(t, cmd("down")...)
	if err != nil {
		t.Fatalf("down: %v", err)
	}
	for _, want := range []string{"deleted link bmlab-veth1", "deleted link baremetal", "removed " + confDir} {
		if !strings.Contains(out, want) {
			t.Errorf("down output lacks %q:\n%s", want, out)
		}
	}
	if _, err := h.LinkByName("lvbr0"); err != nil {
		t.Errorf("down removed libvirt's bridge: %v", err)
	}
	if out, err := run(t, cmd("down")...); err != nil || !strings.Contains(out, "nothing of lab \"clitest\" to remove") {
		t.Errorf("second down = %v:\n%s", err, out)
	}
}

func TestNetRepairStopsOnForeignLink(t *testing.T) {
	ns, h := netnstest.New(t)
	netnstest.Bridge(t, h, "lvbr0")
	netnstest.Bridge(t, h, "baremetal") // someone else's
	cfg, _ := labFile(t, "network:\n  libvirtBridge: lvbr0")
	out, err := run(t, "net", "repair", "--netns", ns, "--no-libvirt", "-f", cfg)
	if err == nil || !strings.Contains(err.Error(), "nothing changed: 1 of them the lab must not repair itself") {
		t.Fatalf("repair with a foreign baremetal = %v", err)
	}
	if !strings.Contains(out, "foreign (blocking)") || !strings.Contains(out, "ip link del baremetal") {
		t.Errorf("repair output does not say what is foreign and how to clear it:\n%s", out)
	}
	if _, err := h.LinkByName("bmlab-veth0"); err == nil {
		t.Error("repair created links although it was blocked")
	}
}

func TestNetUsageErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "lab.yaml")
	if err := os.WriteFile(bad, []byte("network:\n  bridgez: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"net", "check", "-o", "yaml"}, `--output "yaml": use table or json`},
		{[]string{"net", "check", "-f", bad}, bad + `: network.bridgez (line 2): unknown key; did you mean "bridges"?`},
		{[]string{"net", "check", "-f", filepath.Join(dir, "none.yaml")}, "no such file"},
		{[]string{"net", "check", "extra"}, `unknown command "extra"`},
		{[]string{"net", "frobnicate"}, `unknown command "frobnicate"`},
	}
	for _, tt := range tests {
		_, err := run(t, tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("labctl %s = %v, want an error containing %q", strings.Join(tt.args, " "), err, tt.want)
		}
	}
}

// TestNetWithLibvirt runs repair, check and down against the libvirtd in
// labci with a lab whose bridge lives there; the libvirt network named like
// the bridge comes and goes with it.
func TestNetWithLibvirt(t *testing.T) {
	testenv.Libvirt(t)
	suffix := netnstest.Rand(3)
	br := "np-bm-" + suffix
	cfg, _ := labFile(t, "name: np-"+suffix+"\nnetwork:\n  bridges: [{name: "+br+"}]\n  veths: []")
	// The lab's LLDP sender is vbmcd's (`vbmcd lldp`): repair starts it.
	vbmcd := testenv.Binary(t, "vbmcd")
	args := func(sub string) []string { return []string{"net", sub, "--netns", "labci", "--vbmcd", vbmcd, "-f", cfg} }
	t.Cleanup(func() { _, _ = run(t, args("down")...) })

	if _, err := run(t, args("check")...); err == nil {
		t.Fatal("check before repair found nothing to do")
	}
	out, err := run(t, args("repair")...)
	if err != nil || !strings.Contains(out, "✓ libvirt network "+br+": defined, active") {
		t.Fatalf("repair = %v:\n%s", err, out)
	}
	if out, err := run(t, args("check")...); err != nil {
		t.Fatalf("check after repair = %v:\n%s", err, out)
	}
	out, err = run(t, args("down")...)
	if err != nil || !strings.Contains(out, "deleted libvirt network "+br) || !strings.Contains(out, "deleted link "+br) {
		t.Fatalf("down = %v:\n%s", err, out)
	}
}
