package hybridmode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/bmlab/bmlab/internal/ipi"
	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/lab/steps"
)

// ensureInstallConfig writes install-config.yaml (platform none) into the
// installer's directory, and a copy in the lab's state directory: the
// installer consumes the file, the copy says what it consumed.
func ensureInstallConfig(_ context.Context, e *lab.Env) (bool, error) {
	ic, err := HybridInstallConfig(e)
	if err != nil {
		return false, err
	}
	want, err := ipi.Marshal(ic)
	if err != nil {
		return false, err
	}
	copyPath := e.Plan.Paths.InstallConfigCopy
	have, err := os.ReadFile(copyPath)
	consumed := installerConsumed(e)
	switch {
	case err == nil && string(have) == string(want) && consumed:
		return false, nil
	case err == nil && string(have) != string(want) && consumed:
		return false, fmt.Errorf("the lab file changed after openshift-install consumed install-config.yaml in %s; the installer cannot take a new one: `labctl down`, then up again", e.Plan.Installer.Dir)
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return false, err
	}
	if err := os.MkdirAll(e.Plan.StateDir, 0o755); err != nil {
		return false, err
	}
	wrote, err := steps.WriteFiles(want, e.Plan.Paths.InstallConfig, copyPath)
	if wrote {
		e.Rep.Note("install-config", "wrote "+e.Plan.Paths.InstallConfig+" (platform none)")
	}
	return wrote, err
}

// deleteInstallConfig removes the installer's directory with the copy: its assets (the
// ignition configs, their certificates, auth/) belong to the cluster that
// down removes, and a later up must not resume from them.
func deleteInstallConfig(_ context.Context, e *lab.Env) error {
	if e.Plan.Mode != Name {
		return lab.RemoveFiles([]string{e.Plan.Paths.InstallConfigCopy}, "")
	}
	return lab.RemoveFiles([]string{e.Plan.Paths.InstallConfigCopy}, e.Plan.Installer.Dir)
}

// installerConsumed reports whether openshift-install has taken the
// install-config (its state file or its assets exist).
func installerConsumed(e *lab.Env) bool {
	for _, f := range []string{".openshift_install_state.json", "manifests", "bootstrap.ign"} {
		if _, err := os.Stat(filepath.Join(e.Plan.Installer.Dir, f)); err == nil {
			return true
		}
	}
	return false
}
