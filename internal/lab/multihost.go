package lab

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/labvirt"
	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/plan"
)

// MultiHost is the Provider of a lab spread over several libvirt hosts (the
// plan's Hosts). Each call goes where its object lives: a node's domain to
// the node's host; the bridge-named libvirt networks to every host; the NAT
// network, the links, the storage pool, vbmcd and the BMC check to the hub,
// where labctl runs. Listing calls (Marked, DomainMarks) merge every host's
// answer, except for links and pools.
//
// What needs a host's own kernel or files (its links, the pool's directory
// and the lab's mark in it, hence its volumes) is made by labctl on that
// host: the hosts step runs it there (lab.hosts). MultiHost never writes
// another host's pool or volumes; it reads them through libvirt alone
// (HostView, EnsureVolume's check), since this process's files are not that
// host's.
type MultiHost struct {
	hubName string
	hub     *RealHost
	hosts   map[string]*RealHost // by host name, the hub too
	order   []string
	byNode  map[string]string // node name, volume name or UUID -> host name
}

// OpenHosts connects to every host of the plan.
func OpenHosts(ctx context.Context, p *plan.Plan, log *zap.Logger) (*MultiHost, error) {
	m := &MultiHost{hosts: map[string]*RealHost{}, byNode: map[string]string{}}
	for _, h := range p.Hosts {
		rh, err := openHostAt(ctx, p, h.LibvirtURI, log.With(zap.String("host", h.Name)))
		if err != nil {
			m.Close()
			return nil, fmt.Errorf("host %s: %w", h.Name, err)
		}
		m.hosts[h.Name] = rh
		m.order = append(m.order, h.Name)
		if h.Hub {
			m.hub, m.hubName = rh, h.Name
		}
	}
	if m.hub == nil {
		m.Close()
		return nil, errors.New("the plan has no hub host")
	}
	for _, n := range p.Nodes {
		m.byNode[n.Name], m.byNode[n.UUID] = n.Host, n.Host
		for _, d := range n.Disks {
			m.byNode[d.Volume] = n.Host
		}
	}
	return m, nil
}

// Close ends every connection.
func (m *MultiHost) Close() {
	for _, h := range m.hosts {
		h.Close()
	}
}

// of returns the host of a node, volume or UUID; the hub for others.
func (m *MultiHost) of(name string) *RealHost {
	if h, ok := m.hosts[m.byNode[name]]; ok {
		return h
	}
	return m.hub
}

