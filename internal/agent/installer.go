package agent

import (
	"context"

	"github.com/bmlab/bmlab/internal/ipi"
)

// The installer's agent commands labctl runs.
var (
	CreateImage       = []string{"agent", "create", "image"}
	BootstrapComplete = []string{"agent", "wait-for", "bootstrap-complete"}
	InstallComplete   = []string{"agent", "wait-for", "install-complete"}
)

// Installer runs openshift-install's agent commands in one directory,
// through ipi.RunInstallerCommand: every output line goes to OnLine and to
// Dir/openshift-install.out, a failure is an *ipi.InstallerError holding
// the command's last lines, a missing binary an
// *ipi.InstallerNotFoundError.
type Installer struct {
	Options ipi.InstallerOptions
	OnLine  func(string)
}

// Run runs one of the commands above.
func (i *Installer) Run(ctx context.Context, command []string) error {
	return ipi.RunInstallerCommand(ctx, i.Options, command, i.OnLine)
}
