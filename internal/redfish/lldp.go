package redfish

import "github.com/bmlab/bmlab/internal/machine"

// lldpReceive is a Port's LLDPReceive (Port v1_4_0 and later): what the
// switch at the other end announces, for Ironic's inspection and Metal3's
// switch models. For a VM the switch is the bridge its NIC is plugged
// into, the port its tap (machine.LLDP).
func lldpReceive(l *machine.LLDP) obj {
	o := obj{
		"ChassisId":          l.ChassisID,
		"ChassisIdSubtype":   l.ChassisIDSubtype,
		"PortId":             l.PortID,
		"PortIdSubtype":      "IfName",
		"SystemName":         l.SystemName,
		"SystemCapabilities": []string{"Bridge"},
	}
	if l.ManagementIPv4 != "" {
		o["ManagementAddressIPv4"] = l.ManagementIPv4
	}
	if l.VLAN != 0 {
		o["ManagementVlanId"] = l.VLAN
	}
	if l.ChassisIDSubtype == "MacAddr" {
		o["ManagementAddressMAC"] = l.ChassisID
	}
	return o
}
