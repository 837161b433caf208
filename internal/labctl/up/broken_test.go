package up_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/bmlab/bmlab/internal/testenv"
)

// hostObjects lists what a broken lab could have made on the real host:
// libvirt domains, networks and pools, and the links of libvirtd's
// namespace, each as "kind name", keeping only the names the broken labs
// would use (lab brk, its bridges and veths) so that other labs of other
// tests do not count.
func hostObjects(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, q := range []struct{ kind, cmd string }{
		{"domain", "virsh -q list --all --name"},
		{"network", "virsh -q net-list --all --name"},
		{"pool", "virsh -q pool-list --all --name"},
		{"link", "ip -n labci -o link show"},
	} {
		b, err := exec.Command("sh", "-c", q.cmd).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", q.cmd, err, b)
		}
		for _, line := range strings.Split(string(b), "\n") {
			name := strings.TrimSpace(line)
			if q.kind == "link" {
				f := strings.Fields(line)
				if len(f) < 2 {
					continue
				}
				name, _, _ = strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			}
			if strings.Contains(name, "brk") || slices.Contains([]string{"baremetal", "provisioning", "bmlab-veth0", "bmlab-veth1"}, name) {
				out = append(out, q.kind+" "+name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestBrokenLabsCreateNothing runs `labctl up` with each broken lab file
// on the real host (libvirtd in labci): each is refused with the lab
// file's field named, and the host's objects are the same before and
// after. The valid control really builds its network (the comparison can
// see it), and is taken down again.
func TestBrokenLabsCreateNothing(t *testing.T) {
	testenv.Libvirt(t)
	vbmcd := testenv.Binary(t, "vbmcd")
	for _, l := range testenv.BrokenLabs(t) {
		t.Run(l.Name, func(t *testing.T) {
			dir := testenv.QemuDir(t)
			cfg := l.Write(t, dir)
			common := []string{"-f", cfg, "--netns", "labci", "--mode", l.Mode, "--profile", "tiny", "--vbmcd", vbmcd}
			before := hostObjects(t)
			if l.Want == "" {
				t.Cleanup(func() {
					if out, err := labctlRun(t, append([]string{"down"}, common...)...); err != nil {
						t.Errorf("down: %v\n%s", err, out)
					}
				})
			}
			out, err := labctlRun(t, append([]string{"up", "--until", "network"}, common...)...)
			after := hostObjects(t)
			if l.Want == "" {
				if err != nil {
					t.Fatalf("the valid control was refused: %v\n%s", err, out)
				}
				if slices.Equal(before, after) {
					t.Fatalf("the valid control's network made no object the test sees (%v): the comparison could not tell", after)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), l.Want) {
				t.Fatalf("up = %v\nwant an error containing %q", err, l.Want)
			}
			if !slices.Equal(before, after) {
				t.Errorf("objects changed though up was refused:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}
