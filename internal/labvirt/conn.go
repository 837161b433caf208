package labvirt

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/virt"
)

// Conn is a connection to one libvirtd with the lab-building tasks as
// methods. It is the only way into libvirt outside this package and
// internal/virt: callers never hold a *libvirt.Libvirt.
type Conn struct {
	l   *libvirt.Libvirt
	uri string
}

// Dial connects to the libvirt URI (qemu:///system, qemu+tcp://… and the
// others virt.DialerFor knows).
func Dial(ctx context.Context, uri string) (*Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d, target, err := virt.DialerFor(uri)
	if err != nil {
		return nil, err
	}
	l := libvirt.NewWithDialer(d)
	if err := l.ConnectToURI(target); err != nil {
		return nil, fmt.Errorf("connect to libvirtd at %s: %w", uri, err)
	}
	return &Conn{l: l, uri: uri}, nil
}

// Wrap gives the lab-building tasks to a connection made elsewhere (a
// test's, or the BMC backend's); Close then leaves it open.
func Wrap(l *libvirt.Libvirt) *Conn { return &Conn{l: l} }

// Close disconnects a connection Dial made.
func (c *Conn) Close() error {
	if c.uri == "" {
		return nil
	}
	return c.l.Disconnect()
}

// URI is the libvirt URI Dial connected to.
func (c *Conn) URI() string { return c.uri }

// DefineDomain defines a node's domain (shut off) and returns its UUID.
func (c *Conn) DefineDomain(ctx context.Context, s DomainSpec) (string, error) {
	return defineDomain(ctx, c.l, s, virt.DetectFirmware())
}

// DeleteDomain destroys and undefines a domain, with its NVRAM.
func (c *Conn) DeleteDomain(ctx context.Context, name string) error {
	return deleteDomain(ctx, c.l, name)
}

// DomainOwner says whether a domain exists and whose mark it bears.
func (c *Conn) DomainOwner(ctx context.Context, name string) (bool, string, error) {
	return domainOwner(ctx, c.l, name)
}

// MarkedDomains lists the domains that bear lab's mark.
func (c *Conn) MarkedDomains(ctx context.Context, lab string) ([]string, error) {
	return markedDomains(ctx, c.l, lab)
}

// DomainMarks are the marks' attributes of every marked domain.
func (c *Conn) DomainMarks(ctx context.Context) (map[string]map[string]string, error) {
	return domainMarks(ctx, c.l)
}

// StartDomain starts a domain (false when it runs already).
func (c *Conn) StartDomain(ctx context.Context, name string) (bool, error) {
	return startDomain(ctx, c.l, name)
}

// DomainPower is a domain's power state.
func (c *Conn) DomainPower(ctx context.Context, name string) (string, error) {
	return domainPower(ctx, c.l, name)
}

// SetNodeBMC records a node's IPMI port (0: none) and its own BMC user
// (empty: none) with its domain, where vbmcd reads them (virt owns the
// format), and reports whether they changed.
func (c *Conn) SetNodeBMC(_ context.Context, name string, ipmiPort int, user, password string) (bool, error) {
	var want virt.NodeBMC
	if ipmiPort > 0 {
		want.IPMI = &machine.IPMIEndpoint{Port: ipmiPort}
	}
	if user != "" {
		want.Users = []machine.Credential{{Username: user, Password: password}}
	}
	return virt.SetNodeBMC(c.l, name, want)
}

// NetworkOwner says whether a libvirt network exists and whose mark it
// bears.
func (c *Conn) NetworkOwner(ctx context.Context, name string) (bool, string, error) {
	return networkOwnerOf(ctx, c.l, name)
}

// MarkedNetworks lists the libvirt networks that bear lab's mark.
func (c *Conn) MarkedNetworks(ctx context.Context, lab string) ([]string, error) {
	return markedNetworks(ctx, c.l, lab)
}

// NetworkState is what libvirt shows of a network.
func (c *Conn) NetworkState(ctx context.Context, name string) (NetworkState, error) {
	return getNetworkState(ctx, c.l, name)
}

// EnsureNetwork makes a bridge-named network as spec says.
func (c *Conn) EnsureNetwork(ctx context.Context, spec NetworkSpec) (bool, error) {
	return ensureNetwork(ctx, c.l, spec)
}

// DeleteNetwork removes a network of lab's.
func (c *Conn) DeleteNetwork(ctx context.Context, name, lab string) (bool, error) {
	return deleteNetwork(ctx, c.l, name, lab)
}

