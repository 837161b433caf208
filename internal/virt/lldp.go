package virt

import (
	"strings"

	"github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/bmlab/bmlab/internal/machine"
)

// lldpOf is what the switch a running domain's NIC is plugged into would
// announce, from the live interface: its tap (target dev) is the port,
// the bridge it is enslaved to (source bridge, or the bridge libvirt put a
// network's tap on) the switch. It is nil for an interface with no tap
// (the domain is off, or user-mode networking) or no bridge.
func lldpOf(in libvirtxml.DomainInterface) *machine.LLDP {
	if in.Target == nil || in.Target.Dev == "" || in.Source == nil {
		return nil
	}
	bridge := ""
	switch s := in.Source; {
	case s.Network != nil:
		bridge = s.Network.Bridge
	case s.Bridge != nil:
		bridge = s.Bridge.Bridge
	}
	if bridge == "" {
		return nil
	}
	l := &machine.LLDP{ChassisID: bridge, ChassisIDSubtype: "IfName", SystemName: bridge, PortID: in.Target.Dev}
	if in.VLan != nil {
		l.VLAN = vlanOf(in.VLan.Tags, func(t libvirtxml.DomainInterfaceVLanTag) (uint, string) { return t.ID, t.NativeMode })
	}
	return l
}

// fillSwitches completes the NICs' LLDP with what libvirt knows of their
// bridges: a libvirt network's bridge MAC address and IPv4 address (the
// network's definition). A bridge libvirt does not manage keeps its name
// as chassis ID.
func fillSwitches(l *libvirt.Libvirt, nics []machine.NIC) {
	known := map[string]*libvirtxml.Network{}
	for i := range nics {
		n := &nics[i]
		if n.LLDP == nil || n.Network == "" || n.Network == n.LLDP.SystemName {
			continue
		}
		def, ok := known[n.Network]
		if !ok {
			def = networkDef(l, n.Network)
			known[n.Network] = def
		}
		if def != nil {
			fillSwitch(n.LLDP, def)
		}
	}
}

// fillSwitch completes l with what network def says of its bridge: its MAC
// (the chassis ID), its IPv4 address (the management address) and, when
// the interface itself has no VLAN, the network's (its untagged tag, else
// its first).
func fillSwitch(l *machine.LLDP, def *libvirtxml.Network) {
	if def.MAC != nil && def.MAC.Address != "" {
		l.ChassisID, l.ChassisIDSubtype = strings.ToLower(def.MAC.Address), "MacAddr"
	}
	for _, ip := range def.IPs {
		if ip.Family == "" || ip.Family == "ipv4" {
			l.ManagementIPv4 = ip.Address
			break
		}
	}
	if l.VLAN == 0 && def.VLAN != nil {
		l.VLAN = vlanOf(def.VLAN.Tags, func(t libvirtxml.NetworkVLANTag) (uint, string) { return t.ID, t.NativeMode })
	}
}

// vlanOf is a port's VLAN from its tags: the untagged (native) one, else
// the first; 0 without tags.
func vlanOf[T any](tags []T, tag func(T) (id uint, nativeMode string)) uint {
	var first uint
	for i, t := range tags {
		id, mode := tag(t)
		if mode == "untagged" {
			return id
		}
		if i == 0 {
			first = id
		}
	}
	return first
}

// networkDef reads a libvirt network's definition; nil when it cannot.
func networkDef(l *libvirt.Libvirt, name string) *libvirtxml.Network {
	net, err := l.NetworkLookupByName(name)
	if err != nil {
		return nil
	}
	x, err := l.NetworkGetXMLDesc(net, 0)
	if err != nil {
		return nil
	}
	var def libvirtxml.Network
	if def.Unmarshal(x) != nil {
		return nil
	}
	return &def
}
