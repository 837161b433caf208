package lab

import "context"

// Step is an action made of its name and functions: the shape of a mode's
// own step that keeps no settings and has no trait of its own, which the
// mode lists in place (&lab.Step{StepName: "installer", EnsureFunc: …}).
// Without DeleteFunc it creates nothing on the platform, and Down does not
// list it. A step with settings (steps.Storage's image) or a trait
// (Conditional) is a type of its own.
type Step struct {
	StepName   string
	EnsureFunc func(ctx context.Context, e *Env) (changed bool, err error)
	DeleteFunc func(ctx context.Context, e *Env) error
}

// Name implements Action.
func (s *Step) Name() string { return s.StepName }

// Ensure implements Action.
func (s *Step) Ensure(ctx context.Context, e *Env) (bool, error) { return s.EnsureFunc(ctx, e) }

// Delete implements Action.
func (s *Step) Delete(ctx context.Context, e *Env) error {
	if s.DeleteFunc == nil {
		return nil
	}
	return s.DeleteFunc(ctx, e)
}

// createsNothing says whether Down leaves the action out: a NothingToDelete
// or a Step without DeleteFunc.
func createsNothing(a Action) bool {
	if s, ok := a.(*Step); ok {
		return s.DeleteFunc == nil
	}
	_, ok := a.(NothingToDelete)
	return ok
}
