package steps

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/lab/labtest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestGraphDOT pins the drawing of the fake host's lab: in sync, then with
// a veth missing and a domain absent (testdata/graph-*.dot; -update).
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
	for _, tt := range []struct {
		name  string
		diffs []lab.Difference
		power map[string]string
	}{
		{"graph-in-sync", nil, power},
		{"graph-drift", []lab.Difference{{Object: "bmlab-veth0", Kind: "missing", Fix: "create it"}}, drifted},
	} {
		got := GraphDOT(e.Plan, tt.diffs, tt.power)
		golden := filepath.Join("testdata", tt.name+".dot")
		if *update {
			labtest.Must(t, os.MkdirAll("testdata", 0o755))
			labtest.Must(t, os.WriteFile(golden, []byte(got), 0o644))
		}
		want, err := os.ReadFile(golden)
		labtest.Must(t, err)
		if d := cmp.Diff(string(want), got); d != "" {
			t.Errorf("%s (-want +got):\n%s", golden, d)
		}
	}
}
