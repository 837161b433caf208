package lab

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/plan"
)

// Reporter is told what the pipeline does; labctl turns it into status
// lines. Calls come from one goroutine.
type Reporter interface {
	Start(step string)
	Note(step, msg string)
	// Progress says how far a long wait has come ("3 of 5 BMCs answer",
	// "412 MiB of 1.1 GiB, 38 MiB/s, 18 s left"): on a terminal it replaces
	// the step's spinner text; in plain output it is a line now and then.
	Progress(step, msg string)
	Done(step string, changed bool, err error)
}

// Action is one idempotent step.
type Action interface {
	Name() string
	// Ensure creates what is missing and verifies what is there; it
	// reports whether it changed anything.
	Ensure(ctx context.Context, e *Env) (changed bool, err error)
	// Delete removes what the lab owns of the action's kind, found by the
	// lab's mark as well as by the plan, and fails while any of it is
	// left. Absent things are success.
	Delete(ctx context.Context, e *Env) error
}

// Env is what every action works with.
type Env struct {
	Plan *plan.Plan
	Host Provider
	Rep  Reporter
	Log  *zap.Logger
	// Remote runs labctl on the lab's other hosts (their exec:).
	Remote Runner
	// StartStopped starts nodes up started before and that were shut off
	// since (up --start-stopped); without it they stay off.
	StartStopped bool
}

// NothingToDelete marks actions that create nothing on the platform; Down
// does not list them.
type NothingToDelete interface{ CreatesNothing() }

// Conditional marks actions that have nothing to do for some plans (the
// hosts step, for a lab on one host); Up and Down leave them out there.
type Conditional interface{ Applies(p *plan.Plan) bool }

func skipped(a Action, p *plan.Plan) bool {
	c, ok := a.(Conditional)
	return ok && !c.Applies(p)
}

// ErrStop, returned (wrapped) by an Ensure, ends Up early without an
// error: the action is not done, its message is shown, and `labctl up`
// again resumes there (for example when openshift-install is not there yet).
var ErrStop = errors.New("stopped")

// Names lists the actions' names.
func Names(actions []Action) []string {
	out := make([]string, len(actions))
	for i, a := range actions {
		out[i] = a.Name()
	}
	return out
}

// CheckUntil says whether until names an action.
func CheckUntil(actions []Action, until string) error {
	if until == "" || slices.Contains(Names(actions), until) {
		return nil
	}
	return fmt.Errorf("--until %q: not a step; the steps are %s", until, strings.Join(slices.Compact(Names(actions)), ", "))
}

// Up runs the actions in order, stopping after until (when not empty). It
// records the last completed action; since every action is idempotent,
// running Up again resumes.
func Up(ctx context.Context, e *Env, actions []Action, until string) error {
	if err := CheckUntil(actions, until); err != nil {
		return err
	}
	st, err := LoadState(e.Plan)
	if err != nil {
		return err
	}
	for i, a := range actions {
		if skipped(a, e.Plan) {
			// A step this plan skips ends the run where it would have
			// been, unless a later one of the plan's bears its name (the
			// hybrid mode's two flows share step names).
			if a.Name() == until && !slices.ContainsFunc(actions[i+1:], func(b Action) bool { return b.Name() == until && !skipped(b, e.Plan) }) {
				break
			}
			continue
		}
		e.Rep.Start(a.Name())
		changed, err := a.Ensure(ctx, e)
		if errors.Is(err, ErrStop) {
			e.Rep.Note(a.Name(), strings.TrimSuffix(err.Error(), ": "+ErrStop.Error()))
			e.Rep.Done(a.Name(), false, err)
			return nil
		}
		e.Rep.Done(a.Name(), changed, err)
		if err != nil {
			return fmt.Errorf("%s: %w", a.Name(), err)
		}
		st.Done = a.Name()
		if err := st.Save(e.Plan); err != nil {
			return err
		}
		if a.Name() == until {
			break
		}
	}
	return nil
}

// Down runs every action's Delete in reverse order. It goes on past
// failures and returns them all, so one stuck object does not keep the
// rest. It needs no state: each Delete finds what bears the lab's mark.
func Down(ctx context.Context, e *Env, actions []Action) error {
	var errs []error
	for _, a := range slices.Backward(actions) {
		if createsNothing(a) || skipped(a, e.Plan) {
			continue
		}
		name := "remove " + a.Name()
		e.Rep.Start(name)
		err := a.Delete(ctx, e)
		e.Rep.Done(name, err == nil, err)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a.Name(), err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("down left things behind:\n%w", errors.Join(errs...))
	}
	if err := RemoveState(e.Plan); err != nil {
		return err
	}
	if e.Plan.Spoke != "" {
		return removeSpokeDirs(e.Plan)
	}
	return nil
}

// Remaining fails when objects of a kind that bear the lab's mark are
// still there: a Delete never reports success while leaving them.
func Remaining(ctx context.Context, e *Env, kind Kind) error {
	left, err := e.Host.Marked(ctx, kind, e.Plan.Lab)
	if err != nil {
		return err
	}
	if len(left) > 0 {
		return fmt.Errorf("%ss of lab %q still there: %s", kind, e.Plan.Lab, strings.Join(left, ", "))
	}
	return nil
}

// Union is the plan's names and the marked ones, without duplicates.
func Union(a, b []string) []string {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}
