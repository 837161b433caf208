package modes

import (
	"context"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/lab/agentmode"
	"github.com/bmlab/bmlab/internal/lab/hybridmode"
	"github.com/bmlab/bmlab/internal/lab/ipimode"
	"github.com/bmlab/bmlab/internal/lab/labtest"
	"github.com/bmlab/bmlab/internal/plan/plantest"
)

// TestPlantestNames: the mode names that the tests of the packages the
// modes import use (plantest.IPI, Hybrid, Agent) are the modes' Name.
func TestPlantestNames(t *testing.T) {
	if d := cmp.Diff([]string{ipimode.Name, hybridmode.Name, agentmode.Name}, []string{plantest.IPI, plantest.Hybrid, plantest.Agent}); d != "" {
		t.Errorf("plantest's mode names are not the modes' (-modes +plantest):\n%s", d)
	}
}

// TestLookup: a mode is found by its name; any other name is refused with
// the names there are (moved here from plan's TestBadInput: the modes'
// list, not the plan, knows them).
func TestLookup(t *testing.T) {
	for _, name := range []string{ipimode.Name, hybridmode.Name, agentmode.Name} {
		if m, err := All.Lookup(name); err != nil || m.Name != name {
			t.Errorf("Lookup(%s) = %v, %v", name, m.Name, err)
		}
	}
	if _, err := All.Lookup("upi"); err == nil || err.Error() != `--mode "upi": use ipi-baremetal, hybrid, agent` {
		t.Errorf("Lookup(upi) = %v", err)
	}
}

// hello is a trivial fourth mode's one action.
type hello struct{ said *[]string }

func (hello) Name() string { return "hello" }
func (h hello) Ensure(_ context.Context, e *lab.Env) (bool, error) {
	*h.said = append(*h.said, "hello "+e.Plan.Lab)
	e.Rep.Note("hello", "hello from "+e.Plan.Mode)
	return true, nil
}
func (hello) Delete(context.Context, *lab.Env) error { return nil }

// TestAFourthMode: a mode with one action is a value and a line in the
// list: found by its name, run by the engine on a plan of that mode,
// its action part of down --lab's teardown; nothing else changes.
func TestAFourthMode(t *testing.T) {
	var said []string
	hi := lab.Mode{Name: "hello", Actions: func() []lab.Action { return []lab.Action{hello{&said}} }}
	all := append(slices.Clone(All), hi) // the registration line

	m, err := all.Lookup("hello")
	labtest.Must(t, err)
	e, rec := labtest.Env(t, labtest.NewHost(), "")
	e.Plan.Mode = m.Name
	labtest.Must(t, lab.Up(context.Background(), e, m.Actions(), ""))
	if d := cmp.Diff([]string{"hello fk"}, said); d != "" {
		t.Errorf("the mode's action ran (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"hello: hello from hello", "✓ hello"}, rec.Lines); d != "" {
		t.Errorf("status lines (-want +got):\n%s", d)
	}
	st, err := lab.LoadState(e.Plan)
	labtest.Must(t, err)
	if st.Mode != "hello" || st.Done != "hello" {
		t.Errorf("state %+v, want mode hello, done hello", st)
	}
	if !slices.ContainsFunc(all.Teardown(), func(a lab.Action) bool { return a.Name() == "hello" }) {
		t.Errorf("down --lab's teardown lacks the fourth mode's action: %v", lab.Names(all.Teardown()))
	}
	if len(All) != 3 {
		t.Errorf("registering a mode in a copy changed labctl's list: %v", All.Names())
	}
}
