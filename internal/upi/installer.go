package upi

import (
	"context"
	"fmt"

	"github.com/bmlab/bmlab/internal/ipi"
)

// Events openshift-install can wait for.
const (
	BootstrapComplete = "bootstrap-complete"
	InstallComplete   = "install-complete"
)

// Installer runs the openshift-install commands of the hybrid flow in one
// directory, through ipi.RunInstallerCommand: every output line goes to
// OnLine (may be nil; called from another goroutine) and to
// Dir/openshift-install.out, a failure is an *ipi.InstallerError holding
// the command's last lines, a missing binary an *ipi.InstallerNotFoundError,
// and a cancelled ctx interrupts the installer.
type Installer struct {
	Options ipi.InstallerOptions
	OnLine  func(string)
}

// CreateManifests runs `create manifests`, which consumes
// install-config.yaml (kept as install-config.yaml.orig; Options.InstallConfig
// names it when it is elsewhere) and writes manifests/ and openshift/.
func (i *Installer) CreateManifests(ctx context.Context) error {
	return i.run(ctx, "create", "manifests")
}

// CreateSingleNodeIgnitionConfig runs `create single-node-ignition-config`,
// which consumes the install-config (with bootstrapInPlace) and writes
// bootstrap-in-place-for-live-iso.ign, worker.ign, auth/ and metadata.json.
func (i *Installer) CreateSingleNodeIgnitionConfig(ctx context.Context) error {
	return i.run(ctx, "create", "single-node-ignition-config")
}

// CreateIgnitionConfigs runs `create ignition-configs`, which consumes
// manifests/ and openshift/ and writes bootstrap.ign, master.ign,
// worker.ign, auth/ and metadata.json.
func (i *Installer) CreateIgnitionConfigs(ctx context.Context) error {
	return i.run(ctx, "create", "ignition-configs")
}

// WaitFor runs `wait-for event` (BootstrapComplete or InstallComplete)
// once; its exit code is in the *ipi.InstallerError (ExitCode: 5 when
// bootstrap failed, 6 when the install did). Retrying is the caller's.
func (i *Installer) WaitFor(ctx context.Context, event string) error {
	if event != BootstrapComplete && event != InstallComplete {
		return fmt.Errorf("wait-for %q: want %s or %s", event, BootstrapComplete, InstallComplete)
	}
	return i.run(ctx, "wait-for", event)
}

func (i *Installer) run(ctx context.Context, command ...string) error {
	return ipi.RunInstallerCommand(ctx, i.Options, command, i.OnLine)
}
