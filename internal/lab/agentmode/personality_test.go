package agentmode

import (
	"strings"
	"testing"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/lab/labtest"
	"github.com/bmlab/bmlab/internal/labconfig"
	"github.com/bmlab/bmlab/internal/plan"
	"github.com/bmlab/bmlab/internal/plan/plantest"
)

// TestMediaPlaces: the agent mode inserts its ISO through the System's
// VirtualMedia, so preflight refuses a personality that hangs media under
// the Manager only, naming the field, and takes one that serves it under
// the System.
func TestMediaPlaces(t *testing.T) {
	for _, c := range []struct {
		persona, want string
	}{
		{"personality: idrac9", "cluster.masters.personality: idrac9 serves virtual media under the Manager only"},
		{"personality: ilo6", "cluster.masters.personality: ilo6 serves virtual media under the Manager only"},
		{"personality: idrac10", ""},
		{"personality: ''", ""},
		// Per node: the entry that names the refused one.
		{"personality: idrac10, personalities: [generic, '', supermicro-x13]", "cluster.masters.personalities[2]: supermicro-x13 serves virtual media under the Manager only, and the agent mode inserts its ISO through the System's VirtualMedia; use idrac10 or generic for node am-master-2"},
		{"personality: idrac10, personalities: [generic, idrac10]", ""},
	} {
		cfg, err := labconfig.Parse([]byte("name: am\ncluster: {workers: {count: 0}, masters: {" + c.persona + "}}\n"))
		labtest.Must(t, err)
		labtest.Must(t, cfg.ApplyProfile("tiny"))
		p, err := plan.Resolve(cfg, plan.Options{Modes: plantest.Modes(), Dir: t.TempDir(), Profile: "tiny", Mode: Name})
		labtest.Must(t, err)
		err = mediaPlaces(&lab.Env{Plan: p})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v, want none", c.persona, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: %v, want %q", c.persona, err, c.want)
		}
	}
}
