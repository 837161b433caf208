package redfish

import (
	"net"
	"net/netip"

	"github.com/bmlab/bmlab/internal/machine"
)

// The BMC's own network interface: Managers/{id}/EthernetInterfaces/1,
// the same NIC IPMI's LAN configuration parameters report over LAN and
// in-band (machine.NICOf): the BMC's address, the prefix and gateway of
// the host network it is on, its MAC (machine.BMCMAC). Read-only: the
// address is vbmcd's configuration.

// managerNICID is the id of a Manager's one EthernetInterface.
const managerNICID = "1"

// WithBMCNIC sets where the BMC NICs' addresses come from: service is the
// service's listener address (vbmcd's --ipmi-addr) for machines without a
// BMC address of their own, host answers the prefix and gateway of an
// address's host network (nil: neither is reported).
func WithBMCNIC(service string, host machine.HostNet) Option {
	return func(s *Server) { s.nicService, s.nicHost = service, host }
}

func renderManagerNICs(_ *Server, c *call) any {
	return subCollection(c, "EthernetInterfaceCollection", "Ethernet Interface Collection", []string{managerNICID})
}

func renderManagerNIC(s *Server, c *call) any {
	if c.params[1] != managerNICID {
		return nil
	}
	return managerNIC(c.m, machine.NICOf(c.m, s.nicService, s.nicHost))
}

// managerNIC renders the BMC NIC of machine m.
func managerNIC(m *machine.Machine, nic machine.BMCNIC) obj {
	mac := nic.MAC.String()
	o := obj{
		"@odata.id":           managerURI(m.ID) + "/EthernetInterfaces/" + managerNICID,
		"@odata.type":         "#EthernetInterface.v1_9_0.EthernetInterface",
		"Id":                  managerNICID,
		"Name":                "Manager Ethernet Interface",
		"Description":         "The BMC's network interface",
		"MACAddress":          mac,
		"PermanentMACAddress": mac,
		"InterfaceEnabled":    true,
		"LinkStatus":          "LinkUp",
		"Status":              status("Enabled"),
		"IPv4Addresses":       []obj{},
		"IPv6Addresses":       []obj{},
	}
	gw := ""
	if nic.Gateway.IsValid() {
		gw = nic.Gateway.String()
	}
	switch a := nic.Address; {
	case a.Is4():
		mask := net.IP(net.CIDRMask(nic.Bits, 32)).String()
		if nic.Bits == 0 {
			mask = "0.0.0.0"
		}
		o["IPv4Addresses"] = []obj{{"Address": a.String(), "SubnetMask": mask, "Gateway": or(gw, "0.0.0.0"), "AddressOrigin": "Static"}}
	case a.Is6():
		o["IPv6Addresses"] = []obj{{"Address": a.String(), "PrefixLength": nic.Bits, "AddressOrigin": "Static", "AddressState": "Preferred"}}
		o["IPv6DefaultGateway"] = or(gw, netip.IPv6Unspecified().String())
	}
	return o
}

func or(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}
