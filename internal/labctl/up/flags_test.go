package up_test

import (
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
