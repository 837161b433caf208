package machine

// LLDP is what a switch announces on the port a NIC is plugged into
// (IEEE 802.1AB; Redfish Port.LLDPReceive), as Ironic's inspection and
// Metal3's switch models read it. For a VM the switch is the bridge its
// NIC's tap is enslaved to: the chassis is the bridge, the port the tap.
type LLDP struct {
	// ChassisID identifies the switch: the bridge's MAC address
	// (ChassisIDSubtype MacAddr), or its name (IfName) when the backend
	// does not know the MAC.
	ChassisID        string
	ChassisIDSubtype string
	// SystemName is the bridge's name.
	SystemName string
	// PortID is the switch's port: the tap device (PortIDSubtype IfName).
	PortID string
	// VLAN is the port's VLAN (its untagged or only tag); 0 when none.
	VLAN uint
	// ManagementIPv4 is the switch's management address: the bridge's
	// IPv4 address, "" when it has none.
	ManagementIPv4 string
}
