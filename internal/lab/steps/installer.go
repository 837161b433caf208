package steps

import (
	"context"
	"errors"
	"fmt"

	"github.com/bmlab/bmlab/internal/ipi"
	"github.com/bmlab/bmlab/internal/lab"
)

// The installer's inputs and its absence, as every mode meets them.

// Inputs reads the pull secret and SSH key the plan names.
func Inputs(e *lab.Env) (pullSecret, sshKey string, err error) {
	return ipi.ReadInputs(e.Plan.Cluster.PullSecret, e.Plan.Cluster.SSHKey)
}

// StopIfMissing turns "openshift-install (or oc) is not there" into a stop
// that up resumes from (lab.ErrStop).
func StopIfMissing(err error) error {
	if errors.Is(err, ipi.ErrInstallerNotFound) {
		return fmt.Errorf("%w: %w", err, lab.ErrStop)
	}
	return err
}

// ValidateInstallConfig applies the installer's rules to the
// install-config a mode writes (ipi.Validate), and, when the lab's
// installer is there, its rule on the pools' architectures for the release
// payload it installs (`openshift-install version`'s release architecture:
// a single-architecture payload installs that architecture only, a mixed
// lab needs a multi one). Without an installer that rule waits for it.
func ValidateInstallConfig(e *lab.Env, ic *ipi.InstallConfig) ipi.ErrorList {
	p := e.Plan
	errs := ipi.Validate(ic, p.Cluster.DHCPRanges()...)
	bin, err := ipi.FindInstaller(p.Installer.Binary, p.Dir)
	if err != nil {
		return errs
	}
	arch, err := ipi.ReleaseArchitecture(context.Background(), bin)
	if err != nil {
		e.Rep.Note("preflight", fmt.Sprintf("the release payload's architecture is not checked: %v", err))
		return errs
	}
	return append(errs, ipi.ValidateRelease(ic, arch)...)
}
