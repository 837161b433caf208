package labvirt

import (
	"context"
	"fmt"

	"github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/virt"
	"github.com/bmlab/bmlab/internal/virt/domain"
)

// domainOwner reports whether a domain exists and which lab owns it: the
// lab's mark in its <metadata>
// ("" when the domain carries no such mark, i.e. it is foreign).
func domainOwner(_ context.Context, l *libvirt.Libvirt, name string) (found bool, owner string, err error) {
	d, err := l.DomainLookupByName(name)
	if err != nil {
		if domain.IsNoDomain(err) {
			return false, "", nil
		}
		return false, "", fmt.Errorf("look up domain %s: %w", name, err)
	}
	x, err := l.DomainGetXMLDesc(d, libvirt.DomainXMLInactive)
	if err != nil {
		return true, "", fmt.Errorf("read domain %s: %w", name, err)
	}
	var def libvirtxml.Domain
	if err := def.Unmarshal(x); err != nil {
		return true, "", fmt.Errorf("parse domain %s: %w", name, err)
	}
	if def.Metadata == nil {
		return true, "", nil
	}
	return true, MarkOf(def.Metadata.XML), nil
}

// setNodeBMC records a node's IPMI port (0: none), its own BMC user
// (empty: none) and its BMC's personality with its domain, where vbmcd reads them (virt owns the
// format), and reports whether they changed.
func setNodeBMC(l *libvirt.Libvirt, o lab.MachineBMC) (bool, error) {
	var want virt.NodeBMC
	if o.IPMIPort > 0 {
		want.IPMI = &machine.IPMIEndpoint{Port: o.IPMIPort}
	}
	if o.User != "" {
		want.Users = []machine.Credential{{Username: o.User, Password: o.Password}}
	}
	want.Personality = o.Personality
	return virt.SetNodeBMC(l, o.Node, want)
}
