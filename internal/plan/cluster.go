package plan

// The cluster: its names, address families, VIPs and topology, and what
// the agent and hybrid modes add to it.

import (
	"cmp"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/bmlab/bmlab/internal/labconfig"
	"github.com/bmlab/bmlab/internal/netaddr"
	"github.com/bmlab/bmlab/internal/ocp"
)

// Cluster is the OpenShift cluster the lab installs: what install-config,
// the hybrid mode's static pods and the lab host's hosts file need.
type Cluster struct {
	Name       string `json:"name"`
	BaseDomain string `json:"baseDomain"`
	// Domain is <name>.<baseDomain>; the names below are in it.
	Domain string `json:"domain"`
	// APIName and APIIntName are api.<domain> and api-int.<domain>;
	// AppsDomain is apps.<domain>, whose every name (*.apps) is the
	// ingress VIP's; ConsoleHost and OAuthHost are two of them.
	APIName     string `json:"apiName"`
	APIIntName  string `json:"apiIntName"`
	AppsDomain  string `json:"appsDomain"`
	ConsoleHost string `json:"consoleHost"`
	OAuthHost   string `json:"oauthHost"`
	// Family is the machine network's first address family: the nodes'
	// subnet (MachineNetwork), the lab host's own address on it
	// (HostAddress: the NAT network's gateway, libvirt's dnsmasq), the
	// nodes' range (DHCPRange) and the VIPs.
	netaddr.Family
	// IPFamily is v4, v6 or dual. For v6 the addresses above are IPv6;
	// for dual they are IPv4 and Secondary is the IPv6 family (the zero
	// Family otherwise: IsZero, as install-config, agent-config and the
	// static pods take it), as the installer orders them.
	IPFamily  string         `json:"ipFamily"`
	Secondary netaddr.Family `json:"secondary,omitzero"`
	Masters   int            `json:"masters"`
	Arbiters  int            `json:"arbiters,omitempty"`
	Workers   int            `json:"workers"`
	// Arch is each pool's CPU architecture (x86_64, aarch64).
	Arch Arches `json:"arch"`
	// ProvisioningNetwork is Managed, Unmanaged or Disabled; the CIDR
	// and bridge are set when it is not Disabled.
	ProvisioningNetwork     string       `json:"provisioningNetwork"`
	ProvisioningNetworkCIDR netip.Prefix `json:"provisioningNetworkCIDR,omitzero"`
	ProvisioningBridge      string       `json:"provisioningBridge,omitempty"`
	// ProvisioningHostAddress is the lab host's address on the
	// provisioning network (its first); ProvisioningDHCPRange the range
	// handed out there (Managed: by the installer's dnsmasq; Unmanaged:
	// by the lab's own DHCP server); ProvisioningNetworkInterface the
	// nodes' NIC on it (IPI). BootstrapProvisioningIP and
	// ClusterProvisioningIP are the provisioning services' addresses, on
	// the provisioning network, or with Disabled (IPI) on the machine
	// network (provisioning.go).
	ProvisioningHostAddress      netip.Addr    `json:"provisioningHostAddress,omitzero"`
	ProvisioningDHCPRange        netaddr.Range `json:"provisioningDHCPRange,omitzero"`
	ProvisioningNetworkInterface string        `json:"provisioningNetworkInterface,omitempty"`
	BootstrapProvisioningIP      netip.Addr    `json:"bootstrapProvisioningIP,omitzero"`
	ClusterProvisioningIP        netip.Addr    `json:"clusterProvisioningIP,omitzero"`
	// ExternalBridge is install-config's externalBridge: the lab's
	// baremetal bridge, else its first.
	ExternalBridge string `json:"externalBridge"`
	// PullSecret and SSHKey are the input files (the flags' when given,
	// else the lab file's, relative to the lab's directory); "" SSHKey
	// means the first of the user's default keys.
	PullSecret string `json:"pullSecret"`
	SSHKey     string `json:"sshKey,omitempty"`
}

// CPU architectures of a node (Node.Arch), as libvirt names them.
const (
	ArchX86_64  = labconfig.ArchX86_64
	ArchAArch64 = labconfig.ArchAArch64
)

