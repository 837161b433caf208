package ipimode

import (
	"context"

	"github.com/bmlab/bmlab/internal/ipi"
	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/lab/steps"
)

// ensureInstallConfig writes install-config.yaml for platform baremetal, checked
// against the installer's rules first.
func ensureInstallConfig(_ context.Context, e *lab.Env) (bool, error) {
	ic, err := InstallConfig(e)
	if err != nil {
		return false, err
	}
	want, err := ipi.Marshal(ic)
	if err != nil {
		return false, err
	}
	wrote, err := steps.WriteFiles(want, e.Plan.Paths.InstallConfig)
	if wrote {
		e.Rep.Note("install-config", "wrote "+e.Plan.Paths.InstallConfig)
	}
	return wrote, err
}

// deleteInstallConfig removes install-config.yaml; the installer's own files in the
// directory (logs, auth) stay for the user to read.
func deleteInstallConfig(_ context.Context, e *lab.Env) error {
	return lab.RemoveFiles([]string{e.Plan.Paths.InstallConfig}, "")
}

// InstallConfig builds and validates the install-config of the plan's
// nodes, with their BMC addresses from the plan.
func InstallConfig(e *lab.Env) (*ipi.InstallConfig, error) {
	p := e.Plan
	pull, key, err := steps.Inputs(e)
	if err != nil {
		return nil, err
	}
	ic, err := ipi.Generate(steps.InstallCluster(p), steps.IPINodes(p), pull, key)
	if err != nil {
		return nil, err
	}
	if errs := steps.ValidateInstallConfig(e, ic); len(errs) > 0 {
		return nil, errs
	}
	return ic, nil
}
