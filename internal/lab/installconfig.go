package lab

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/bmlab/bmlab/internal/ipi"
	"github.com/bmlab/bmlab/internal/plan"
)

// installConfig writes install-config.yaml for platform baremetal, checked
// against the installer's rules first.
type installConfig struct{}

func (installConfig) Name() string { return "install-config" }

func (installConfig) Ensure(_ context.Context, e *Env) (bool, error) {
	ic, err := IPIInstallConfig(e)
	if err != nil {
		return false, err
	}
	want, err := ipi.Marshal(ic)
	if err != nil {
		return false, err
	}
	dir := e.Plan.Installer.Dir
	if have, err := os.ReadFile(e.Plan.Paths.InstallConfig); err == nil && string(have) == string(want) {
		return false, nil
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return false, err
	}
	if err := ipi.Write(dir, ic); err != nil {
		return false, err
	}
	e.Rep.Note("install-config", "wrote "+e.Plan.Paths.InstallConfig)
	return true, nil
}

// Delete removes install-config.yaml; the installer's own files in the
// directory (logs, auth) stay for the user to read.
func (installConfig) Delete(_ context.Context, e *Env) error {
	return removeFiles([]string{e.Plan.Paths.InstallConfig}, "")
}

// IPIInstallConfig builds and validates the install-config of the plan's
// nodes, with their BMC addresses from the plan.
func IPIInstallConfig(e *Env) (*ipi.InstallConfig, error) {
	p := e.Plan
	pull, key, err := Inputs(e)
	if err != nil {
		return nil, err
	}
	ic, err := ipi.Generate(p.IPICluster(), p.IPINodes(), pull, key)
	if err != nil {
		return nil, err
	}
	if errs := ipi.Validate(ic, p.Cluster.DHCPRange); len(errs) > 0 {
		return nil, fmt.Errorf("install-config.yaml would fail the installer's checks:\n%w", errs)
	}
	return ic, nil
}

// Inputs reads the pull secret and SSH key the plan names.
func Inputs(e *Env) (pullSecret, sshKey string, err error) {
	return ipi.ReadInputs(e.Plan.Cluster.PullSecret, e.Plan.Cluster.SSHKey)
}

// Precheck validates, before anything is built, what the run will write
// the installer's way: a run that would reach install-config fails now, not
// after the nodes exist. Runs that stop earlier (--until nodes, say) need no
// pull secret.
func Precheck(e *Env, actions []Action, until string) error {
	for _, a := range actions {
		if a.Name() == "install-config" {
			break
		}
		if a.Name() == until {
			return nil
		}
	}
	var err error
	if e.Plan.Mode == plan.ModeIPI {
		_, err = IPIInstallConfig(e)
	} else {
		_, err = HybridInstallConfig(e)
	}
	if err != nil {
		return fmt.Errorf("the lab file would give an install-config that fails the installer's checks; nothing was changed:\n%w", err)
	}
	return nil
}

// removeFiles removes files; absent ones are success.
func removeFiles(paths []string, dir string) error {
	var errs []error
	for _, p := range paths {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if dir != "" {
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
