package lab

import "context"

// refuse is a pipeline that stops before doing anything.
type refuse struct{}

func (refuse) Name() string                               { return "preflight" }
func (refuse) Ensure(context.Context, *Env) (bool, error) { return false, errHybridMissing }
func (refuse) Delete(context.Context, *Env) error         { return nil }
func (refuse) createsNothing()                            {}
