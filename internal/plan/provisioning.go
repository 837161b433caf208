package plan

import (
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"

	"github.com/bmlab/bmlab/internal/labconfig"
	"github.com/bmlab/bmlab/internal/netaddr"
	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/ocp"
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
	// Bond names the bond the NIC is a port of (ocp.BondName; "": none).
	Bond string `json:"bond,omitempty"`
}

// NICName is the guest's name of a node's i-th NIC (from 0).
func NICName(i int) string { return fmt.Sprintf("enp%ds0", i+1) }

// provisioningNICs says whether the plan's nodes have a NIC on the
// provisioning network: labs with one, of a mode with the
// ProvisioningNetwork trait (IPI: the installer's Ironic boots them
// there). The agent-based installer and the hybrid flow boot through the
// machine network alone.
func (p *Plan) provisioningNICs() bool {
	return p.Traits.ProvisioningNetwork && p.Cluster.ProvisioningNetwork != ocp.ProvisioningDisabled && p.Cluster.ProvisioningBridge != ""
}

// nodeNICs gives node n its NICs: on the provisioning network first
// where the lab has one (its boot NIC), then on the node network, whose
// MAC is the node's (its DHCP reservation, its address), and with a bond
// (n.Bond) a second one there, both ports of the bond, as dev-scripts'
// BOND_PRIMARY_INTERFACE lists the external network twice
// (vm_setup_vars.yml's networks).
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
	if n.Bond != "" {
		nics[len(nics)-1].Bond = ocp.BondName
		nics = append(nics, NIC{MAC: MACFor(p.Lab, n.Name+"/"+ocp.BondName), Network: p.Network.NodeNetwork, Bond: ocp.BondName})
	}
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
	if c.ProvisioningNetwork == ocp.ProvisioningDisabled {
		if !p.Traits.ProvisioningNetwork {
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

// ProvisioningHTTPPort is where the provisioning services serve HTTP (the
// iPXE script, the deploy kernel and ramdisk): Metal3's HTTP_PORT, 6180
// (metal3-io/baremetal-operator's ironic deployment and metal3-dev-env
// configure it so). An Unmanaged network's DHCP server sends iPXE there.
const ProvisioningHTTPPort = 6180

// DHCPServer is the lab's own DHCP server on an Unmanaged provisioning
// network: dnsmasq, in the lab's namespace, marked as the lab's as vbmcd
// is, reading ConfigFile, which holds Config, and logging to Log. Its
// command line is the provider's (labvirt's dhcpProcess).
type DHCPServer struct {
	Path       string   `json:"path"`
	Env        []string `json:"env"`
	Log        string   `json:"log"`
	ConfigFile string   `json:"configFile"`
	Config     string   `json:"config"`
}

// provisioningDHCP is the DHCP server the lab runs on an Unmanaged
// provisioning network, where the installer runs none and leaves DHCP to
// the site (nil on the others): it hands out provisioningDHCPRange and
// PXE-boots the nodes as the installer's field documentation asks of the
// site's server (openshift/installer pkg/types/baremetal/platform.go,
// DeprecatedProvisioningDHCPExternal: "next-server set to
// BootstrapProvisioningIP for the control plane, and
// ClusterProvisioningIP for workers"). PXE firmware that is not iPXE gets
// the iPXE binary by TFTP from there, as ironic-image names it
// (snponly-x86_64.efi, undionly.kpxe), and iPXE the boot script of the
// provisioning services' HTTP server (ProvisioningHTTPPort).
func (p *Plan) provisioningDHCP() *DHCPServer {
	c := p.Cluster
	if !p.provisioningNICs() || c.ProvisioningNetwork != ocp.ProvisioningUnmanaged || !c.ProvisioningDHCPRange.Start.IsValid() {
		return nil
	}
	d := &DHCPServer{
		Path:       "dnsmasq",
		Env:        []string{MarkEnv + "=" + p.Lab},
		Log:        filepath.Join(p.StateDir, "provisioning-dhcp.log"),
		ConfigFile: filepath.Join(p.StateDir, "provisioning-dhcp.conf"),
	}
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	host := func(a netip.Addr) string {
		if a.Is6() {
			return "[" + a.String() + "]"
		}
		return a.String()
	}
	r := c.ProvisioningDHCPRange
	line("# bmlab lab %s: the DHCP server of the Unmanaged provisioning network %s, written by labctl", p.Lab, c.ProvisioningNetworkCIDR)
	line("port=0")
	line("interface=%s", c.ProvisioningBridge)
	line("bind-interfaces")
	line("dhcp-leasefile=%s", filepath.Join(p.StateDir, "provisioning-dhcp.leases"))
	line("log-dhcp")
	// The control plane boots from the bootstrap's provisioning services,
	// the workers from the cluster's.
	for _, n := range p.Nodes {
		if n.Role == ocp.RoleMaster || n.Role == ocp.RoleArbiter {
			line("dhcp-host=%s,set:control-plane", n.BootMAC)
		}
	}
	type server struct {
		tag string
		ip  netip.Addr
	}
	servers := []server{{"tag:control-plane", c.BootstrapProvisioningIP}, {"tag:!control-plane", c.ClusterProvisioningIP}}
	if c.ProvisioningNetworkCIDR.Addr().Is4() {
		mask := netip.AddrFrom4([4]byte(net.CIDRMask(c.ProvisioningNetworkCIDR.Bits(), 32)))
		line("dhcp-range=%s,%s,%s,1h", r.Start, r.End, mask)
		line("dhcp-option=3")
		line("dhcp-option=6")
		line("dhcp-userclass=set:ipxe,iPXE")
		line("dhcp-match=set:ipxe,175")
		line("dhcp-match=set:efi,option:client-arch,7")
		line("dhcp-match=set:efi,option:client-arch,9")
		for _, s := range servers {
			line("dhcp-boot=%s,tag:ipxe,http://%s:%d/boot.ipxe", s.tag, s.ip, ProvisioningHTTPPort)
			line("dhcp-boot=%s,tag:!ipxe,tag:efi,/snponly-x86_64.efi,provisioning,%s", s.tag, s.ip)
			line("dhcp-boot=%s,tag:!ipxe,tag:!efi,/undionly.kpxe,provisioning,%s", s.tag, s.ip)
		}
		return d.withConfig(b.String())
	}
	line("dhcp-range=%s,%s,%d,1h", r.Start, r.End, c.ProvisioningNetworkCIDR.Bits())
	line("enable-ra")
	line("ra-param=%s,0,0", c.ProvisioningBridge)
	line("dhcp-vendorclass=set:pxe6,enterprise:343,PXEClient")
	line("dhcp-userclass=set:ipxe6,iPXE")
	for _, s := range servers {
		line("dhcp-option=%s,tag:ipxe6,option6:bootfile-url,http://%s:%d/boot.ipxe", s.tag, host(s.ip), ProvisioningHTTPPort)
		line("dhcp-option=%s,tag:!ipxe6,tag:pxe6,option6:bootfile-url,tftp://%s/snponly-x86_64.efi", s.tag, host(s.ip))
	}
	return d.withConfig(b.String())
}

func (d *DHCPServer) withConfig(c string) *DHCPServer {
	d.Config = c
	return d
}

// BondPorts are a bonded node's NICs on the machine network, the bond's
// ports: their names and MACs, the node's own MAC first (nil: no bond).
func (n Node) BondPorts() (names, macs []string) {
	for _, nic := range n.NICs {
		if nic.Bond != "" {
			names, macs = append(names, nic.Name), append(macs, nic.MAC)
		}
	}
	return names, macs
}
