package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/bmlab/bmlab/internal/plan"
)

// nodes defines a UEFI domain per node, shut off, with its disks, its boot
// NIC, an empty CD-ROM drive for virtual media, a serial log and the lab's
// mark.
type nodes struct{}

func (nodes) Name() string { return "nodes" }

func (nodes) Ensure(ctx context.Context, e *Env) (bool, error) {
	return ensureDomains(ctx, e, e.Plan.Nodes)
}

func ensureDomains(ctx context.Context, e *Env, list []plan.Node) (bool, error) {
	p := e.Plan
	changed := false
	for _, n := range list {
		found, owner, err := e.Host.Owner(ctx, KindDomain, n.Name)
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
		if _, err := e.Host.Ensure(ctx, MachineOf(p, n)); err != nil {
			return changed, err
		}
		changed = true
	}
	return changed, nil
}

// MachineOf is a node's machine as the plan declares it.
func MachineOf(p *plan.Plan, n plan.Node) Machine {
	m := Machine{Lab: p.Lab, Node: n, Network: p.Network.NodeNetwork, Attrs: markAttrs(p)}
	if h := p.Hybrid; h != nil && h.SingleNode {
		// As kcli's sno VM: the live ISO with the embedded ignition in the
		// CD drive, behind the blank disk the ISO installs onto; the
		// firmware passes the blank disk over, and the installed one once
		// it boots.
		m.CDROM = h.BootISO
	}
	return m
}

// markAttrs are what a hybrid lab's domains tell other labs: the segment
// and the VIPs and router IDs the cluster holds on it; and what its down
// needs without the lab file: the hosts file that has the lab's entries.
func markAttrs(p *plan.Plan) []string {
	if p.Hybrid == nil {
		return nil
	}
	k := p.Cluster
	if p.Hybrid.SingleNode {
		// No VIP and no VRRP: nothing another lab on the segment could
		// clash with.
		return []string{"segment", p.Hybrid.Segment, "hostsFile", p.Paths.HostsFile}
	}
	attrs := []string{
		"segment", p.Hybrid.Segment,
		"apiVIP", k.APIVIP.String(), "ingressVIP", k.IngressVIP.String(),
		"apiRouterID", strconv.Itoa(p.Hybrid.APIRouterID), "ingressRouterID", strconv.Itoa(p.Hybrid.IngressRouterID),
		"hostsFile", p.Paths.HostsFile,
	}
	if f := k.Secondary; f != nil {
		attrs = append(attrs, "apiVIPV6", f.APIVIP.String(), "ingressVIPV6", f.IngressVIP.String())
	}
	return attrs
}

// Delete removes the lab's domains: the plan's and any other that bears
// the lab's mark.
func (nodes) Delete(ctx context.Context, e *Env) error {
	marked, err := e.Host.Marked(ctx, KindDomain, e.Plan.Lab)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range union(e.Plan.NodeNames(), marked) {
		if err := e.Host.Delete(ctx, KindDomain, name, e.Plan.Lab); errors.Is(err, ErrForeign) {
			e.Rep.Note("remove nodes", "left "+name+" alone: it is not this lab's")
		} else if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return remaining(ctx, e, KindDomain)
}
