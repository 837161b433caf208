package lab_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/lab/labtest"
	"github.com/bmlab/bmlab/internal/plan"
)

// stepStub is an action that records its run and applies to plans as told.
type stepStub struct {
	name  string
	apply bool
	ran   *[]string
}

func (s stepStub) Name() string                           { return s.name }
func (s stepStub) Applies(*plan.Plan) bool                { return s.apply }
func (s stepStub) Delete(context.Context, *lab.Env) error { return nil }
func (s stepStub) Ensure(context.Context, *lab.Env) (bool, error) {
	*s.ran = append(*s.ran, s.name)
	return false, nil
}

// TestUpUntilSharedName: the hybrid mode's two flows share step names
// (ignition): --until NAME stops after the plan's own step of that name,
// not at the other flow's, which the plan skips; a skipped step alone with
// the name still ends the run where it would have been.
func TestUpUntilSharedName(t *testing.T) {
	e, _ := labtest.Env(t, labtest.NewHost(), "")
	var ran []string
	actions := []lab.Action{
		stepStub{"storage", true, &ran}, stepStub{"ignition", false, &ran}, stepStub{"ignition", true, &ran},
		stepStub{"control-plane", false, &ran}, stepStub{"node", true, &ran},
	}
	labtest.Must(t, lab.Up(context.Background(), e, actions, "ignition"))
	if d := cmp.Diff([]string{"storage", "ignition"}, ran); d != "" {
		t.Errorf("--until ignition ran (-want +got):\n%s", d)
	}
	ran = nil
	labtest.Must(t, lab.Up(context.Background(), e, actions, "control-plane"))
	if d := cmp.Diff([]string{"storage", "ignition"}, ran); d != "" {
		t.Errorf("--until control-plane (skipped) ran (-want +got):\n%s", d)
	}
}
