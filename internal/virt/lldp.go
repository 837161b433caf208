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
	if in.VLan != nil && len(in.VLan.Tags) > 0 {
		l.VLAN = in.VLan.Tags[0].ID
		for _, t := range in.VLan.Tags {
			if t.NativeMode == "untagged" {
				l.VLAN = t.ID
			}
		}
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
		if def == nil {
			continue
		}
		if def.MAC != nil && def.MAC.Address != "" {
			n.LLDP.ChassisID, n.LLDP.ChassisIDSubtype = strings.ToLower(def.MAC.Address), "MacAddr"
		}
		for _, ip := range def.IPs {
			if ip.Family == "" || ip.Family == "ipv4" {
				n.LLDP.ManagementIPv4 = ip.Address
				break
			}
		}
		if n.LLDP.VLAN == 0 && def.VLAN != nil && len(def.VLAN.Tags) > 0 {
			n.LLDP.VLAN = def.VLAN.Tags[0].ID
		}
	}
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