// Arches are the pools' CPU architectures, as libvirt names them (x86_64,
// aarch64): install-config's controlPlane, compute and arbiter
// architecture (ipi.Architecture), the nodes' domains, the agent ISO's.
type Arches struct {
	Masters string `json:"masters"`
	Workers string `json:"workers"`
	Arbiter string `json:"arbiter,omitempty"`
}

// Mixed says the workers' architecture is not the masters'.
func (a Arches) Mixed() bool { return a.Workers != a.Masters }

// DHCPRanges are the cluster's DHCP ranges, one per address family.
func (c Cluster) DHCPRanges() []netaddr.Range {
	out := []netaddr.Range{c.DHCPRange}
	if f := c.Secondary; !f.IsZero() {
		out = append(out, f.DHCPRange)
	}
	return out
}

// HasIPv4 and HasIPv6 say whether the machine network has the family
// (both in a dual-stack lab).
func (c Cluster) HasIPv4() bool { return c.IPFamily != labconfig.IPFamilyV6 }

// HasIPv6: see HasIPv4.
func (c Cluster) HasIPv6() bool { return c.IPFamily != labconfig.IPFamilyV4 }

// Agent is what only a mode with the AgentISO trait (the agent mode)
// needs.
type Agent struct {
	// Topology is sno, compact, ha, two-node-fencing or two-node-arbiter.
	Topology string `json:"topology"`
	// Platform is install-config's: none for a single node, else
	// baremetal (with the VIPs and every host's BMC).
	Platform string `json:"platform"`
	// RendezvousIP is the first control-plane node's address, where the
	// others meet.
	RendezvousIP netip.Addr `json:"rendezvousIP"`
	// StaticIPs gives each host its address in agent-config (nmstate).
	StaticIPs bool `json:"staticIPs,omitempty"`
	// Gateway and DNS are the lab host's address on the machine network,
	// for static addresses.
	Gateway netip.Addr `json:"gateway"`
	// MediaAddr is where labctl serves the ISO on the lab network while the
	// BMCs fetch it; MediaURL is the ISO's URL there.
	MediaAddr string `json:"mediaAddr"`
	MediaURL  string `json:"mediaURL"`
	// Fencing is the two-node control plane's fencing through the BMCs.
	Fencing bool `json:"fencing,omitempty"`
}

// Agent topologies.
const (
	TopologySNO            = "sno"
	TopologyCompact        = "compact"
	TopologyHA             = "ha"
	TopologyTwoNodeFencing = "two-node-fencing"
	TopologyTwoNodeArbiter = "two-node-arbiter"
)

// Hybrid is what only a mode with the BootImage trait (the hybrid mode)
// needs.
type Hybrid struct {
	// Image is the RHCOS qcow2 (path or URL) the nodes' disks clone;
	// Backing is where the clones find it: the path itself, or the cache
	// file a URL is downloaded to once.
	Image   string `json:"image"`
	Backing string `json:"backing"`
	// RouterIDs are keepalived's virtual_router_id for the VIPs: the lab
	// file's, else derived from the cluster's name (never 0).
	labconfig.RouterIDs
	// Upstream is where the nodes' coredns forwards other names: the lab
	// network's own DNS (libvirt's dnsmasq on the NAT bridge).
	Upstream []netip.Addr `json:"upstream"`
	// HybridImages are the images of the static pods and the CSR approver
	// (the lab file's, defaults filled in: never empty).
	labconfig.HybridImages
	// Segment names the layer-2 network the nodes are on (the bridge their
	// baremetal bridge is joined to): clusters on one segment must not
	// share VIPs or keepalived router IDs.
	Segment string `json:"segment"`
	// SingleNode is a single-node cluster (masters 1, no workers; one
	// master with workers keeps the bootstrap flow, as kcli without sno),
	// installed as kcli does: bootstrap in place, no bootstrap node, no
	// VIPs (api, api-int and *.apps are the node's own address in the lab
	// network's DNS), no static pods. Image is then the RHCOS live ISO;
	// BootISO is that ISO with the node's bootstrap-in-place ignition
	// embedded, in the node's CD drive behind its blank disk; and
	// InstallationDisk is install-config's bootstrapInPlace.installationDisk,
	// the node's first disk as the guest sees it.
	SingleNode       bool   `json:"singleNode,omitempty"`
	BootISO          string `json:"bootISO,omitempty"`
	InstallationDisk string `json:"installationDisk,omitempty"`
}

