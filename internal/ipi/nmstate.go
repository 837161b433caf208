package ipi

import "github.com/bmlab/bmlab/internal/ocp"

// nmstate's state (nmstate.io), as far as the lab writes it: a host's
// networkConfig in install-config (platform.baremetal.hosts) and in
// agent-config.

// NetworkConfig is the part of nmstate's state a lab writes.
type NetworkConfig struct {
	Interfaces  []NMInterface `json:"interfaces"`
	DNSResolver *NMDNS        `json:"dns-resolver,omitempty"`
	Routes      *NMRoutes     `json:"routes,omitempty"`
}

// NMInterface is an Ethernet NIC, found by its MAC (nmstate's
// identifier: mac-address), so the kernel's name for it does not matter;
// or a bond of NICs (LinkAggregation), its MAC the first port's.
type NMInterface struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	State      string `json:"state"`
	Identifier string `json:"identifier,omitempty"`
	MACAddress string `json:"mac-address"`
	// LinkAggregation is a bond's mode and ports.
	LinkAggregation *NMBond `json:"link-aggregation,omitempty"`
	IPv4            NMIPv4  `json:"ipv4"`
	// IPv6 is the static IPv6 address of an IPv6 or dual-stack lab.
	IPv6 *NMIPv6 `json:"ipv6,omitempty"`
}

// NMBond is a bond's link aggregation: its mode (the kernel bonding
// driver's: active-backup, balance-rr …) and its ports, by name.
type NMBond struct {
	Mode string   `json:"mode"`
	Port []string `json:"port"`
}

// NMIPv4 is a static IPv4 address (none, disabled, in an IPv6-only lab),
// or DHCP.
type NMIPv4 struct {
	Enabled bool        `json:"enabled"`
	DHCP    bool        `json:"dhcp"`
	Address []NMAddress `json:"address,omitempty"`
}

// NMIPv6 is a static IPv6 address, without DHCPv6 or SLAAC, or DHCPv6 and
// SLAAC.
type NMIPv6 struct {
	Enabled  bool        `json:"enabled"`
	DHCP     bool        `json:"dhcp"`
	Autoconf bool        `json:"autoconf"`
	Address  []NMAddress `json:"address,omitempty"`
}

// NMAddress is one address with its prefix length.
type NMAddress struct {
	IP           string `json:"ip"`
	PrefixLength int    `json:"prefix-length"`
}

// NMDNS is the resolver.
type NMDNS struct {
	Config struct {
		Server []string `json:"server"`
	} `json:"config"`
}

// NMRoutes are the routes.
type NMRoutes struct {
	Config []NMRoute `json:"config"`
}

// NMRoute is the default route.
type NMRoute struct {
	Destination      string `json:"destination"`
	NextHopAddress   string `json:"next-hop-address"`
	NextHopInterface string `json:"next-hop-interface"`
}

// BondInterfaces are the nmstate interfaces of a host whose NICs (names,
// macs: the first is the one its address is reserved for) are bonded in
// mode: each NIC by its MAC, without an address, and ocp.BondName with them as
// its ports, its MAC the first NIC's (so the DHCP reservation of that MAC,
// or the DUID-LL made of it, still names the host), with v4 and v6.
func BondInterfaces(mode string, names, macs []string, v4 NMIPv4, v6 *NMIPv6) []NMInterface {
	var out []NMInterface
	for i := range names {
		out = append(out, NMInterface{Name: names[i], Type: "ethernet", State: "up", Identifier: "mac-address", MACAddress: macs[i]})
	}
	return append(out, NMInterface{Name: ocp.BondName, Type: "bond", State: "up", MACAddress: macs[0],
		LinkAggregation: &NMBond{Mode: mode, Port: names}, IPv4: v4, IPv6: v6})
}

// DHCPBond is the nmstate state of a bonded host that takes its addresses
// from the lab network's DHCP: DHCPv4, and DHCPv6 with SLAAC where the
// machine network has IPv6 (v4, v6).
func DHCPBond(mode string, names, macs []string, v4, v6 bool) *NetworkConfig {
	var ip6 *NMIPv6
	if v6 {
		ip6 = &NMIPv6{Enabled: true, DHCP: true, Autoconf: true}
	}
	return &NetworkConfig{Interfaces: BondInterfaces(mode, names, macs, NMIPv4{Enabled: v4, DHCP: v4}, ip6)}
}
