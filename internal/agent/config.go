package agent

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	"github.com/bmlab/bmlab/internal/ipi"
	"github.com/bmlab/bmlab/internal/netaddr"
	"github.com/bmlab/bmlab/internal/ocp"
)

// FileName is the name the installer reads beside install-config.yaml.
const FileName = "agent-config.yaml"

// Config mirrors the installer's agent-config v1beta1
// (pkg/types/agent/agent_config_type.go) as far as a lab sets it.
type Config struct {
	APIVersion   string       `json:"apiVersion"`
	Kind         string       `json:"kind"`
	Metadata     ipi.Metadata `json:"metadata"`
	RendezvousIP string       `json:"rendezvousIP"`
	Hosts        []Host       `json:"hosts"`
}

// Host is one host of agent-config.
type Host struct {
	Hostname        string               `json:"hostname"`
	Role            string               `json:"role,omitempty"`
	Interfaces      []Interface          `json:"interfaces"`
	RootDeviceHints *ipi.RootDeviceHints `json:"rootDeviceHints,omitempty"`
	// NetworkConfig is the host's nmstate state (static addresses).
	NetworkConfig *NetworkConfig `json:"networkConfig,omitempty"`
}

// Interface names a host's NIC by MAC.
type Interface struct {
	Name       string `json:"name"`
	MACAddress string `json:"macAddress"`
}

// The host's nmstate state, as install-config's hosts carry it too
// (internal/ipi's nmstate types).
type (
	NetworkConfig = ipi.NetworkConfig
	NMInterface   = ipi.NMInterface
	NMIPv4        = ipi.NMIPv4
	NMIPv6        = ipi.NMIPv6
	NMAddress     = ipi.NMAddress
	NMDNS         = ipi.NMDNS
	NMRoutes      = ipi.NMRoutes
	NMRoute       = ipi.NMRoute
)

// NICName is the name agent-config gives each node's one NIC; the
// installer and nmstate find it by MAC.
const NICName = "enp1s0"

// Cluster is what Generate needs, from the lab plan.
type Cluster struct {
	Name         string
	RendezvousIP netip.Addr
	// Family is the machine network's first family: each host's static
	// address is in MachineNetwork, HostAddress its default route and
	// resolver.
	netaddr.Family
	// StaticIPs writes each host's address, route and resolver.
	StaticIPs bool
	// Secondary is a dual-stack lab's IPv6 family (the zero Family for a
	// single stack); an IPv6-only lab has IPv6 in Family.
	Secondary netaddr.Family
	Hosts     []HostSpec
}

// HostSpec is one node of the plan.
type HostSpec struct {
	Name string
	Role string
	MAC  string
	IP   netip.Addr
	// SecondaryIP is a dual-stack host's IPv6 address.
	SecondaryIP netip.Addr
	// Bond, when set, bonds the host's NICs (their names NICs, their
	// MACs MACs, MAC first) in this mode (ocp.BondName).
	Bond       string
	NICs, MACs []string
}

// Interfaces are the host's NICs as agent-config names them: each by its
// MAC.
func (h HostSpec) Interfaces() []Interface {
	if h.Bond == "" {
		return []Interface{{Name: NICName, MACAddress: h.MAC}}
	}
	var out []Interface
	for i := range h.NICs {
		out = append(out, Interface{Name: h.NICs[i], MACAddress: h.MACs[i]})
	}
	return out
}

// Generate builds agent-config for the plan's nodes.
func Generate(c Cluster) *Config {
	ac := &Config{APIVersion: "v1beta1", Kind: "AgentConfig", Metadata: ipi.Metadata{Name: c.Name},
		RendezvousIP: c.RendezvousIP.String(), Hosts: []Host{}}
	for _, h := range c.Hosts {
		host := Host{Hostname: h.Name, Role: h.Role, Interfaces: h.Interfaces(),
			RootDeviceHints: &ipi.RootDeviceHints{DeviceName: ipi.DefaultRootDevice}}
		switch {
		case c.StaticIPs:
			host.NetworkConfig = staticConfig(c, h)
		case h.Bond != "":
			// The bond's addresses from the lab network's DHCP.
			host.NetworkConfig = ipi.DHCPBond(h.Bond, h.NICs, h.MACs, c.MachineNetwork.Addr().Is4(), c.MachineNetwork.Addr().Is6() || !c.Secondary.IsZero())
		}
		ac.Hosts = append(ac.Hosts, host)
	}
	return ac
}

// staticConfig is a host's nmstate state: its address of each family
// (IPv4 first in a dual-stack lab), a default route and the resolver
// through the lab host's address of each; on its NIC, or on the bond of
// its NICs.
func staticConfig(c Cluster, h HostSpec) *NetworkConfig {
	nic := NMInterface{Name: NICName, Type: "ethernet", State: "up", Identifier: "mac-address", MACAddress: h.MAC}
	via := NICName
	if h.Bond != "" {
		via = ocp.BondName
	}
	nc := &NetworkConfig{DNSResolver: &NMDNS{}, Routes: &NMRoutes{}}
	add := func(ip netip.Addr, prefix netip.Prefix, gw netip.Addr) {
		if !ip.IsValid() {
			return
		}
		a := NMAddress{IP: ip.String(), PrefixLength: prefix.Bits()}
		dst := "0.0.0.0/0"
		if ip.Is6() {
			dst = "::/0"
			if nic.IPv6 == nil {
				nic.IPv6 = &NMIPv6{Enabled: true}
			}
			nic.IPv6.Address = append(nic.IPv6.Address, a)
		} else {
			nic.IPv4 = NMIPv4{Enabled: true, Address: []NMAddress{a}}
		}
		nc.DNSResolver.Config.Server = append(nc.DNSResolver.Config.Server, gw.String())
		nc.Routes.Config = append(nc.Routes.Config, NMRoute{Destination: dst, NextHopAddress: gw.String(), NextHopInterface: via})
	}
	add(h.IP, c.MachineNetwork, c.HostAddress)
	add(h.SecondaryIP, c.Secondary.MachineNetwork, c.Secondary.HostAddress)
	nc.Interfaces = []NMInterface{nic}
	if h.Bond != "" {
		nc.Interfaces = ipi.BondInterfaces(h.Bond, h.NICs, h.MACs, nic.IPv4, nic.IPv6)
	}
	return nc
}

