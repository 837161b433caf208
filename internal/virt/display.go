package virt

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"

	"github.com/digitalocean/go-libvirt"
	"go.uber.org/zap"
	"libvirt.org/go/libvirtxml"

	"github.com/bmlab/bmlab/internal/machine"
)

// The graphical console (KVM).
//
// A BMC shows its machine's screen; a domain shows it on a VNC display. The
// one vbmcd reads listens on a unix socket (<graphics type='vnc'><listen
// type='socket'/></graphics>): no TCP port to allocate, guard or collide
// on, and only who may open the socket file (root, libvirt's qemu user)
// can connect. libvirt names the socket when the domain starts
// (/var/lib/libvirt/qemu/domain-N-NAME/vnc.sock) and writes it in the live
// XML, where read finds it. A domain defined without any graphics device
// gets this one at its next start through vbmcd (Start), as a BMC always
// has its screen; one that has a display of another kind (VNC on TCP,
// SPICE) keeps it, and vbmcd shows no screen for it.

// VNCDisplay is the graphics device vbmcd reads: VNC on a unix socket that
// libvirt names at each start.
func VNCDisplay() libvirtxml.DomainGraphic {
	return libvirtxml.DomainGraphic{VNC: &libvirtxml.DomainGraphicVNC{
		Listeners: []libvirtxml.DomainGraphicListener{{Socket: &libvirtxml.DomainGraphicListenerSocket{}}},
	}}
}

// addDisplay gives def the VNC display when it has no graphics device at
// all; it says whether it did.
func addDisplay(def *libvirtxml.Domain) bool {
	if def.Devices == nil {
		def.Devices = &libvirtxml.DomainDeviceList{}
	}
	if len(def.Devices.Graphics) > 0 {
		return false
	}
	def.Devices.Graphics = append(def.Devices.Graphics, VNCDisplay())
	return true
}

// displaySocket returns the unix socket of the first VNC display of a
// running domain's live definition, "" when it has none.
func displaySocket(live *libvirtxml.Domain) string {
	if live.Devices == nil {
		return ""
	}
	for _, g := range live.Devices.Graphics {
		if g.VNC == nil {
			continue
		}
		if g.VNC.Socket != "" {
			return g.VNC.Socket
		}
		for _, l := range g.VNC.Listeners {
			if l.Socket != nil && l.Socket.Socket != "" {
				return l.Socket.Socket
			}
		}
	}
	return ""
}

// OpenDisplay implements machine.DisplayOpener: a connection to the VNC
// display of a running domain, which speaks RFB (RFC 6143) from its first
// byte. It needs libvirtd on this host (the socket is a file there). An off
// domain is an ErrConflict; a running one without a unix-socket VNC
// display an ErrUnsupported that says how to get one.
func (b *Backend) OpenDisplay(ctx context.Context, id string) (io.ReadWriteCloser, error) {
	if u, err := url.Parse(b.cfg.URI); b.cfg.URI != "" && (err != nil || u.Host != "") {
		return nil, fmt.Errorf("%w: the display of a domain on %s is a socket on that host", machine.ErrUnsupported, b.cfg.URI)
	}
	e, err := b.running(id, "display")
	if err != nil {
		return nil, err
	}
	if e.display == "" {
		return nil, fmt.Errorf("%w: %s runs without a VNC display on a unix socket; power it off and on through vbmcd, which adds one to a domain that has no graphics device", machine.ErrUnsupported, e.m.Name)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", e.display)
	if err != nil {
		return nil, fmt.Errorf("open the display of %s: %w", e.m.Name, err)
	}
	return c, nil
}

// ensureDevices gives the persistent definition of a domain about to start
// what a BMC's machine always has and the domain lacks: the VNC display
// when it has no graphics device, the in-band IPMI interface (kcs.go) when
// it has no IPMI device. The definition is read from libvirt, not the
// cache, which a save just before may have outrun.
func (b *Backend) ensureDevices(l *libvirt.Libvirt, e *entry) error {
	inactive, err := l.DomainGetXMLDesc(e.dom, libvirt.DomainXMLInactive|libvirt.DomainXMLSecure)
	if err != nil {
		return b.wrap(err, "read the definition of", e.m.Name)
	}
	var def libvirtxml.Domain
	if err := def.Unmarshal(inactive); err != nil {
		return fmt.Errorf("parse domain XML of %s: %w", e.m.Name, err)
	}
	display := addDisplay(&def)
	kcs := b.wiresKCS() && addKCS(&def, KCSSocketPath(b.cfg.KCSDir, e.m.ID))
	if !display && !kcs {
		return nil
	}
	out, err := def.Marshal()
	if err != nil {
		return fmt.Errorf("encode domain XML of %s: %w", e.m.Name, err)
	}
	if _, err := l.DomainDefineXMLFlags(out, libvirt.DomainDefineValidate); err != nil {
		return b.done(l, e, err, "add the BMC's devices to")
	}
	if display {
		b.log.Info("added a VNC display for the graphical console", zap.String("domain", e.m.Name))
	}
	if kcs {
		b.log.Info("added an in-band IPMI interface (KCS) wired to this BMC", zap.String("domain", e.m.Name),
			zap.String("socket", KCSSocketPath(b.cfg.KCSDir, e.m.ID)))
	}
	return nil
}
