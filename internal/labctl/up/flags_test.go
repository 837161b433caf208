package up_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUpFlagsCheckedFirst: a mistyped step or mode is refused from the
// flags alone, before any host is reached (this test has no libvirt URI
// that answers).
func TestUpFlagsCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	none := []string{"--libvirt-uri", "qemu+tcp://127.0.0.1:1/system", "--dir", dir}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"up", "--until", "nodez"}, `--until "nodez": not a step; the steps are preflight, hosts, network, storage, nodes, bmcs, install-config, installer`},
		{[]string{"up", "--mode", "hybrid", "--until", "nodes"}, `cluster.image: the hybrid mode boots its nodes from an RHCOS qcow2`},
		{[]string{"up", "--mode", "agentx"}, `--mode "agentx": use ipi-baremetal, hybrid, agent`},
	} {
		out, err := labctlRun(t, append(tt.args, none...)...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("labctl %s = %v\n%s\nwant an error containing %q", strings.Join(tt.args, " "), err, out, tt.want)
		}
	}
}

// TestModeInTheLabFileCheckedFirst: a mode the lab file names that labctl
// does not have is refused from the file alone, with the field named,
// before any host is reached.
func TestModeInTheLabFileCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "lab.yaml")
	if err := os.WriteFile(cfg, []byte("name: mf\nmode: agentx\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := labctlRun(t, "up", "-f", cfg, "--libvirt-uri", "qemu+tcp://127.0.0.1:1/system")
	if want := `mode: "agentx" in the lab file: use ipi-baremetal, hybrid, agent`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("up with mode: agentx = %v\n%s\nwant an error containing %q", err, out, want)
	}
}
