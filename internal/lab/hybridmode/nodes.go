package hybridmode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/lab/steps"
	"github.com/bmlab/bmlab/internal/ocp"
	"github.com/bmlab/bmlab/internal/plan"
	"github.com/bmlab/bmlab/internal/upi"
)

// controlPlane defines and starts the bootstrap and the masters; each
// boots its ignition through fw_cfg.
type controlPlane struct{ multiNode }

func (controlPlane) Name() string { return "control-plane" }

func (controlPlane) Ensure(ctx context.Context, e *lab.Env) (bool, error) {
	roles := []string{ocp.RoleMaster}
	if !lab.Exists(e.Plan.Paths.BootstrapRemoved) {
		roles = append([]string{ocp.RoleBootstrap}, roles...)
	}
	return startNodes(ctx, e, "control-plane", nodesOf(e.Plan, roles...))
}

// Delete is the nodes action's: every domain of the lab; and the list of
// the nodes up started.
func (controlPlane) Delete(ctx context.Context, e *lab.Env) error {
	if err := (steps.Nodes{}).Delete(ctx, e); err != nil {
		return err
	}
	return lab.RemoveFiles([]string{e.Plan.Paths.Started}, "")
}

// workers defines and starts the workers, after the bootstrap is gone.
type workers struct{ multiNode }

func (workers) Name() string { return "workers" }

func (workers) Ensure(ctx context.Context, e *lab.Env) (bool, error) {
	return startNodes(ctx, e, "workers", nodesOf(e.Plan, ocp.RoleWorker))
}

func (workers) Delete(context.Context, *lab.Env) error { return nil }
func (workers) CreatesNothing()                        {}

// startNodes defines the nodes and starts them, except a node up started
// before that is shut off now: someone shut it off, and it stays off (said
// so) unless the user asked for it (--start-stopped).
func startNodes(ctx context.Context, e *lab.Env, step string, list []plan.Node) (bool, error) {
	changed, err := steps.EnsureMachines(ctx, e, machines(e.Plan, list))
	if err != nil {
		return changed, err
	}
	// The nodes up started (none when the list is missing or unreadable:
	// then up starts them, as the first time).
	started := lab.ReadNames(e.Plan.Paths.Started)
	for _, n := range list {
		if _, err := os.Stat(n.Ignition); err != nil {
			return changed, fmt.Errorf("node %s: its ignition: %w", n.Name, err)
		}
		if started[n.Name] && !e.StartStopped {
			power, err := e.Host.Power(ctx, n.Name)
			if err != nil {
				return changed, err
			}
			if power == "Off" {
				e.Rep.Note(step, fmt.Sprintf("left %s off: it was shut off after up started it; `labctl up --start-stopped` starts it", n.Name))
				continue
			}
		}
		c, err := e.Host.Start(ctx, n.Name)
		if err != nil {
			return changed, err
		}
		changed = changed || c
		if !started[n.Name] {
			started[n.Name] = true
			if err := lab.WriteNames(e.Plan.Paths.Started, started); err != nil {
				return changed, err
			}
		}
	}
	return changed, nil
}

// bootstrapComplete waits for `openshift-install wait-for
// bootstrap-complete`, a few times. On failure everything stays, and the
// error says where the logs are and how to gather the bootstrap's.
type bootstrapComplete struct{ multiNode }

// BootstrapAttempts is how often bootstrap-complete is waited for.
const BootstrapAttempts = 3

func (bootstrapComplete) Name() string { return "bootstrap-complete" }

func (bootstrapComplete) Ensure(ctx context.Context, e *lab.Env) (bool, error) {
	p := e.Plan
	if lab.Exists(p.Paths.BootstrapComplete) {
		return false, nil
	}
	var err error
	for i := 1; i <= BootstrapAttempts; i++ {
		if err = installerFor(e, "bootstrap-complete").WaitFor(ctx, upi.BootstrapComplete); err == nil {
			break
		}
		if errors.Is(err, lab.ErrStop) || ctx.Err() != nil || errors.Is(steps.StopIfMissing(err), lab.ErrStop) {
			return false, steps.StopIfMissing(err)
		}
		e.Rep.Note("bootstrap-complete", fmt.Sprintf("attempt %d of %d failed", i, BootstrapAttempts))
	}
	if err != nil {
		var masters []string
		var bootstrap string
		for _, n := range p.Nodes {
			switch n.Role {
			case ocp.RoleMaster:
				masters = append(masters, "--master "+n.IP.String())
			case ocp.RoleBootstrap:
				bootstrap = n.IP.String()
			}
		}
		return false, fmt.Errorf("%w\nthe bootstrap did not complete; everything is kept. Logs: %s (the installer's), %s (what it printed, every run) and the nodes' consoles in %s. Gather the bootstrap's: openshift-install gather bootstrap --dir %s --bootstrap %s %s",
			err, p.Paths.InstallerLog, p.Paths.InstallerOutput, p.Paths.Logs, p.Installer.Dir, bootstrap, strings.Join(masters, " "))
	}
	return true, os.WriteFile(p.Paths.BootstrapComplete, nil, 0o644)
}

// Delete forgets the marker.
func (bootstrapComplete) Delete(_ context.Context, e *lab.Env) error {
	return lab.RemoveFiles([]string{e.Plan.Paths.BootstrapComplete, e.Plan.Paths.BootstrapRemoved}, "")
}

// removeBootstrap deletes the bootstrap's domain, its disks and its
// ignition, and nothing else; only after bootstrap-complete.
type removeBootstrap struct{ multiNode }

func (removeBootstrap) Name() string { return "remove-bootstrap" }

func (removeBootstrap) Ensure(ctx context.Context, e *lab.Env) (bool, error) {
	p := e.Plan
	if !lab.Exists(p.Paths.BootstrapComplete) {
		return false, errors.New("the bootstrap has not completed; it stays")
	}
	b := nodesOf(p, ocp.RoleBootstrap)
	if len(b) != 1 {
		return false, errors.New("the plan has no bootstrap node")
	}
	n := b[0]
	found, _, err := e.Host.Owner(ctx, lab.KindDomain, n.Name)
	if err != nil {
		return false, err
	}
	if err := e.Host.Delete(ctx, lab.KindDomain, n.Name, p.Lab); err != nil {
		return false, err
	}
	for _, d := range n.Disks {
		if err := e.Host.Delete(ctx, lab.KindVolume, p.Storage.Pool+"/"+d.Volume, p.Lab); err != nil {
			return found, err
		}
	}
	gone := !lab.Exists(n.Ignition)
	if err := lab.RemoveFiles([]string{n.Ignition}, ""); err != nil {
		return found, err
	}
	if err := os.WriteFile(p.Paths.BootstrapRemoved, nil, 0o644); err != nil {
		return found, err
	}
	return found || !gone, nil
}

func (removeBootstrap) Delete(context.Context, *lab.Env) error { return nil }
func (removeBootstrap) CreatesNothing()                        {}