// each calls fn on every host, in the plan's order.
func (m *MultiHost) each(fn func(h *RealHost) error) error {
	var errs []error
	for _, name := range m.order {
		if err := fn(m.hosts[name]); err != nil {
			errs = append(errs, fmt.Errorf("host %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// spoke says whether a node, volume or UUID is on a host other than the hub.
func (m *MultiHost) spoke(name string) (string, bool) {
	h, ok := m.byNode[name]
	return h, ok && h != m.hubName
}

// Owner implements Provider.
func (m *MultiHost) Owner(ctx context.Context, kind Kind, name string) (bool, string, error) {
	if kind == KindDomain {
		return m.of(name).Owner(ctx, kind, name)
	}
	return m.hub.Owner(ctx, kind, name)
}

// Marked implements Provider: links and pools the hub's (the hosts step
// checks the others'), domains and libvirt networks every host's.
func (m *MultiHost) Marked(ctx context.Context, kind Kind, lab string) ([]string, error) {
	if kind == KindLink || kind == KindPool {
		return m.hub.Marked(ctx, kind, lab)
	}
	var out []string
	err := m.each(func(h *RealHost) error {
		names, err := h.Marked(ctx, kind, lab)
		for _, n := range names {
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
		return err
	})
	return out, err
}

// Delete implements Provider: domains and libvirt networks on every host,
// where absent is success; links, pools and volumes on the hub.
func (m *MultiHost) Delete(ctx context.Context, kind Kind, name, lab string) error {
	if kind == KindLink || kind == KindPool || kind == KindVolume {
		return m.hub.Delete(ctx, kind, name, lab)
	}
	return m.each(func(h *RealHost) error { return h.Delete(ctx, kind, name, lab) })
}

// EnsureNAT implements Provider: the hub only.
func (m *MultiHost) EnsureNAT(ctx context.Context, spec labvirt.LabNetworkSpec) (bool, error) {
	return m.hub.EnsureNAT(ctx, spec)
}

// EnsureBridgeNetwork implements Provider: on every host.
func (m *MultiHost) EnsureBridgeNetwork(ctx context.Context, spec labvirt.NetworkSpec) (bool, error) {
	changed := false
	err := m.each(func(h *RealHost) error {
		c, err := h.EnsureBridgeNetwork(ctx, spec)
		changed = changed || c
		return err
	})
	return changed, err
}

// NetworkCIDRs implements Provider: the hub's, where the NAT network is.
func (m *MultiHost) NetworkCIDRs(ctx context.Context) (map[string][]netip.Prefix, error) {
	return m.hub.NetworkCIDRs(ctx)
}

// EnsureLinks implements Networks: the hub's links (t is
// Plan.HubTopology).
func (m *MultiHost) EnsureLinks(ctx context.Context, lab string, t netplumb.Topology) ([]string, error) {
	return m.hub.EnsureLinks(ctx, lab, t)
}

// WaitAddress implements Networks: on the hub, where the NAT network is.
func (m *MultiHost) WaitAddress(ctx context.Context, link string, addr netip.Addr) error {
	return m.hub.WaitAddress(ctx, link, addr)
}

// EnsureShared implements Networks: the hub's, as the NAT network.
func (m *MultiHost) EnsureShared(ctx context.Context, spec labvirt.SharedSpec) ([]string, error) {
	return m.hub.EnsureShared(ctx, spec)
}

// SharedProblems implements Networks: the hub's.
func (m *MultiHost) SharedProblems(ctx context.Context, spec labvirt.SharedSpec) ([]string, error) {
	return m.hub.SharedProblems(ctx, spec)
}

// SharedNetworks implements Networks: the hub's.
func (m *MultiHost) SharedNetworks(ctx context.Context) ([]labvirt.SharedNetwork, error) {
	return m.hub.SharedNetworks(ctx)
}

// RemoveShared implements Networks: the hub's.
func (m *MultiHost) RemoveShared(ctx context.Context, network, lab string) (bool, error) {
	return m.hub.RemoveShared(ctx, network, lab)
}

// NATProblems implements Networks: the hub's.
func (m *MultiHost) NATProblems(ctx context.Context, spec labvirt.LabNetworkSpec) ([]string, error) {
	return m.hub.NATProblems(ctx, spec)
}

// BridgeNetworkProblems implements Networks: every host's, each named.
func (m *MultiHost) BridgeNetworkProblems(ctx context.Context, spec labvirt.NetworkSpec) ([]string, error) {
	var out []string
	err := m.each(func(h *RealHost) error {
		ps, err := h.BridgeNetworkProblems(ctx, spec)
		for _, p := range ps {
			out = append(out, "on "+m.nameOf(h)+": "+p)
		}
		return err
	})
	return out, err
}

func (m *MultiHost) nameOf(h *RealHost) string {
	for name, x := range m.hosts {
		if x == h {
			return name
		}
	}
	return "?"
}

// Objects implements Provider.
func (m *MultiHost) Objects() Objects { return m }

// Nodes implements Provider.
func (m *MultiHost) Nodes() Nodes { return m }

// Storage implements Provider.
func (m *MultiHost) Storage() Storage { return m }

// Networks implements Provider.
func (m *MultiHost) Networks() Networks { return m }

// BMCs implements Provider.
func (m *MultiHost) BMCs() BMCs { return m }

// LinkDifferences implements Provider: the hub's links.
func (m *MultiHost) LinkDifferences(ctx context.Context, lab string, t netplumb.Topology) ([]netplumb.Difference, error) {
	return m.hub.LinkDifferences(ctx, lab, t)
}

// EnsurePool implements Provider: the hub's (labctl on each other host makes
// its own).
func (m *MultiHost) EnsurePool(ctx context.Context, spec labvirt.PoolSpec) (bool, error) {
	return m.hub.EnsurePool(ctx, spec)
}

// EnsureVolume implements Provider: on the hub, or, for a node on another
// host, a check through libvirt that labctl there made it.
func (m *MultiHost) EnsureVolume(ctx context.Context, spec labvirt.VolumeSpec) (bool, error) {
	host, ok := m.spoke(spec.Name)
	if !ok {
		return m.hub.EnsureVolume(ctx, spec)
	}
	v, err := m.HostView(ctx, host, spec.Lab, spec.Pool)
	if err != nil {
		return false, err
	}
	if !slices.Contains(v.Pool.Volumes, spec.Name) {
		return false, fmt.Errorf("host %s has no volume %s/%s: the hosts step (labctl up --host %s there) makes it", host, spec.Pool, spec.Name, host)
	}
	return false, nil
}

// DanglingPools implements Provider: the hub's.
func (m *MultiHost) DanglingPools(ctx context.Context) ([]labvirt.DanglingPool, error) {
	return m.hub.DanglingPools(ctx)
}

// DeleteDanglingPool implements Provider: the hub's.
func (m *MultiHost) DeleteDanglingPool(ctx context.Context, name string) error {
	return m.hub.DeleteDanglingPool(ctx, name)
}

// DefineDomain implements Provider: on the hub; a node of another host is
// defined by labctl there (its serial log's directory is there).
func (m *MultiHost) DefineDomain(ctx context.Context, spec labvirt.DomainSpec) error {
	if host, ok := m.spoke(spec.Name); ok {
		return fmt.Errorf("host %s has no domain %s: the hosts step (labctl up --host %s there) defines it", host, spec.Name, host)
	}
	return m.hub.DefineDomain(ctx, spec)
}

// HostView implements Spokes.
func (m *MultiHost) HostView(ctx context.Context, host, lab, pool string) (HostView, error) {
	h, ok := m.hosts[host]
	if !ok {
		return HostView{}, fmt.Errorf("no host %q in the plan", host)
	}
	return h.view(ctx, lab, pool)
}

// DomainMarks implements Provider: every host's.
func (m *MultiHost) DomainMarks(ctx context.Context) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	err := m.each(func(h *RealHost) error {
		marks, err := h.DomainMarks(ctx)
		maps.Copy(out, marks)
		return err
	})
	return out, err
}

// Start implements Provider.
func (m *MultiHost) Start(ctx context.Context, name string) (bool, error) {
	return m.of(name).Start(ctx, name)
}

// Power implements Provider.
func (m *MultiHost) Power(ctx context.Context, name string) (string, error) {
	return m.of(name).Power(ctx, name)
}

// SetNodeBMC implements Nodes.
func (m *MultiHost) SetNodeBMC(ctx context.Context, name string, ipmiPort int, user, password string) (bool, error) {
	return m.of(name).SetNodeBMC(ctx, name, ipmiPort, user, password)
}

// Daemons implements Provider: vbmcd runs on the hub.
func (m *MultiHost) Daemons(ctx context.Context, lab string) ([]Daemon, error) {
	return m.hub.Daemons(ctx, lab)
}

// StartDaemon implements Provider.
func (m *MultiHost) StartDaemon(ctx context.Context, v plan.Vbmcd, netns string) (Daemon, error) {
	return m.hub.StartDaemon(ctx, v, netns)
}

// StopDaemon implements Provider.
func (m *MultiHost) StopDaemon(ctx context.Context, pid int) error {
	return m.hub.StopDaemon(ctx, pid)
}

// CheckBMCs implements Provider: from the hub, where vbmcd serves every host.
func (m *MultiHost) CheckBMCs(ctx context.Context, p *plan.Plan, wait time.Duration, progress func(string)) error {
	return m.hub.CheckBMCs(ctx, p, wait, progress)
}
