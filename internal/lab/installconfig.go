package lab

import (
	"context"
	"errors"
	"os"

	"github.com/bmlab/bmlab/internal/ipi"
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
	ic, err := ipi.Generate(installCluster(p), p.IPINodes(), pull, key)
	if err != nil {
		return nil, err
	}
	if errs := ipi.Validate(ic, p.Cluster.DHCPRange, secondaryRange(p)); len(errs) > 0 {
		return nil, errs
	}
	return ic, nil
}

// Inputs reads the pull secret and SSH key the plan names.
func Inputs(e *Env) (pullSecret, sshKey string, err error) {
	return ipi.ReadInputs(e.Plan.Cluster.PullSecret, e.Plan.Cluster.SSHKey)
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
