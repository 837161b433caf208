package ipimode

import (
	"context"
	"errors"
	"fmt"

	"github.com/bmlab/bmlab/internal/ipi"
	"github.com/bmlab/bmlab/internal/lab"
)

// ensureInstaller runs `openshift-install create cluster` in the installer
// directory, streaming its lines. When openshift-install is not there, up
// stops with a message that says where to get it (ErrStop).
func ensureInstaller(ctx context.Context, e *lab.Env) (bool, error) {
	dir := e.Plan.Installer.Dir
	err := ipi.RunInstaller(ctx, ipi.InstallerOptions{
		Binary: e.Plan.Installer.Binary, Dir: dir,
		InstallConfig: e.Plan.Paths.InstallConfig,
	}, func(line string) { e.Rep.Note("installer", line) })
	if errors.Is(err, ipi.ErrInstallerNotFound) {
		return false, fmt.Errorf("%w: %w", err, lab.ErrStop)
	}
	return err == nil, err
}
