package plan

// The lab's network: the NAT network or the shared one it joins, bridges,
// the resolver's drop-in, the LLDP sender.

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"

	"github.com/bmlab/bmlab/internal/labconfig"
	"github.com/bmlab/bmlab/internal/netaddr"
	"github.com/bmlab/bmlab/internal/netplumb"
)

// Network is the lab's host network.
type Network struct {
	// NAT is the lab's own NAT network (nil when the lab borrows another
	// libvirt network's bridge, LibvirtBridge in the lab file).
	NAT *NAT `json:"nat,omitempty"`
	// Shared is the libvirt network the lab shares with others
	// (network.shared in the lab file); nil when it has none. A lab has a
	// NAT network of its own, a shared one, or neither (it borrows a
	// bridge and nothing of its network is the lab's).
	Shared *Shared `json:"shared,omitempty"`
	// Topology is the links netplumb makes; its veth's far end is on the
	// NAT bridge.
	Topology netplumb.Topology `json:"topology"`
	// BridgeNetworks are libvirt networks named like each lab bridge,
	// which the installer's bridge check accepts.
	BridgeNetworks []string `json:"bridgeNetworks"`
	// NodeNetwork is the libvirt network the nodes' NIC joins.
	NodeNetwork string `json:"nodeNetwork"`
	// NMConfDir receives NetworkManager's unmanaged-devices snippet.
	NMConfDir string `json:"nmConfDir"`
	// HostResolver is how the lab host resolves the cluster's names:
	// hosts, none, or a drop-in (Resolver) for dnsmasq or resolved.
	HostResolver string    `json:"hostResolver"`
	Resolver     *Resolver `json:"resolver,omitempty"`
	// ResolverDropIns are the files down removes when they bear the lab's
	// mark: the plan's drop-in and the lab's name at both default places,
	// so that down --lab, without the lab file, finds one the lab wrote.
	ResolverDropIns []string `json:"resolverDropIns"`
	// LLDP is the lab's LLDP sender: the switches' frames on every
	// running node NIC's tap. Nil when network.lldp is off.
	LLDP *LLDPSender `json:"lldp,omitempty"`
	// ProvisioningDHCP is the lab's DHCP server on an Unmanaged
	// provisioning network (provisioning.go); nil on the others.
	ProvisioningDHCP *DHCPServer `json:"provisioningDHCP,omitempty"`
}

// ResolverHosts is network.hostResolver's hosts: entries in the hosts file.
const ResolverHosts = labconfig.ResolverHosts

// Resolver is the lab host's resolver drop-in: the cluster's domain sent
// to the lab network's DNS (its own NAT network's, or the shared
// network's, which carries the lab's records). Apps answers *.apps itself
// on a shared network (dnsmasq only), which cannot hold that wildcard.
type Resolver struct {
	Kind   string     `json:"kind"`
	Path   string     `json:"path"`
	Domain string     `json:"domain"`
	DNS    netip.Addr `json:"dns"`
	Apps   netip.Addr `json:"apps,omitzero"`
}

// NAT is the lab's own libvirt NAT network: the machine network, with a
// DHCP reservation and DNS record per node. Its Family is the cluster's
// first, but for the VIPs, which are where its DNS sends api and *.apps
// (a single node's own address); Secondary is a dual-stack lab's IPv6
// family. An IPv6-only lab's addresses are IPv6.
type NAT struct {
	Name   string `json:"name"`
	Bridge string `json:"bridge"`
	netaddr.Family
	MTU       int            `json:"mtu"`
	Domain    string         `json:"domain"`
	Secondary netaddr.Family `json:"secondary,omitzero"`
}

