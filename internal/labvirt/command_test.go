package labvirt

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/plan/plantest"
	"github.com/bmlab/bmlab/internal/testenv"
)

// commands are a lab's processes' arguments as this provider starts them
// (nil: the lab runs none).
type commands struct {
	Vbmcd []string `json:"vbmcd"`
	LLDP  []string `json:"lldp"`
	DHCP  []string `json:"dhcp,omitempty"`
}

// TestCommands pins vbmcd's, the LLDP sender's and the provisioning DHCP
// server's arguments for every lab whose plan internal/plan pins
// (plantest/labs.json), built here from the plan's facts:
// testdata/commands.json. It was written from the golden plans' vbmcd.args,
// network.lldp.args and network.provisioningDHCP.args as they stood before
// the plan held facts instead of arguments, so each runs as it ran. No
// argument carries the BMC password.
func TestCommands(t *testing.T) {
	got := map[string]commands{}
	for _, l := range plantest.Labs() {
		p, err := plantest.Resolve(l)
		if err != nil {
			t.Fatal(err)
		}
		var c commands
		if p.Vbmcd.Serves() {
			c.Vbmcd = vbmcdProcess(p.Vbmcd).Args
			if p.BMC.Password == "" || strings.Contains(strings.Join(c.Vbmcd, " "), p.BMC.Password) {
				t.Errorf("%s: the BMC password %q is empty or on vbmcd's command line", l.Name, p.BMC.Password)
			}
		}
		if p.Network.LLDP != nil {
			c.LLDP = senderProcess(*p.Network.LLDP).Args
		}
		if p.Network.ProvisioningDHCP != nil {
			c.DHCP = dhcpProcess(*p.Network.ProvisioningDHCP).Args
		}
		got[l.Name] = c
	}
	path := filepath.Join("testdata", "commands.json")
	if *testenv.Update {
		b, err := json.MarshalIndent(got, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]commands
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("the labs' commands differ from %s (-want +got; -update rewrites it):\n%s", path, d)
	}
}
