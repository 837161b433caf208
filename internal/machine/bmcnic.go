package machine

import (
	"crypto/sha256"
	"net"
	"net/netip"
	"strings"
)

// BMCNIC is the network interface of a machine's BMC as every face reports
// it: IPMI's LAN configuration parameters (over LAN and in-band, what
// `ipmitool lan print` shows and ironic-python-agent reads as the node's
// BMC address) and Redfish's Manager EthernetInterface.
type BMCNIC struct {
	// Address is where the BMC answers: the machine's own BMC address
	// (Settings.BMCAddress), else its IPMI endpoint's address, else the
	// service's. Invalid when that is every address (a listener on
	// 0.0.0.0 or ::), which names none.
	Address netip.Addr
	// Bits is the prefix length of the host network Address is on; 0
	// when Address is on no interface.
	Bits int
	// Gateway is the default route's gateway through that network;
	// invalid when it has none.
	Gateway netip.Addr
	// MAC is the BMC's own (BMCMAC).
	MAC net.HardwareAddr
}

// HostNet answers, for an address of this host, the prefix length of the
// network it is on and the default gateway through that network (0 and
// an invalid address when it knows neither). vbmcd reads the host's
// interfaces and routes; tests pass their own.
type HostNet func(netip.Addr) (bits int, gateway netip.Addr)

// NICOf is machine m's BMC NIC, where the service's listener address is
// service (vbmcd's --ipmi-addr: a host or host:port; "" or an unspecified
// address names none).
func NICOf(m *Machine, service string, host HostNet) BMCNIC {
	nic := BMCNIC{MAC: BMCMAC(m.ID)}
	for _, s := range []string{m.Settings.BMCAddress, ipmiAddress(m), service} {
		if a, ok := parseHost(s); ok {
			nic.Address = a
			break
		}
		if s != "" {
			// The first address named decides, even when it names no
			// single address: an endpoint bound to every address
			// answers on all of them.
			return nic
		}
	}
	if nic.Address.IsValid() && host != nil {
		nic.Bits, nic.Gateway = host(nic.Address)
	}
	return nic
}

func ipmiAddress(m *Machine) string {
	if m.Settings.IPMI == nil {
		return ""
	}
	return m.Settings.IPMI.Address
}

// parseHost reads an address from host, [host], host:port or [host]:port;
// false for a name, an unspecified address or nothing.
func parseHost(s string) (netip.Addr, bool) {
	if s == "" {
		return netip.Addr{}, false
	}
	if h, _, err := net.SplitHostPort(s); err == nil {
		s = h
	}
	a, err := netip.ParseAddr(strings.Trim(s, "[]"))
	if err != nil || a.IsUnspecified() {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// BMCMAC is the MAC address of machine id's BMC: locally administered
// (IEEE 802: bit 1 of the first octet set), unicast, the same for a
// machine on every face and every run, and unlike qemu's 52:54:00 NICs.
// The host answers ARP for a BMC address with its own interface's MAC, as
// a BMC's NIC is not emulated on the wire.
func BMCMAC(id string) net.HardwareAddr {
	h := sha256.Sum256([]byte("bmc-mac/" + strings.ToLower(id)))
	return net.HardwareAddr{0x02, h[0], h[1], h[2], h[3], h[4]}
}