// MarshalJSON writes the NAT network in libvirt's words (cidr, gateway,
// dhcpStart, dhcpEnd), as `virsh net-dumpxml` shows it, which is what
// the plan's JSON shows people and its golden files pin.
func (n NAT) MarshalJSON() ([]byte, error) {
	// A family in libvirt's words: its addresses, then its VIPs, which
	// the network's own (first) family writes after mtu and domain.
	type addresses struct {
		CIDR      netip.Prefix `json:"cidr"`
		Gateway   netip.Addr   `json:"gateway"`
		DHCPStart netip.Addr   `json:"dhcpStart"`
		DHCPEnd   netip.Addr   `json:"dhcpEnd"`
	}
	type vips struct {
		APIVIP     netip.Addr `json:"apiVIP"`
		IngressVIP netip.Addr `json:"ingressVIP"`
	}
	type family struct {
		addresses
		vips
	}
	words := func(f netaddr.Family) family {
		return family{
			addresses{f.MachineNetwork, f.HostAddress, f.DHCPRange.Start, f.DHCPRange.End},
			vips{f.APIVIP, f.IngressVIP},
		}
	}
	first := words(n.Family)
	v := struct {
		Name   string `json:"name"`
		Bridge string `json:"bridge"`
		addresses
		MTU    int    `json:"mtu"`
		Domain string `json:"domain"`
		vips
		Secondary *family `json:"secondary,omitempty"`
	}{Name: n.Name, Bridge: n.Bridge, addresses: first.addresses, MTU: n.MTU, Domain: n.Domain, vips: first.vips}
	if !n.Secondary.IsZero() {
		f := words(n.Secondary)
		v.Secondary = &f
	}
	return json.Marshal(v)
}

// Shared is a libvirt network the lab shares with other labs: what the lab
// adds to it (one DHCP reservation per node and per VIP, DNS records for
// the nodes, api, api-int and the cluster's usual routes) and what it
// expects of it (its bridge and machine network). The lab's down removes
// exactly these entries.
type Shared struct {
	Network string       `json:"network"`
	Bridge  string       `json:"bridge"`
	CIDR    netip.Prefix `json:"cidr"`
	Gateway netip.Addr   `json:"gateway"`
	// BlockStart and BlockEnd are the lab's own addresses on the network
	// (cluster.dhcpRange): its nodes' reservations; no other lab's
	// addresses may fall in it. Block is the two as a range, the shape
	// every reader takes (the two fields keep the golden plans' JSON).
	BlockStart netip.Addr `json:"blockStart"`
	BlockEnd   netip.Addr `json:"blockEnd"`
	Domain     string     `json:"domain"`
	APIVIP     netip.Addr `json:"apiVIP"`
	IngressVIP netip.Addr `json:"ingressVIP"`
	// Reservations are the DHCP reservations: every node, and each VIP
	// under a MAC no machine has, so that the network's dnsmasq never
	// leases a VIP to someone else.
	Reservations []Reservation `json:"reservations"`
	// Records are the DNS records (several names per address).
	Records []Record `json:"records"`
}

// Block is the lab's own range of addresses on the network.
func (s Shared) Block() netaddr.Range { return netaddr.Range{Start: s.BlockStart, End: s.BlockEnd} }

// Reservation is a DHCP reservation.
type Reservation struct {
	MAC  string     `json:"mac"`
	IP   netip.Addr `json:"ip"`
	Name string     `json:"name"`
}

// Record is a DNS address record with its names.
type Record struct {
	IP    netip.Addr `json:"ip"`
	Names []string   `json:"names"`
}

// IngressRoutes are the routes a cluster makes under *.apps that people
// and the installer reach. A shared network cannot take the *.apps
// wildcard (a dnsmasq option: libvirt applies it only by restarting the
// network, which cuts every other lab's nodes off), so these names are
// records of their own.
var IngressRoutes = []string{
	"console-openshift-console", "oauth-openshift", "downloads-openshift-console",
	"canary-openshift-ingress-canary", "default-route-openshift-image-registry",
	"prometheus-k8s-openshift-monitoring", "alertmanager-main-openshift-monitoring",
	"thanos-querier-openshift-monitoring",
}

