package lab

import (
	"context"
	"errors"

	"github.com/bmlab/bmlab/internal/labvirt"
	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/plan"
)

// network ensures, in dependency order: the lab's NAT network (its bridge
// is the veth's far end), the bridges and veths, a libvirt network named
// like each lab bridge (what the installer's bridge check accepts), and
// NetworkManager's unmanaged-devices snippet where NetworkManager is.
type network struct{}

func (network) Name() string { return "network" }

func (network) Ensure(ctx context.Context, e *Env) (bool, error) {
	p := e.Plan
	changed := false
	if p.Network.NAT != nil {
		c, err := e.Host.EnsureNAT(ctx, NATSpec(p))
		if err != nil {
			return false, err
		}
		changed = c
	}
	c, err := e.Host.EnsureLinks(ctx, p.Lab, p.HubTopology())
	if err != nil {
		return changed, err
	}
	changed = changed || c
	for _, name := range p.Network.BridgeNetworks {
		c, err := e.Host.EnsureBridgeNetwork(ctx, labvirt.NetworkSpec{Name: name, Bridge: name, Lab: p.Lab})
		if err != nil {
			return changed, err
		}
		changed = changed || c
	}
	if netplumb.NetworkManagerPresent(p.Network.NMConfDir) {
		_, c, err := netplumb.WriteUnmanagedSnippet(p.Network.NMConfDir, p.Lab, p.HubTopology().Names())
		if err != nil {
			return changed, err
		}
		changed = changed || c
	}
	return changed, nil
}

// Delete removes the lab's libvirt networks (bridge-named and NAT: they sit
// on the bridges), then its links, whatever the plan says: everything that
// bears the lab's mark.
func (network) Delete(ctx context.Context, e *Env) error {
	p := e.Plan
	marked, err := e.Host.Marked(ctx, KindNetwork, p.Lab)
	if err != nil {
		return err
	}
	names := p.Network.BridgeNetworks
	if p.Network.NAT != nil {
		// The NAT network last: the bridge networks' veth is on its bridge.
		names = append(names[:len(names):len(names)], p.Network.NAT.Name)
	}
	var errs []error
	for _, name := range union(names, marked) {
		if err := e.Host.Delete(ctx, KindNetwork, name, p.Lab); err != nil && !errors.Is(err, ErrForeign) {
			errs = append(errs, err)
		} else if err != nil {
			e.Rep.Note("remove network", "left "+name+" alone: "+err.Error())
		}
	}
	links, err := e.Host.Marked(ctx, KindLink, p.Lab)
	if err != nil {
		return err
	}
	for _, name := range links {
		if err := e.Host.Delete(ctx, KindLink, name, p.Lab); err != nil {
			errs = append(errs, err)
		}
	}
	if _, _, err := netplumb.RemoveUnmanagedSnippet(p.Network.NMConfDir, p.Lab); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return errors.Join(remaining(ctx, e, KindNetwork), remaining(ctx, e, KindLink))
}

// NATSpec is the plan's NAT network as libvirt builds it.
func NATSpec(p *plan.Plan) labvirt.LabNetworkSpec {
	nat := p.Network.NAT
	spec := labvirt.LabNetworkSpec{
		Name: nat.Name, Bridge: nat.Bridge, Lab: p.Lab,
		CIDR: nat.CIDR, DHCPStart: nat.DHCPStart, DHCPEnd: nat.DHCPEnd,
		MTU: uint(nat.MTU), Domain: nat.Domain, APIVIP: nat.APIVIP, IngressVIP: nat.IngressVIP,
	}
	for _, n := range p.Nodes {
		spec.Hosts = append(spec.Hosts, labvirt.LabHost{MAC: n.MAC, IP: n.IP, Hostname: n.Name})
	}
	return spec
}
