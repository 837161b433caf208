package steps

import (
	"path/filepath"
	"testing"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/lab/labtest"
	"github.com/bmlab/bmlab/internal/labconfig"
	"github.com/bmlab/bmlab/internal/plan"
	"github.com/bmlab/bmlab/internal/plan/plantest"
	"github.com/bmlab/bmlab/internal/testenv"
)

// TestGraphDOT pins the drawing of the fake host's lab: in sync, then with
// a veth missing and a domain absent, and a lab with a BMC network (its
// bridge, vbmcd on it, each node's BMC address), and one with a Managed
// provisioning network (each node's two NICs, the provisioning bridge's
// addresses) (testdata/graph-*.dot; -update).
func TestGraphDOT(t *testing.T) {
	e, _ := labtest.Env(t, labtest.NewHost(), "")
	power := map[string]string{}
	for i, n := range e.Plan.Nodes {
		power[n.Name] = []string{"On", "Off"}[i%2]
	}
	drifted := map[string]string{}
	for k, v := range power {
		drifted[k] = v
	}
	drifted[e.Plan.Nodes[0].Name] = "absent"
	// A lab whose BMCs are on a network of their own.
	cfg, err := labconfig.Parse([]byte("name: fk\ncluster: {bmc: {network: 192.168.125.0/24}}\n"))
	labtest.Must(t, err)
	labtest.Must(t, cfg.ApplyProfile("tiny"))
	oob, err := plan.Resolve(cfg, plan.Options{Modes: plantest.Modes(), Dir: "/labs/fk", Profile: "tiny", Vbmcd: "/bin/vbmcd"})
	labtest.Must(t, err)
	// A lab with a Managed provisioning network: two NICs a node.
	cfg, err = labconfig.Parse([]byte("name: fk\nnetwork: {provisioningNetwork: Managed}\ncluster: {workers: {count: 1}}\n"))
	labtest.Must(t, err)
	labtest.Must(t, cfg.ApplyProfile("tiny"))
	managed, err := plan.Resolve(cfg, plan.Options{Modes: plantest.Modes(), Dir: "/labs/fk", Profile: "tiny", Vbmcd: "/bin/vbmcd"})
	labtest.Must(t, err)
	for _, tt := range []struct {
		name  string
		p     *plan.Plan
		diffs []lab.Difference
		power map[string]string
	}{
		{"graph-in-sync", e.Plan, nil, power},
		{"graph-drift", e.Plan, []lab.Difference{{Object: "bmlab-veth0", Kind: "missing", Fix: "create it"}}, drifted},
		{"graph-bmc-network", oob, nil, power},
		{"graph-managed", managed, nil, power},
	} {
		got := GraphDOT(tt.p, tt.diffs, tt.power)
		golden := filepath.Join("testdata", tt.name+".dot")
		testenv.Golden(t, golden, []byte(got))
	}
}