// EnsureLabNetwork makes the lab's NAT network as spec says.
func (c *Conn) EnsureLabNetwork(ctx context.Context, spec LabNetworkSpec) (bool, error) {
	return ensureLabNetwork(ctx, c.l, spec)
}

// LabNetworkDrift lists how the lab's NAT network differs from spec.
func (c *Conn) LabNetworkDrift(ctx context.Context, spec LabNetworkSpec) ([]string, error) {
	return labNetworkDrift(ctx, c.l, spec)
}

// EnsureShared adds the lab's entries to a shared network.
func (c *Conn) EnsureShared(ctx context.Context, spec SharedSpec) ([]string, error) {
	return ensureShared(ctx, c.l, spec)
}

// SharedProblems lists how a shared network lacks the lab's entries.
func (c *Conn) SharedProblems(ctx context.Context, spec SharedSpec) ([]string, error) {
	return sharedProblems(ctx, c.l, spec)
}

// RemoveShared removes the lab's entries from a shared network.
func (c *Conn) RemoveShared(ctx context.Context, network, lab string) (bool, error) {
	return removeShared(ctx, c.l, network, lab)
}

// SharedNetworks lists every libvirt network with the labs' entries in it.
func (c *Conn) SharedNetworks(ctx context.Context) ([]SharedNetwork, error) {
	return sharedNetworks(ctx, c.l)
}

// NetworkCIDRs are the addresses of every libvirt network, by name.
func (c *Conn) NetworkCIDRs(context.Context) (map[string][]netip.Prefix, error) {
	nets, _, err := c.l.ConnectListAllNetworks(1, 0)
	if err != nil {
		return nil, fmt.Errorf("list libvirt networks: %w", err)
	}
	out := map[string][]netip.Prefix{}
	for _, n := range nets {
		x, err := c.l.NetworkGetXMLDesc(n, 0)
		if err != nil {
			continue // gone meanwhile
		}
		var def libvirtxml.Network
		if def.Unmarshal(x) != nil {
			continue
		}
		for _, ip := range def.IPs {
			a, err := netip.ParseAddr(ip.Address)
			if err != nil {
				continue
			}
			bits := int(ip.Prefix)
			if bits == 0 && ip.Netmask != "" {
				if m, err := netip.ParseAddr(ip.Netmask); err == nil {
					bits = maskBits(m)
				}
			}
			if p, err := a.Prefix(bits); err == nil {
				out[n.Name] = append(out[n.Name], p)
			}
		}
	}
	return out, nil
}

func maskBits(m netip.Addr) int {
	n := 0
	for _, b := range m.AsSlice() {
		for ; b&0x80 != 0; b <<= 1 {
			n++
		}
	}
	return n
}

// PoolOwner says whether a pool exists and whose mark it bears.
func (c *Conn) PoolOwner(ctx context.Context, name string) (bool, string, error) {
	return poolOwner(ctx, c.l, name)
}

// MarkedPools lists lab's pools, and the pools whose directory is gone.
func (c *Conn) MarkedPools(ctx context.Context, lab string) ([]string, []DanglingPool, error) {
	return markedPools(ctx, c.l, lab)
}

// EnsurePool makes the lab's directory pool.
func (c *Conn) EnsurePool(ctx context.Context, spec PoolSpec) (bool, error) {
	return ensurePool(ctx, c.l, spec)
}

// DeletePool removes a pool of lab's with its volumes.
func (c *Conn) DeletePool(ctx context.Context, name, lab string) (bool, error) {
	return deletePool(ctx, c.l, name, lab)
}

// DeleteDanglingPool undefines a pool whose directory is gone.
func (c *Conn) DeleteDanglingPool(ctx context.Context, name string) (bool, error) {
	return deleteDanglingPool(ctx, c.l, name)
}

// EnsureVolume makes a thin volume and returns its path.
func (c *Conn) EnsureVolume(ctx context.Context, spec VolumeSpec) (string, bool, error) {
	return ensureVolume(ctx, c.l, spec)
}

// DeleteVolume removes a volume of lab's.
func (c *Conn) DeleteVolume(ctx context.Context, pool, name, lab string) (bool, error) {
	return deleteVolume(ctx, c.l, pool, name, lab)
}

// RemotePoolState is what libvirt alone shows of a pool (no file read).
func (c *Conn) RemotePoolState(ctx context.Context, name string) (RemotePool, error) {
	return remotePoolState(ctx, c.l, name)
}
