package up

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/bmlab/bmlab/internal/lab/labtest"
	"github.com/bmlab/bmlab/internal/labctl/cli"
)

// TestStatusShowsTheNICs: with a provisioning network, status's table has
// a NICS column (each node's NICs, the provisioning one first) and its
// BOOT MAC is the provisioning NIC's (install-config's bootMACAddress);
// a lab whose nodes have one NIC has no such column.
func TestStatusShowsTheNICs(t *testing.T) {
	for _, tt := range []struct {
		name, lab string
		nics      bool
	}{
		{"managed", "name: fk\nnetwork: {provisioningNetwork: Managed}\ncluster: {sshKey: id.pub, workers: {count: 0}}\n", true},
		{"disabled", "name: fk\ncluster: {sshKey: id.pub, workers: {count: 0}}\n", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := labtest.EnvFor(t, labtest.NewHost(), "", tt.lab)
			var out bytes.Buffer
			if err := table(context.Background(), &cli.Globals{Streams: cli.Streams{Out: &out}}, e); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			head := strings.Fields(lines[0]) // BOOT MAC is two words
			if got := strings.Contains(lines[0], "NICS"); got != tt.nics {
				t.Fatalf("NICS column %v, want %v:\n%s", got, tt.nics, out.String())
			}
			for i, n := range e.Plan.Nodes {
				cols := strings.Fields(lines[i+1])
				if cols[3] != n.BootMAC {
					t.Errorf("%s: BOOT MAC %s, want %s:\n%s", n.Name, cols[3], n.BootMAC, out.String())
				}
				if !tt.nics {
					continue
				}
				want := "enp1s0=provisioning,enp2s0=baremetal"
				if len(head) != len(cols)+1 || cols[4] != want || n.BootMAC != n.NICs[0].MAC {
					t.Errorf("%s: NICS %q, want %q:\n%s", n.Name, cols[4], want, out.String())
				}
			}
		})
	}
}
