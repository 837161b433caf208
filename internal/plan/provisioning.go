package plan

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/bmlab/bmlab/internal/ipi"
	"github.com/bmlab/bmlab/internal/labconfig"
	"github.com/bmlab/bmlab/internal/netaddr"
	"github.com/bmlab/bmlab/internal/netplumb"
)

// An IPI lab is wired as dev-scripts wires one (openshift-metal3/dev-scripts
// with metal3-dev-env's vm-setup, read 2026-08):
//   - with a provisioning network (Managed, Unmanaged) every node's first
//     NIC is on it: vm_setup_vars.yml lists the provisioning network
//     before the external one, and baremetalvm.xml.j2 writes a NIC per
//     network in that order, so the guest names it enp1s0, dev-scripts'
//     CLUSTER_PRO_IF (network.sh). libvirt gives os/boot's "network" to
//     the first NIC (its bootindex), so that NIC is the one the firmware
//     network-boots from;
//   - bootMACAddress is that NIC's MAC: ironic_nodes.json.j2 takes the
//     first network that is not NAT'ed (the provisioning one) as the
//     PXE network and lists its MAC as ports[0], which
//     ocp_install_env.sh writes as bootMACAddress;
//   - install-config names provisioningBridge, provisioningNetworkCIDR
//     and provisioningNetworkInterface (enp1s0), and the provisioning
//     services are at the network's .2 (bootstrap) and .3 (cluster), the
//     installer's defaults; the lab host has its .1 (02_configure_host.sh,
//     PROVISIONING_HOST_IP);
//   - with Disabled the provisioning IPs are the machine network's 7th
//     and 8th addresses (network.sh).
//
// One departure: with Disabled, dev-scripts still gives every VM a NIC on
// its provisioning bridge (metal3-dev-env makes the VMs' networks whatever
// the profile) and names that NIC's MAC as bootMACAddress. A lab here
// leaves it out: Disabled is the profile of a rack without a provisioning
// network, the installer boots its nodes by virtual media over the
// machine network, and a NIC on a network nothing serves would only make
// bootMACAddress name a NIC no host boots from. bootMACAddress is then the
// baremetal NIC's, as in the agent-based flow (agent/05_agent_configure.sh).

// NIC is one of a node's NICs, in the domain's order.
type NIC struct {
	// Name is the guest's name for it: libvirt puts the NICs first on
	// the q35 (and virt) machine's PCIe root ports, so the i-th NIC is
	// on bus i and systemd names it enp<i>s0.
	Name string `json:"name"`
	MAC  string `json:"mac"`
	// Network is the libvirt network the NIC joins (named like its
	// bridge), or Bridge the bridge itself when the bridge has no
	// libvirt network.
	Network string `json:"network,omitempty"`
	Bridge  string `json:"bridge,omitempty"`
	// Provisioning marks the NIC on the provisioning network.
	Provisioning bool `json:"provisioning,omitempty"`
}

// NICName is the guest's name of a node's i-th NIC (from 0).
func NICName(i int) string { return fmt.Sprintf("enp%ds0", i+1) }

// provisioningNICs says whether the plan's nodes have a NIC on the
// provisioning network: IPI labs with one (the installer's Ironic boots
// them there). The agent-based installer and the hybrid flow boot
// through the machine network alone.
func (p *Plan) provisioningNICs() bool {
	return p.Mode == ModeIPI && p.Cluster.ProvisioningNetwork != ipi.ProvisioningDisabled && p.Cluster.ProvisioningBridge != ""
}

// nodeNICs gives node n its NICs: on the provisioning network first
// where the lab has one (its boot NIC), then on the node network, whose
// MAC is the node's (its DHCP reservation, its address).
func (p *Plan) nodeNICs(n *Node, bridgeNetworks []string) {
	var nics []NIC
	if p.provisioningNICs() {
		br := p.Cluster.ProvisioningBridge
		nic := NIC{MAC: MACFor(p.Lab, n.Name+"/"+br), Provisioning: true}
		if slices.Contains(bridgeNetworks, br) {
			nic.Network = br
		} else {
			nic.Bridge = br
		}
		nics = append(nics, nic)
	}
	nics = append(nics, NIC{MAC: n.MAC, Network: p.Network.NodeNetwork})
	for i := range nics {
		nics[i].Name = NICName(i)
	}
	n.NICs = nics
	n.BootMAC = nics[0].MAC
}

// resolveProvisioning gives the cluster its provisioning services'
// addresses and, with a provisioning network, the hosts' NIC on it and
// the installer's DHCP range there. With Disabled, only the IPI mode has
// provisioning services (on the machine network): they default to
// dev-scripts' 7th and 8th addresses, which install-config's checks keep
// out of the DHCP range and off the VIPs.
func (p *Plan) resolveProvisioning(cfg *labconfig.Config) {
	k, c := cfg.Cluster, &p.Cluster
	c.BootstrapProvisioningIP, c.ClusterProvisioningIP = k.BootstrapProvisioningIP, k.ClusterProvisioningIP
	if c.ProvisioningNetwork == ipi.ProvisioningDisabled {
		if p.Mode != ModeIPI {
			c.BootstrapProvisioningIP, c.ClusterProvisioningIP = netip.Addr{}, netip.Addr{}
			return
		}
		if !c.BootstrapProvisioningIP.IsValid() {
			c.BootstrapProvisioningIP = labconfig.NthHost(k.MachineNetwork, labconfig.DisabledBootstrapHost)
		}
		if !c.ClusterProvisioningIP.IsValid() {
			c.ClusterProvisioningIP = labconfig.NthHost(k.MachineNetwork, labconfig.DisabledClusterHost)
		}
		return
	}
	c.ProvisioningDHCPRange = k.ProvisioningDHCPRange
	c.ProvisioningHostAddress = k.ProvisioningNetworkCIDR.Masked().Addr().Next()
	if p.provisioningNICs() {
		c.ProvisioningNetworkInterface = NICName(0)
	}
}

// provisioningAddress gives the lab host its address on the provisioning
// bridge (the hub's, in a lab over several hosts), as dev-scripts'
// provisioning host has: where the lab's routes to the provisioning
// network go out, and an Unmanaged network's DHCP server listens.
func (p *Plan) provisioningAddress() {
	a := p.Cluster.ProvisioningHostAddress
	if !p.provisioningNICs() || !a.IsValid() {
		return
	}
	pfx := netip.PrefixFrom(a, p.Cluster.ProvisioningNetworkCIDR.Bits())
	add := func(t *netplumb.Topology) {
		for i := range t.Bridges {
			if t.Bridges[i].Name == p.Cluster.ProvisioningBridge && !slices.Contains(t.Bridges[i].Addresses, pfx) {
				t.Bridges[i].Addresses = append(slices.Clone(t.Bridges[i].Addresses), pfx)
			}
		}
	}
	add(&p.Network.Topology)
	for i := range p.Hosts {
		if p.Hosts[i].Hub {
			add(&p.Hosts[i].Topology)
		}
	}
}

// ProvisioningFamily is the provisioning network as netaddr shapes a
// network: its CIDR, the lab host's address there and the DHCP range
// (zero without one).
func (c Cluster) ProvisioningFamily() netaddr.Family {
	if !c.ProvisioningNetworkCIDR.IsValid() {
		return netaddr.Family{}
	}
	return netaddr.Family{MachineNetwork: c.ProvisioningNetworkCIDR, HostAddress: c.ProvisioningHostAddress, DHCPRange: c.ProvisioningDHCPRange}
}