// InstallationDisk is a lab node's first disk as the guest sees it: labvirt
// puts it on virtio, the first of which Linux names vda.
const InstallationDisk = "/dev/vda"

// SingleNode reports whether the cluster is a single node (agent or hybrid
// mode): its VIPs are that node's own address.
func (p *Plan) SingleNode() bool {
	return (p.Agent != nil && p.Agent.Topology == TopologySNO) || (p.Hybrid != nil && p.Hybrid.SingleNode)
}

// resolveCluster gathers the cluster's facts: names in its domain,
// addresses, counts, bridges for install-config, the input files.
func resolveCluster(cfg *labconfig.Config, o Options, n Network) Cluster {
	k := cfg.Cluster
	domain := k.Name + "." + k.BaseDomain
	c := Cluster{
		Name: k.Name, BaseDomain: k.BaseDomain, Domain: domain,
		APIName: "api." + domain, APIIntName: "api-int." + domain, AppsDomain: "apps." + domain,
		ConsoleHost: "console-openshift-console.apps." + domain,
		OAuthHost:   "oauth-openshift.apps." + domain,
		Masters:     k.Masters.N(), Arbiters: k.Arbiter.N(), Workers: k.Workers.N(),
		Arch:                Arches{Masters: k.Masters.Arch, Workers: k.Workers.Arch},
		ProvisioningNetwork: cfg.Network.ProvisioningNetwork,
		ExternalBridge:      externalBridge(cfg.Network),
		PullSecret:          inputPath(cmp.Or(o.PullSecret, k.PullSecret), o.Dir),
	}
	if s := cmp.Or(o.SSHKey, k.SSHKey); s != "" {
		c.SSHKey = inputPath(s, o.Dir)
	}
	if c.Arbiters > 0 {
		c.Arch.Arbiter = k.Arbiter.Arch
	}
	if c.ProvisioningNetwork != ocp.ProvisioningDisabled {
		c.ProvisioningNetworkCIDR = k.ProvisioningNetworkCIDR
		c.ProvisioningBridge = provisioningBridge(cfg.Network, c.ExternalBridge)
	}
	c.IPFamily = k.IPFamily
	c.Family, c.Secondary = families(k)
	return c
}

// families are the machine network's address families as the lab file
// gives them: the first, and a dual-stack lab's IPv6 one (the zero Family
// otherwise). The lab host's address on each is its first.
func families(k labconfig.Cluster) (netaddr.Family, netaddr.Family) {
	first := netaddr.Family{MachineNetwork: k.MachineNetwork, HostAddress: k.MachineNetwork.Masked().Addr().Next(),
		DHCPRange: k.DHCPRange, APIVIP: k.APIVIP, IngressVIP: k.IngressVIP}
	if k.IPFamily != labconfig.IPFamilyDual {
		return first, netaddr.Family{}
	}
	return first, netaddr.Family{MachineNetwork: k.MachineNetworkV6, HostAddress: k.MachineNetworkV6.Masked().Addr().Next(),
		DHCPRange: k.DHCPRangeV6, APIVIP: k.APIVIPV6, IngressVIP: k.IngressVIPV6}
}

