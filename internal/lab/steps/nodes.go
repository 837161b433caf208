package steps

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/plan"
)

// Nodes defines a UEFI machine per node, shut off, with its disks, its boot
// NIC, an empty CD-ROM drive for virtual media, a serial log and the lab's
// mark.
type Nodes struct{}

func (Nodes) Name() string { return "nodes" }

func (Nodes) Ensure(ctx context.Context, e *lab.Env) (bool, error) {
	var ms []lab.Machine
	for _, n := range e.Plan.Nodes {
		ms = append(ms, MachineOf(e.Plan, n))
	}
	return EnsureMachines(ctx, e, ms)
}

// EnsureMachines defines the machines that are not there yet; one with a
// node's name that is not the lab's stops it.
func EnsureMachines(ctx context.Context, e *lab.Env, ms []lab.Machine) (bool, error) {
	p := e.Plan
	changed := false
	for _, m := range ms {
		n := m.Node
		found, owner, err := e.Host.Owner(ctx, lab.KindDomain, n.Name)
		if err != nil {
			return changed, err
		}
		if found && owner != p.Lab {
			return changed, fmt.Errorf("domain %s exists and is not this lab's (owner %q): rename the lab (name: in the lab file) or remove that domain yourself (virsh undefine --nvram %s)", n.Name, owner, n.Name)
		}
		if found {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(n.SerialLog), 0o755); err != nil {
			return changed, err
		}
		if _, err := e.Host.Ensure(ctx, m); err != nil {
			return changed, err
		}
		changed = true
	}
	return changed, nil
}

// MachineOf is a node's machine as the plan declares it: on the lab's
// node network, with the lab's mark.
func MachineOf(p *plan.Plan, n plan.Node) lab.Machine {
	return lab.Machine{Lab: p.Lab, Node: n, Network: p.Network.NodeNetwork}
}

// Delete removes the lab's domains: the plan's and any other that bears
// the lab's mark.
func (Nodes) Delete(ctx context.Context, e *lab.Env) error {
	marked, err := e.Host.Marked(ctx, lab.KindDomain, e.Plan.Lab)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range lab.Union(e.Plan.NodeNames(), marked) {
		if err := e.Host.Delete(ctx, lab.KindDomain, name, e.Plan.Lab); errors.Is(err, lab.ErrForeign) {
			e.Rep.Note("remove nodes", "left "+name+" alone: it is not this lab's")
		} else if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return lab.Remaining(ctx, e, lab.KindDomain)
}
