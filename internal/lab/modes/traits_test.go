package modes

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/labconfig"
	"github.com/bmlab/bmlab/internal/plan"
	"github.com/bmlab/bmlab/internal/plan/plantest"
	"github.com/bmlab/bmlab/internal/testenv"
)

// TestTraitsFixture: the modes' names and traits that the plan's and the
// shared steps' tests resolve with (internal/plan/plantest/modes.json) are
// the modes' own declarations (-update rewrites the file).
func TestTraitsFixture(t *testing.T) {
	got, err := json.MarshalIndent(All.Specs(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	const file = "../../plan/plantest/modes.json"
	if *testenv.Update {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return // the embedded copy is the one this binary was built with
	}
	if d := cmp.Diff(string(plantest.JSON), string(got)); d != "" {
		t.Errorf("%s is not the modes' traits (-file +modes; go test ./internal/lab/modes -run TestTraitsFixture -update rewrites it):\n%s", file, d)
	}
}

// TestAFourthModeResolves: a mode that declares its traits resolves with
// no edit to the plan: the plan reads the traits, not the mode's name. A
// fourth mode with BMCs that installs a single node plans vbmcd and each
// node's BMC, no provisioning NIC, no agent or hybrid section; without
// the single-node trait the same lab is refused, naming the modes that
// install one.
func TestAFourthModeResolves(t *testing.T) {
	resolve := func(tr plan.Traits) (*plan.Plan, error) {
		cfg, err := labconfig.Parse([]byte("name: four\nnetwork: {provisioningNetwork: Managed}\ncluster: {masters: {count: 1}, workers: {count: 0}}\n"))
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.ApplyProfile(labconfig.ProfileTiny); err != nil {
			t.Fatal(err)
		}
		all := append(slices.Clone(All), lab.Mode{Name: "four", Traits: tr})
		return plan.Resolve(cfg, plan.Options{Dir: "/labs/four", Mode: "four", Modes: all.Specs(), Vbmcd: "/bin/vbmcd"})
	}
	p, err := resolve(plan.Traits{BMCs: true, SingleNode: true})
	if err != nil {
		t.Fatalf("a fourth mode with BMCs and a single node: %v", err)
	}
	if p.Mode != "four" || len(p.Nodes) != 1 || p.Nodes[0].BMC.Address == "" || !p.Vbmcd.Serves() || p.Agent != nil || p.Hybrid != nil || p.Network.LLDP != nil {
		t.Errorf("the fourth mode's plan: mode %s, %d nodes, BMC %q, vbmcd %v, agent %v, hybrid %v, lldp %v", p.Mode, len(p.Nodes), p.Nodes[0].BMC.Address, p.Vbmcd.Serves(), p.Agent, p.Hybrid, p.Network.LLDP)
	}
	for _, n := range p.Nodes[0].NICs {
		if n.Provisioning {
			t.Errorf("the fourth mode has no provisioning trait, yet %s has a provisioning NIC", p.Nodes[0].Name)
		}
	}
	_, err = resolve(plan.Traits{BMCs: true})
	if want := "cluster.masters.count: 1 (a single-node cluster) is installed by --mode agent (or hybrid); four needs 3 masters"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a fourth mode without the single-node trait: %v, want %q", err, want)
	}
}
