package up

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/bmlab/bmlab/internal/ipi"
	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/labconfig"
)

// precheck validates, before anything is built, the install-config the run
// will write, the installer's way: a run that would reach install-config
// fails now, not after the nodes exist. Runs that stop earlier (--until
// nodes, say) need no pull secret.
func precheck(cfg *labconfig.Config, f *flags, dir string, steps []string) error {
	if f.until != "" {
		for _, s := range steps {
			if s == f.until {
				return nil // stops before install-config
			}
			if s == "install-config" {
				break
			}
		}
	}
	pull, key, err := readInputs(cfg, f, dir)
	if err != nil {
		return err
	}
	if err := ipi.Precheck(*cfg, pull, key); err != nil {
		return fmt.Errorf("the lab file would give an install-config that fails the installer's checks; nothing was changed:\n%w", err)
	}
	return nil
}

// readInputs reads the pull secret and SSH key, with the flags' overrides.
func readInputs(cfg *labconfig.Config, f *flags, dir string) (string, string, error) {
	k := cfg.Cluster
	if f.pullSecret != "" {
		k.PullSecret = f.pullSecret
	}
	if f.sshKey != "" {
		k.SSHKey = f.sshKey
	}
	return ipi.ReadInputs(k, dir)
}

// ipiSteps are the install-config and installer steps of ipi-baremetal.
func ipiSteps(l *lab.Lab, cfg *labconfig.Config, f *flags) []lab.Step {
	dir := l.Spec.Dir
	installDir := filepath.Join(dir, "install")
	return []lab.Step{
		{
			Name: "install-config",
			Ensure: func(context.Context) (bool, error) {
				pull, key, err := readInputs(cfg, f, dir)
				if err != nil {
					return false, err
				}
				var nodes []ipi.Node
				for i, n := range l.Spec.Nodes {
					node := ipi.Node{Name: n.Name, Role: n.Role, UUID: n.UUID, BootMAC: n.MAC}
					if cfg.Cluster.BMC.Kind == labconfig.BMCIPMI {
						node.IPMIPort = cfg.Cluster.BMC.IPMIPortBase + i
					}
					nodes = append(nodes, node)
				}
				ic, err := ipi.Generate(*cfg, nodes, pull, key)
				if err != nil {
					return false, err
				}
				if errs := ipi.Validate(ic, cfg.Cluster.DHCPRange); len(errs) > 0 {
					return false, fmt.Errorf("install-config.yaml would fail the installer's checks:\n%v", errs)
				}
				want, err := ipi.Marshal(ic)
				if err != nil {
					return false, err
				}
				if have, err := os.ReadFile(filepath.Join(installDir, "install-config.yaml")); err == nil && string(have) == string(want) {
					return false, nil
				}
				if err := os.MkdirAll(installDir, 0o750); err != nil {
					return false, err
				}
				if err := ipi.Write(installDir, ic); err != nil {
					return false, err
				}
				l.Rep.Note("install-config", "wrote "+filepath.Join(installDir, "install-config.yaml"))
				return true, nil
			},
			Delete: func(context.Context) error {
				err := os.Remove(filepath.Join(installDir, "install-config.yaml"))
				if errors.Is(err, os.ErrNotExist) {
					return nil
				}
				return err
			},
		},
		{
			Name: "installer",
			Ensure: func(ctx context.Context) (bool, error) {
				err := ipi.RunInstaller(ctx, ipi.InstallerOptions{
					Binary: cfg.Cluster.Installer, Dir: installDir,
					InstallConfig: filepath.Join(installDir, "install-config.yaml"),
				}, func(line string) { l.Rep.Note("installer", line) })
				if errors.Is(err, ipi.ErrInstallerNotFound) {
					return false, fmt.Errorf("%w: %w", err, lab.ErrStop)
				}
				return err == nil, err
			},
		},
	}
}
