package steps

import (
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
