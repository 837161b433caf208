package lab_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/lab/labtest"
	"github.com/bmlab/bmlab/internal/labconfig"
	"github.com/bmlab/bmlab/internal/plan"
	"github.com/bmlab/bmlab/internal/plan/plantest"
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

// TestStateRecordsProfile: a lab brought up with a profile records it in
// its state, and a later command's plan given no --profile has the nodes
// the lab was built with (the tiny profile's 2 GiB disks, not the lab
// file's); one given another profile is refused.
func TestStateRecordsProfile(t *testing.T) {
	e, _ := labtest.Env(t, labtest.NewHost(), "")
	var ran []string
	labtest.Must(t, lab.Up(context.Background(), e, []lab.Action{stepStub{"storage", true, &ran}}, ""))
	file := filepath.Join(e.Plan.Dir, "lab.yaml")
	labtest.Must(t, os.WriteFile(file, []byte("name: fk\ncluster: {sshKey: id.pub, installer: /nonexistent/openshift-install}\n"), 0o644))
	p, err := plan.Load(plan.Options{Modes: plantest.Modes(), ConfigPath: file, ConfigSet: true})
	labtest.Must(t, err)
	sizes := func(p *plan.Plan) (s []string) {
		for _, n := range p.Nodes {
			s = append(s, fmt.Sprintf("%s: %d MiB, %d GiB", n.Name, n.MemoryMiB, n.Disks[0].SizeGiB))
		}
		return s
	}
	if d := cmp.Diff(sizes(e.Plan), sizes(p)); d != "" || p.Profile != labconfig.ProfileTiny {
		t.Errorf("a tiny lab's plan without --profile: profile %q, nodes (-up +later):\n%s", p.Profile, d)
	}
	if _, err := plan.Load(plan.Options{Modes: plantest.Modes(), ConfigPath: file, ConfigSet: true, Profile: labconfig.ProfileDefault}); err == nil ||
		!strings.Contains(err.Error(), `--profile default: lab "fk" exists with profile tiny`) {
		t.Errorf("a tiny lab's plan with --profile default: %v", err)
	}
}

// TestStepUpAndDown: a lab.Step runs its EnsureFunc in Up and its
// DeleteFunc in Down; one without DeleteFunc creates nothing, so Down
// leaves it out. Two modes' Steps of one name are both in Teardown (each
// is its mode's own), while a type of action shared by modes is there once.
func TestStepUpAndDown(t *testing.T) {
	e, rec := labtest.Env(t, labtest.NewHost(), "")
	var ran []string
	step := func(name string, deletes bool) *lab.Step {
		s := &lab.Step{StepName: name, EnsureFunc: func(context.Context, *lab.Env) (bool, error) {
			ran = append(ran, "ensure "+name)
			return true, nil
		}}
		if deletes {
			s.DeleteFunc = func(context.Context, *lab.Env) error { ran = append(ran, "delete "+name); return nil }
		}
		return s
	}
	actions := []lab.Action{step("install-config", true), step("installer", false)}
	labtest.Must(t, lab.Up(context.Background(), e, actions, ""))
	labtest.Must(t, lab.Down(context.Background(), e, actions))
	if d := cmp.Diff([]string{"ensure install-config", "ensure installer", "delete install-config"}, ran); d != "" {
		t.Errorf("Up then Down ran (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"✓ install-config", "✓ installer", "✓ remove install-config"}, rec.Ticks()); d != "" {
		t.Errorf("ticks (-want +got):\n%s", d)
	}

	var sharedRan []string
	shared := stepStub{"network", true, &sharedRan}
	modes := lab.Modes{
		{Name: "a", Actions: func() []lab.Action { return []lab.Action{shared, step("install-complete", true)} }},
		{Name: "b", Actions: func() []lab.Action { return []lab.Action{shared, step("install-complete", true)} }},
	}
	if d := cmp.Diff([]string{"network", "install-complete", "install-complete"}, lab.Names(modes.Teardown())); d != "" {
		t.Errorf("Teardown (-want +got):\n%s", d)
	}
}