// resolveShared fills in the shared network's reservations and records,
// once the nodes are known.
func (p *Plan) resolveShared() {
	s := p.Network.Shared
	if s == nil {
		return
	}
	s.Reservations, s.Records = nil, nil
	for _, n := range p.Nodes {
		s.Reservations = append(s.Reservations, Reservation{MAC: n.MAC, IP: n.IP, Name: n.Name})
		s.Records = append(s.Records, Record{IP: n.IP, Names: []string{n.Name, n.Name + "." + s.Domain}})
	}
	// A VIP that is a node's own address (a single-node cluster's) adds
	// names to the node's record and needs no reservation of its own.
	vip := func(ip netip.Addr, what string, names []string) {
		if !ip.IsValid() {
			return
		}
		for i := range s.Records {
			if s.Records[i].IP == ip {
				s.Records[i].Names = append(s.Records[i].Names, names...)
				return
			}
		}
		s.Reservations = append(s.Reservations, Reservation{MAC: MACFor(p.Lab, what), IP: ip, Name: p.Lab + "-" + what})
		s.Records = append(s.Records, Record{IP: ip, Names: names})
	}
	vip(s.APIVIP, "api-vip", []string{"api." + s.Domain, "api-int." + s.Domain})
	var routes []string
	for _, route := range IngressRoutes {
		routes = append(routes, route+".apps."+s.Domain)
	}
	vip(s.IngressVIP, "ingress-vip", routes)
	// The provisioning services' addresses on the machine network (an
	// IPI lab with its provisioning network Disabled) are reserved as the
	// VIPs are, so that the network's dnsmasq leases them to nobody.
	for _, r := range []struct {
		ip   netip.Addr
		what string
	}{{p.Cluster.BootstrapProvisioningIP, "bootstrap-provisioning-ip"}, {p.Cluster.ClusterProvisioningIP, "cluster-provisioning-ip"}} {
		if r.ip.IsValid() && s.CIDR.Contains(r.ip) {
			s.Reservations = append(s.Reservations, Reservation{MAC: MACFor(p.Lab, r.what), IP: r.ip, Name: p.Lab + "-" + r.what})
		}
	}
}

// lldp is the lab's LLDP sender: `vbmcd lldp` over the lab's nodes, in
// the lab's namespace; nil when the lab file turns it off (network.lldp),
// or, in a mode without the LLDP trait (hybrid), unless it turns it on. In a lab over several hosts it
// is the hub's, over the hub's nodes alone: a tap is a name on its own
// host, and another host's vnet3 may be a local tap of another machine.
func (p *Plan) lldp(on *bool, path string) *LLDPSender {
	if on != nil && !*on || on == nil && !p.Traits.LLDP {
		return nil
	}
	uris, nodes := p.libvirtURIs(), p.Nodes
	for _, h := range p.Hosts {
		if h.Hub {
			uris, nodes = []LibvirtURI{{Host: h.Name, URI: h.LibvirtURI}}, p.LocalNodes(h.Name)
		}
	}
	if len(nodes) == 0 {
		return nil // no node to announce to (an empty --domains is every domain)
	}
	return &LLDPSender{Path: path, Env: []string{MarkEnv + "=" + p.Lab}, Log: filepath.Join(p.StateDir, "lldp.log"), Libvirt: uris, Domains: nodeNames(nodes)}
}

// externalBridge is the lab's baremetal bridge, else its first bridge.
func externalBridge(n labconfig.Network) string {
	if hasBridge(n, labconfig.BaremetalBridge) {
		return labconfig.BaremetalBridge
	}
	if len(n.Bridges) > 0 {
		return n.Bridges[0].Name
	}
	return ""
}

// provisioningBridge is the lab's provisioning bridge, else its first
// bridge that is not the external one ("" when there is none: the
// installer's checks say so).
func provisioningBridge(n labconfig.Network, external string) string {
	if hasBridge(n, labconfig.ProvisioningBridge) {
		return labconfig.ProvisioningBridge
	}
	for _, b := range n.Bridges {
		if b.Name != external {
			return b.Name
		}
	}
	return ""
}