// hasStaticAddress says whether a host's nmstate state gives an interface
// an address of its own (not DHCP's).
func hasStaticAddress(nc *NetworkConfig) bool {
	for _, nic := range nc.Interfaces {
		if len(nic.IPv4.Address) > 0 || (nic.IPv6 != nil && len(nic.IPv6.Address) > 0) {
			return true
		}
	}
	return false
}

// Marshal renders agent-config in its fields' order.
func Marshal(ac *Config) ([]byte, error) { return ipi.MarshalOrdered(ac, FileName) }

// Validate returns every problem the installer would report for ac
// (pkg/asset/agent/agentconfig: validateRendezvousIP, validateHosts), with
// the machine network the rendezvous address must be in.
func Validate(ac *Config, machine netip.Prefix) ipi.ErrorList {
	var errs ipi.ErrorList
	add := func(t ipi.ErrorType, field string, v any, detail string) {
		errs = append(errs, &ipi.FieldError{Type: t, Field: field, Value: v, Detail: detail})
	}
	if ac.APIVersion != "v1beta1" {
		add(ipi.ErrorInvalid, "apiVersion", ac.APIVersion, `agent-config version must be "v1beta1"`)
	}
	rv, err := netip.ParseAddr(ac.RendezvousIP)
	switch {
	case ac.RendezvousIP == "":
		add(ipi.ErrorRequired, "rendezvousIP", nil, "the address the hosts meet at is required")
	case err != nil:
		add(ipi.ErrorInvalid, "rendezvousIP", ac.RendezvousIP, err.Error())
	case machine.IsValid() && !machine.Contains(rv):
		add(ipi.ErrorInvalid, "rendezvousIP", ac.RendezvousIP, fmt.Sprintf("must be in the machine network %s", machine))
	}
	names, macs := map[string]bool{}, map[string]bool{}
	masters, rendezvousStatic := 0, false
	for i, h := range ac.Hosts {
		f := fmt.Sprintf("hosts[%d]", i)
		if names[h.Hostname] {
			add(ipi.ErrorDuplicate, f+".hostname", h.Hostname, "")
		}
		names[h.Hostname] = true
		if !slices.Contains([]string{ocp.RoleMaster, ocp.RoleArbiter, ocp.RoleWorker}, h.Role) {
			add(ipi.ErrorUnsupported, f+".role", h.Role, `supported values: "master", "arbiter", "worker"`)
		}
		if h.Role == ocp.RoleMaster {
			masters++
		}
		if len(h.Interfaces) == 0 {
			add(ipi.ErrorRequired, f+".interfaces", nil, "at least one interface is required")
		}
		for j, nic := range h.Interfaces {
			if macs[nic.MACAddress] {
				add(ipi.ErrorDuplicate, fmt.Sprintf("%s.interfaces[%d].macAddress", f, j), nic.MACAddress, "")
			}
			macs[nic.MACAddress] = true
		}
		if h.NetworkConfig != nil {
			for _, nic := range h.NetworkConfig.Interfaces {
				addrs := nic.IPv4.Address
				if nic.IPv6 != nil {
					addrs = append(addrs[:len(addrs):len(addrs)], nic.IPv6.Address...)
				}
				for _, a := range addrs {
					if a.IP == ac.RendezvousIP && h.Role == ocp.RoleMaster {
						rendezvousStatic = true
					}
				}
			}
		}
	}
	if len(ac.Hosts) > 0 && masters == 0 {
		add(ipi.ErrorRequired, "hosts", nil, "at least one host must have the master role")
	}
	// Static addresses (not a bond whose addresses come from DHCP): the
	// rendezvous address is a master's.
	static := len(ac.Hosts) > 0 && ac.Hosts[0].NetworkConfig != nil && hasStaticAddress(ac.Hosts[0].NetworkConfig)
	if static && !rendezvousStatic && err == nil {
		add(ipi.ErrorInvalid, "rendezvousIP", ac.RendezvousIP, "no master host's networkConfig has this address")
	}
	return errs
}

// NodesConfigName is `oc adm node-image create`'s input in its directory.
const NodesConfigName = "nodes-config.yaml"

// NodeISOName is the ISO `oc adm node-image create` writes for nodes of an
// architecture: node.<arch>.iso.
func NodeISOName(arch string) string { return "node." + cmp.Or(arch, "x86_64") + ".iso" }

// NodesConfig is nodes-config.yaml: the hosts to add to a running cluster.
type NodesConfig struct {
	// CPUArchitecture is the added nodes' architecture (x86_64, aarch64);
	// empty: the cluster's.
	CPUArchitecture string `json:"cpuArchitecture,omitempty"`
	Hosts           []Host `json:"hosts"`
}
