package labvirt

import (
	"context"
	"fmt"

	"github.com/digitalocean/go-libvirt"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/virt"
	"github.com/bmlab/bmlab/internal/virt/domain"
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
func (c *Conn) DefineDomain(ctx context.Context, s domain.Spec) (string, error) {
	return domain.Define(ctx, c.l, s, virt.DetectFirmware())
}

// DeleteDomain destroys and undefines a domain, with its NVRAM.
func (c *Conn) DeleteDomain(ctx context.Context, name string) error {
	return domain.Delete(ctx, c.l, name)
}

// MarkedDomains lists the domains that bear lab's mark.
func (c *Conn) MarkedDomains(ctx context.Context, lab string) ([]string, error) {
	return markedDomains(ctx, c.l, lab)
}

// StartDomain starts a domain (false when it runs already).
func (c *Conn) StartDomain(ctx context.Context, name string) (bool, error) {
	return domain.Start(ctx, c.l, name)
}

// DomainPower is a domain's power state.
func (c *Conn) DomainPower(ctx context.Context, name string) (string, error) {
	return domain.Power(ctx, c.l, name)
}

// MarkedNetworks lists the libvirt networks that bear lab's mark.
func (c *Conn) MarkedNetworks(ctx context.Context, lab string) ([]string, error) {
	return markedNetworks(ctx, c.l, lab)
}

// MarkedPools lists lab's pools, and the pools whose directory is gone.
func (c *Conn) MarkedPools(ctx context.Context, lab string) ([]string, []DanglingPool, error) {
	return markedPools(ctx, c.l, lab)
}

// SetNodeBMC records a domain's IPMI port with it (0: none), where vbmcd
// reads it when it starts, and reports whether it changed.
func (c *Conn) SetNodeBMC(_ context.Context, name string, ipmiPort int) (bool, error) {
	return setNodeBMC(c.l, lab.MachineBMC{Node: name, IPMIPort: ipmiPort})
}
