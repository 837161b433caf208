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

// MultiHost is the Host of a lab spread over several libvirt hosts (the
// plan's Hosts). Each call goes where its object lives: a node's domain
// and volumes to the node's host; the storage pool and the bridge-named
// libvirt networks to every host; the NAT network, the links, vbmcd and the
// BMC check to the hub, where labctl runs. Links of the other hosts are
// not reachable from here (netlink is local): `labctl net repair --host
// NAME` makes them on their host. Listing calls (Marked, DomainMarks,
// DanglingPools) merge every host's answer.
type MultiHost struct {
	hub    *RealHost
	hosts  map[string]*RealHost // by host name, the hub too
	order  []string
	byNode map[string]string // node name, volume name or UUID -> host name
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
			m.hub = rh
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

// Owner implements Host.
func (m *MultiHost) Owner(ctx context.Context, kind Kind, name string) (bool, string, error) {
	if kind == KindDomain {
		return m.of(name).Owner(ctx, kind, name)
	}
	return m.hub.Owner(ctx, kind, name)
}

// Marked implements Host.
func (m *MultiHost) Marked(ctx context.Context, kind Kind, lab string) ([]string, error) {
	if kind == KindLink {
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

// Delete implements Host: on every host, where absent is success.
func (m *MultiHost) Delete(ctx context.Context, kind Kind, name, lab string) error {
	if kind == KindLink {
		return m.hub.Delete(ctx, kind, name, lab)
	}
	return m.each(func(h *RealHost) error { return h.Delete(ctx, kind, name, lab) })
}

// EnsureNAT implements Host: the hub only.
func (m *MultiHost) EnsureNAT(ctx context.Context, spec labvirt.LabNetworkSpec) (bool, error) {
	return m.hub.EnsureNAT(ctx, spec)
}

// EnsureBridgeNetwork implements Host: on every host.
func (m *MultiHost) EnsureBridgeNetwork(ctx context.Context, spec labvirt.NetworkSpec) (bool, error) {
	changed := false
	err := m.each(func(h *RealHost) error {
		c, err := h.EnsureBridgeNetwork(ctx, spec)
		changed = changed || c
		return err
	})
	return changed, err
}

// NetworkCIDRs implements Host: the hub's, where the NAT network is.
func (m *MultiHost) NetworkCIDRs(ctx context.Context) (map[string][]netip.Prefix, error) {
	return m.hub.NetworkCIDRs(ctx)
}

// EnsureLinks implements Host: the hub's links (t is Plan.HubTopology).
func (m *MultiHost) EnsureLinks(ctx context.Context, lab string, t netplumb.Topology) (bool, error) {
	return m.hub.EnsureLinks(ctx, lab, t)
}

// LinkDifferences implements Host: the hub's links.
func (m *MultiHost) LinkDifferences(ctx context.Context, lab string, t netplumb.Topology) ([]netplumb.Difference, error) {
	return m.hub.LinkDifferences(ctx, lab, t)
}

// EnsurePool implements Host: on every host.
func (m *MultiHost) EnsurePool(ctx context.Context, spec labvirt.PoolSpec) (bool, error) {
	changed := false
	err := m.each(func(h *RealHost) error {
		c, err := h.EnsurePool(ctx, spec)
		changed = changed || c
		return err
	})
	return changed, err
}

// EnsureVolume implements Host: on the volume's node's host.
func (m *MultiHost) EnsureVolume(ctx context.Context, spec labvirt.VolumeSpec) (bool, error) {
	return m.of(spec.Name).EnsureVolume(ctx, spec)
}

// DanglingPools implements Host: every host's.
func (m *MultiHost) DanglingPools(ctx context.Context) ([]labvirt.DanglingPool, error) {
	var out []labvirt.DanglingPool
	err := m.each(func(h *RealHost) error {
		d, err := h.DanglingPools(ctx)
		out = append(out, d...)
		return err
	})
	return out, err
}

// DeleteDanglingPool implements Host: on every host that has it.
func (m *MultiHost) DeleteDanglingPool(ctx context.Context, name string) error {
	return m.each(func(h *RealHost) error {
		d, err := h.DanglingPools(ctx)
		if err != nil || !slices.ContainsFunc(d, func(p labvirt.DanglingPool) bool { return p.Name == name }) {
			return err
		}
		return h.DeleteDanglingPool(ctx, name)
	})
}

// DefineDomain implements Host: on the node's host.
func (m *MultiHost) DefineDomain(ctx context.Context, spec labvirt.DomainSpec) error {
	return m.of(spec.Name).DefineDomain(ctx, spec)
}

// DomainMarks implements Host: every host's.
func (m *MultiHost) DomainMarks(ctx context.Context) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	err := m.each(func(h *RealHost) error {
		marks, err := h.DomainMarks(ctx)
		maps.Copy(out, marks)
		return err
	})
	return out, err
}

// Start implements Host.
func (m *MultiHost) Start(ctx context.Context, name string) (bool, error) {
	return m.of(name).Start(ctx, name)
}

// Power implements Host.
func (m *MultiHost) Power(ctx context.Context, name string) (string, error) {
	return m.of(name).Power(ctx, name)
}

// SetIPMIPort implements Host.
func (m *MultiHost) SetIPMIPort(ctx context.Context, uuid string, port int) (bool, error) {
	return m.of(uuid).SetIPMIPort(ctx, uuid, port)
}

// Daemons implements Host: vbmcd runs on the hub.
func (m *MultiHost) Daemons(ctx context.Context, lab string) ([]Daemon, error) {
	return m.hub.Daemons(ctx, lab)
}

// StartDaemon implements Host.
func (m *MultiHost) StartDaemon(ctx context.Context, v plan.Vbmcd, netns string) (Daemon, error) {
	return m.hub.StartDaemon(ctx, v, netns)
}

// StopDaemon implements Host.
func (m *MultiHost) StopDaemon(ctx context.Context, pid int) error {
	return m.hub.StopDaemon(ctx, pid)
}

// CheckBMCs implements Host: from the hub, where vbmcd serves every host.
func (m *MultiHost) CheckBMCs(ctx context.Context, p *plan.Plan, wait time.Duration) error {
	return m.hub.CheckBMCs(ctx, p, wait)
}