// checkTopology refuses what the mode's traits say it cannot install (one
// node, two with fencing or an arbiter, bonds, a single node's workers),
// naming the modes (of modes) that can.
func checkTopology(cfg *labconfig.Config, mode string, t Traits, modes []ModeSpec) error {
	k := cfg.Cluster
	var errs []string
	if !t.SingleNode && k.Masters.N() == 1 {
		errs = append(errs, fmt.Sprintf("cluster.masters.count: 1 (a single-node cluster) is installed by --mode %s; %s needs 3 masters", firstOr(modesWith(modes, func(t Traits) bool { return t.SingleNode })), mode))
	}
	if !t.TwoNode {
		twoNode := firstOr(modesWith(modes, func(t Traits) bool { return t.TwoNode }))
		switch {
		case k.Fencing:
			errs = append(errs, fmt.Sprintf("cluster.fencing: a two-node control plane with fencing is installed by --mode %s, not %s", twoNode, mode))
		case k.Arbiter.N() > 0:
			errs = append(errs, fmt.Sprintf("cluster.arbiter: a two-node control plane with an arbiter is installed by --mode %s, not %s", twoNode, mode))
		}
	}
	if t.AgentISO && k.IPFamily == labconfig.IPFamilyV6 && !k.Agent.StaticIPs {
		errs = append(errs, "cluster.agent.staticIPs: an IPv6-only agent lab needs static addresses: the hosts meet at the first master's planned address, and a DHCPv6 reservation holds only for a client that sends the DUID-LL of its MAC, which the agent image's NetworkManager is not known to do; set cluster.agent.staticIPs: true")
	}
	for _, r := range []struct {
		field string
		role  labconfig.Role
	}{{"masters", k.Masters}, {"workers", k.Workers}, {"arbiter", k.Arbiter}} {
		if r.role.Bond != "" && !t.Bonds {
			errs = append(errs, fmt.Sprintf("cluster.%s.bond: the %s mode writes its nodes' network through their ignition, which has no bond; bond the nodes with --mode %s", r.field, mode, strings.Join(modesWith(modes, func(t Traits) bool { return t.Bonds }), " or ")))
		}
	}
	if t.SingleNode && !t.SingleNodeWorkers && k.Masters.N() == 1 && k.Workers.N() > 0 {
		errs = append(errs, "cluster.workers.count: a single-node cluster has no workers at install; add them afterwards (labctl add-node) or use 3 masters")
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "\n"))
	}
	return nil
}

// resolveAgent gives the agent mode its topology, the rendezvous address
// (the first master's), and where the ISO is served. A single node has no
// VIPs: the lab network's DNS gives api, api-int and *.apps its address.
func (p *Plan) resolveAgent(cfg *labconfig.Config) {
	k := cfg.Cluster
	a := &Agent{Platform: "baremetal", StaticIPs: k.Agent.StaticIPs, Gateway: p.Cluster.HostAddress, Fencing: k.Fencing}
	switch {
	case k.Masters.N() == 1:
		a.Topology, a.Platform = TopologySNO, "none"
	case k.Fencing:
		a.Topology = TopologyTwoNodeFencing
	case k.Arbiter.N() > 0:
		a.Topology = TopologyTwoNodeArbiter
	case k.Workers.N() == 0:
		a.Topology = TopologyCompact
	default:
		a.Topology = TopologyHA
	}
	var first Node
	for _, n := range p.Nodes {
		if n.Role == ocp.RoleMaster {
			first, a.RendezvousIP = n, n.IP
			break
		}
	}
	a.MediaAddr = net.JoinHostPort(p.Cluster.HostAddress.String(), strconv.Itoa(k.Agent.MediaPort))
	a.MediaURL = "http://" + a.MediaAddr + "/" + filepath.Base(p.Paths.AgentISO)
	if a.Topology == TopologySNO {
		p.nodeHoldsVIPs(first)
	}
	p.Agent = a
}

// nodeHoldsVIPs makes a single node's address the one the lab network's
// DNS gives api, api-int and *.apps.
func (p *Plan) nodeHoldsVIPs(n Node) {
	ip := n.IP
	if p.Network.NAT != nil {
		p.Network.NAT.APIVIP, p.Network.NAT.IngressVIP = ip, ip
		if f := &p.Network.NAT.Secondary; !f.IsZero() {
			f.APIVIP, f.IngressVIP = n.SecondaryIP, n.SecondaryIP
		}
	}
	if p.Network.Shared != nil {
		p.Network.Shared.APIVIP, p.Network.Shared.IngressVIP = ip, ip
	}
}

// RouterIDs derives keepalived's virtual_router_ids from the cluster's
// name: deterministic, distinct for the two VIPs, in 1-255. Two clusters
// on one network may still draw the same; preflight finds that and the lab
// file's cluster.hybrid.*RouterID settle it.
func RouterIDs(cluster string) (api, ingress int) {
	h := sha256.Sum256([]byte("bmlab-vrrp/" + cluster))
	api = 1 + int(h[0])%255
	ingress = 1 + int(h[1])%255
	if ingress == api {
		ingress = 1 + api%255
	}
	return api, ingress
}