// resolveResolver places the host resolver's drop-in, whose server is the
// DNS of the network the lab's records are in.
func (p *Plan) resolveResolver(cfg *labconfig.Config) error {
	n := cfg.Network
	p.Network.HostResolver = n.HostResolver
	for _, dir := range []string{labconfig.DefaultDnsmasqDir, labconfig.DefaultResolvedDir} {
		p.Network.ResolverDropIns = append(p.Network.ResolverDropIns, netplumb.ResolverDropInPath(dir, p.Lab))
	}
	if n.HostResolver != labconfig.ResolverDnsmasq && n.HostResolver != labconfig.ResolverResolved {
		return nil
	}
	r := &Resolver{Kind: n.HostResolver, Path: netplumb.ResolverDropInPath(n.HostResolverDir, p.Lab), Domain: p.Cluster.Domain}
	switch {
	case p.Network.NAT != nil:
		r.DNS = p.Network.NAT.HostAddress
	case p.Network.Shared != nil:
		r.DNS = p.Network.Shared.Gateway
		if r.Kind == labconfig.ResolverDnsmasq {
			r.Apps = p.Network.Shared.IngressVIP
		}
	default:
		return fmt.Errorf("network.hostResolver: %s sends the cluster's names to the lab network's DNS, but this lab borrows the libvirt network on %s, whose DNS has none of its records; name it in network.shared (the lab adds its records there), or use hostResolver: %s", n.HostResolver, n.LibvirtBridge, labconfig.ResolverHosts)
	}
	if !slices.Contains(p.Network.ResolverDropIns, r.Path) {
		p.Network.ResolverDropIns = append([]string{r.Path}, p.Network.ResolverDropIns...)
	}
	p.Network.Resolver = r
	return nil
}

// natBridge names the bridge of the lab's own NAT network: bmnat-<lab>
// when that fits the kernel's 15 bytes, else a prefix and a hash, so two
// long lab names never share a bridge.
func natBridge(lab string) string { return labBridge("bmnat-", lab) }

// labBridge is a lab's bridge name: kind (6 bytes) and the lab's name, or
// when that is longer than a link name may be (15 bytes), the name's first
// 4 bytes and 5 hex digits of its hash.
func labBridge(kind, lab string) string {
	b := kind + lab
	if len(b) <= 15 {
		return b
	}
	h := sha256.Sum256([]byte(lab))
	return fmt.Sprintf("%s%s%x", kind, lab[:4], h[:3])[:15]
}

func resolveNetwork(cfg *labconfig.Config) Network {
	n := cfg.Network
	out := Network{NodeNetwork: labconfig.BaremetalBridge, NMConfDir: n.NetworkManagerConfDir, BridgeNetworks: n.LibvirtNetworks()}
	if len(n.Bridges) > 0 && !hasBridge(n, labconfig.BaremetalBridge) {
		out.NodeNetwork = n.Bridges[0].Name
	}
	top := n.Topology()
	// The lab brings its own NAT network (the machine network, with DHCP
	// reservations and DNS) instead of borrowing libvirt's default one on
	// virbr0: the veth that would join virbr0 joins the lab's NAT bridge.
	if n.Shared != "" && cfg.Cluster.MachineNetwork.IsValid() {
		k := cfg.Cluster
		out.Shared = &Shared{
			Network: n.Shared, Bridge: n.LibvirtBridge, CIDR: k.MachineNetwork,
			Gateway:    k.MachineNetwork.Masked().Addr().Next(),
			BlockStart: k.DHCPRange.Start, BlockEnd: k.DHCPRange.End,
			Domain: k.Name + "." + k.BaseDomain, APIVIP: k.APIVIP, IngressVIP: k.IngressVIP,
		}
	} else if n.LibvirtBridge == labconfig.DefaultLibvirtBridge && cfg.Cluster.MachineNetwork.IsValid() {
		k := cfg.Cluster
		br := natBridge(cfg.Name)
		for i, v := range top.Veths {
			if v.PeerMaster == labconfig.DefaultLibvirtBridge {
				top.Veths[i].PeerMaster = br
			}
		}
		// Its own copies: a single node's address becomes its VIPs
		// (nodeHoldsVIPs), not the cluster's.
		first, second := families(k)
		out.NAT = &NAT{Name: cfg.Name + "-machine", Bridge: br, Family: first, MTU: n.MTU, Domain: k.Name + "." + k.BaseDomain, Secondary: second}
	}
	out.Topology = top
	return out
}

func hasBridge(n labconfig.Network, name string) bool {
	for _, b := range n.Bridges {
		if b.Name == name {
			return true
		}
	}
	return false
}
