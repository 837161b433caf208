package labvirt

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/plan"
)

// MultiHost is the provider of a lab spread over several libvirt hosts
// (the plan's Hosts). Each call goes where its object lives: a node's
// domain to the node's host; the bridge-named libvirt networks to every
// host; the NAT network, the links, the storage pool, vbmcd and the BMC
// check to the hub, where labctl runs. Listing calls (Marked, the survey's
// marks) merge every host's answer, except for links, pools and daemons.
//
// What needs a host's own kernel or files (its links, the pool's directory
// and the lab's mark in it, hence its volumes) is made by labctl on that
// host: the hosts step runs it there. MultiHost never writes another
// host's pool or volumes; it reads them through libvirt alone (HostView,
// and Ensure's check of a volume there), since this process's files are
// not that host's.
type MultiHost struct {
	hubName string
	hub     *Host
	hosts   map[string]*Host // by host name, the hub too
	order   []string
	byNode  map[string]string // node name, volume name or UUID -> host name
}

// OpenHosts connects to every host of the plan.
func OpenHosts(ctx context.Context, p *plan.Plan, log *zap.Logger) (*MultiHost, error) {
	m := &MultiHost{hosts: map[string]*Host{}, byNode: map[string]string{}}
	for _, h := range p.Hosts {
		rh, err := OpenAt(ctx, p, h.LibvirtURI, log.With(zap.String("host", h.Name)))
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
func (m *MultiHost) of(name string) *Host {
	if h, ok := m.hosts[m.byNode[name]]; ok {
		return h
	}
	return m.hub
}

// each calls fn on every host, in the plan's order.
func (m *MultiHost) each(fn func(name string, h *Host) error) error {
	var errs []error
	for _, name := range m.order {
		if err := fn(name, m.hosts[name]); err != nil {
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

// everywhere says whether objects of a kind live on every host (domains
// and libvirt networks) rather than on the hub alone.
func everywhere(kind lab.Kind) bool { return kind == lab.KindDomain || kind == lab.KindNetwork }

// Owner implements lab.Provider: a domain on its node's host, the rest on
// the hub.
func (m *MultiHost) Owner(ctx context.Context, kind lab.Kind, name string) (bool, string, error) {
	if kind == lab.KindDomain {
		return m.of(name).Owner(ctx, kind, name)
	}
	return m.hub.Owner(ctx, kind, name)
}

// Marked implements lab.Provider: domains and libvirt networks every
// host's, the rest the hub's (the hosts step checks the others').
func (m *MultiHost) Marked(ctx context.Context, kind lab.Kind, labName string) ([]string, error) {
	if !everywhere(kind) {
		return m.hub.Marked(ctx, kind, labName)
	}
	var out []string
	err := m.each(func(_ string, h *Host) error {
		names, err := h.Marked(ctx, kind, labName)
		for _, n := range names {
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
		return err
	})
	return out, err
}

// Delete implements lab.Provider: domains and libvirt networks on every
// host, where absent is success; the rest on the hub.
func (m *MultiHost) Delete(ctx context.Context, kind lab.Kind, name, labName string) error {
	if !everywhere(kind) {
		return m.hub.Delete(ctx, kind, name, labName)
	}
	return m.each(func(_ string, h *Host) error { return h.Delete(ctx, kind, name, labName) })
}

// Validate implements lab.Provider.
func (m *MultiHost) Validate(o lab.Object) error { return m.hub.Validate(o) }

// Ensure implements lab.Provider: the bridge-named networks on every host;
// a node's domain, volumes and BMC settings on its host, where labctl
// there made the domain and volumes (the hosts step) and this checks them;
// the rest on the hub.
func (m *MultiHost) Ensure(ctx context.Context, o lab.Object) ([]string, error) {
	switch o := o.(type) {
	case lab.BridgeNetwork:
		var done []string
		err := m.each(func(_ string, h *Host) error {
			c, err := h.Ensure(ctx, o)
			done = append(done, c...)
			return err
		})
		return done, err
	case lab.Volume:
		host, ok := m.spoke(o.Disk.Volume)
		if !ok {
			break
		}
		v, err := m.HostView(ctx, host, o.Lab, o.Pool)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(v.Pool.Volumes, o.Disk.Volume) {
			return nil, fmt.Errorf("host %s has no volume %s/%s: the hosts step (labctl up --host %s there) makes it", host, o.Pool, o.Disk.Volume, host)
		}
		return nil, nil
	case lab.Machine:
		// A node of another host is defined by labctl there (its serial
		// log's directory is there).
		if host, ok := m.spoke(o.Node.Name); ok {
			return nil, fmt.Errorf("host %s has no domain %s: the hosts step (labctl up --host %s there) defines it", host, o.Node.Name, host)
		}
	case lab.MachineBMC:
		return m.of(o.Node).Ensure(ctx, o)
	}
	return m.hub.Ensure(ctx, o)
}

// Differences implements lab.Provider: a bridge-named network's on every
// host, each named; a node's NICs on its host; the rest the hub's.
func (m *MultiHost) Differences(ctx context.Context, o lab.Object) ([]lab.Difference, error) {
	if mc, ok := o.(lab.Machine); ok {
		return m.of(mc.Node.Name).Differences(ctx, o)
	}
	if _, ok := o.(lab.BridgeNetwork); !ok {
		return m.hub.Differences(ctx, o)
	}
	var out []lab.Difference
	err := m.each(func(name string, h *Host) error {
		ds, err := h.Differences(ctx, o)
		for _, d := range ds {
			d.Got = "on " + name + ": " + d.Got
			out = append(out, d)
		}
		return err
	})
	return out, err
}

// Power implements lab.Provider.
func (m *MultiHost) Power(ctx context.Context, name string) (string, error) {
	return m.of(name).Power(ctx, name)
}

// Start implements lab.Provider.
func (m *MultiHost) Start(ctx context.Context, name string) (bool, error) {
	return m.of(name).Start(ctx, name)
}

// Survey implements lab.Provider: every host's marks; the hub's networks
// and pools (where the NAT network and the pool's directory are).
func (m *MultiHost) Survey(ctx context.Context, kinds ...lab.Kind) (*lab.Survey, error) {
	s, err := m.hub.Survey(ctx, kinds...)
	if err != nil || (len(kinds) > 0 && !slices.Contains(kinds, lab.KindDomain)) {
		return s, err
	}
	s.Marks = map[string]map[string]string{}
	err = m.each(func(_ string, h *Host) error {
		hs, err := h.Survey(ctx, lab.KindDomain)
		if hs != nil {
			maps.Copy(s.Marks, hs.Marks)
		}
		return err
	})
	return s, err
}

// HostView implements lab.Spokes.
func (m *MultiHost) HostView(ctx context.Context, host, labName, pool string) (lab.HostView, error) {
	h, ok := m.hosts[host]
	if !ok {
		return lab.HostView{}, fmt.Errorf("no host %q in the plan", host)
	}
	return h.view(ctx, labName, pool)
}

var (
	_ lab.Provider = (*MultiHost)(nil)
	_ lab.Spokes   = (*MultiHost)(nil)
)
