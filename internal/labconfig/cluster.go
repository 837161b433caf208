package labconfig

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/bmlab/bmlab/internal/netaddr"
	"github.com/bmlab/bmlab/internal/ocp"
	"github.com/bmlab/bmlab/internal/personality"
)

// Cluster defaults, those of the seed lab.
const (
	DefaultBaseDomain      = "bmlab.test" // RFC 2606: never a real zone
	DefaultMasters         = 3
	DefaultMasterVCPUs     = 4
	DefaultMasterMemoryMiB = 16 * 1024
	DefaultWorkers         = 2
	DefaultWorkerVCPUs     = 2
	DefaultWorkerMemoryMiB = 8 * 1024
	DefaultDiskGiB         = 120 // thin: qcow2 grows as it is written
	DefaultRedfishPort     = 8000
	DefaultIPMIPortBase    = 6230
	DefaultBMCUsername     = "admin"
	DefaultBMCPassword     = "password"
	DefaultPullSecret      = "pull-secret.json"
)

// IP families of a lab's machine network (cluster.ipFamily).
const (
	// IPFamilyV4 is IPv4 only, the default.
	IPFamilyV4 = "v4"
	// IPFamilyV6 is IPv6 only: machineNetwork, dhcpRange and the VIPs
	// hold IPv6 addresses.
	IPFamilyV6 = "v6"
	// IPFamilyDual is dual stack, IPv4 first as the installer orders the
	// families: machineNetwork, dhcpRange and the VIPs hold IPv4, the
	// *V6 fields IPv6.
	IPFamilyDual = "dual"
)

// IPv6 defaults: dev-scripts' unique local network (RFC 4193; configuration
// text, nothing in the tests sends traffic to it outside a namespace), with
// the VIPs, the DHCP range and the lab host at the same offsets as the
// IPv4 seed's (0x20-0x60 here).
var (
	DefaultMachineNetworkV6          = netip.MustParsePrefix("fd2e:6f44:5dd8:c956::/120")
	DefaultDHCPRangeV6               = netaddr.Range{Start: netip.MustParseAddr("fd2e:6f44:5dd8:c956::20"), End: netip.MustParseAddr("fd2e:6f44:5dd8:c956::60")}
	DefaultAPIVIPV6                  = netip.MustParseAddr("fd2e:6f44:5dd8:c956::5")
	DefaultIngressVIPV6              = netip.MustParseAddr("fd2e:6f44:5dd8:c956::4")
	DefaultProvisioningNetworkCIDRV6 = netip.MustParsePrefix("fd00:1101::/64") // dev-scripts'
)

// Seed network values. 192.168.111.0/24 is the dev-scripts convention; it is
// configuration text here, nothing in the tests sends traffic to it.
var (
	DefaultMachineNetwork          = netip.MustParsePrefix("192.168.111.0/24")
	DefaultDHCPRange               = netaddr.Range{Start: netip.MustParseAddr("192.168.111.20"), End: netip.MustParseAddr("192.168.111.60")}
	DefaultAPIVIP                  = netip.MustParseAddr("192.168.111.5")
	DefaultIngressVIP              = netip.MustParseAddr("192.168.111.4")
	DefaultProvisioningNetworkCIDR = netip.MustParsePrefix("172.22.0.0/24") // the installer's own default
)

// Cluster is the OpenShift cluster `labctl up --mode ipi-baremetal` builds:
// its nodes, its network and how the installer reaches the nodes' BMCs.
// Whether it has a provisioning network is network.provisioningNetwork.
type Cluster struct {
	// Name is metadata.name in install-config (default: the lab's name).
	Name       string `json:"clusterName,omitempty"`
	BaseDomain string `json:"baseDomain,omitempty"`
	Masters    Role   `json:"masters,omitzero"`
	Workers    Role   `json:"workers,omitzero"`
	// IPFamily is v4 (default), v6 or dual: the machine network's address
	// families. For v6 the fields below hold IPv6; for dual they hold IPv4
	// and the *V6 fields IPv6.
	IPFamily string `json:"ipFamily,omitempty"`
	// MachineNetwork is the nodes' subnet on the baremetal bridge.
	MachineNetwork netip.Prefix `json:"machineNetwork,omitzero"`
	// DHCPRange is the part of MachineNetwork that DHCP hands out; the VIPs
	// must stay outside it.
	DHCPRange  netaddr.Range `json:"dhcpRange,omitzero"`
	APIVIP     netip.Addr    `json:"apiVIP,omitzero"`
	IngressVIP netip.Addr    `json:"ingressVIP,omitzero"`
	// MachineNetworkV6, DHCPRangeV6, APIVIPV6 and IngressVIPV6 are a
	// dual-stack lab's IPv6 family (default: the IPv6 defaults above);
	// each node has an address of each family, in the same place of each
	// range.
	MachineNetworkV6 netip.Prefix  `json:"machineNetworkV6,omitzero"`
	DHCPRangeV6      netaddr.Range `json:"dhcpRangeV6,omitzero"`
	APIVIPV6         netip.Addr    `json:"apiVIPV6,omitzero"`
	IngressVIPV6     netip.Addr    `json:"ingressVIPV6,omitzero"`
	// ProvisioningNetworkCIDR is the provisioning subnet when
	// network.provisioningNetwork is Managed or Unmanaged (default
	// 172.22.0.0/24, as the installer's); unset when Disabled.
	ProvisioningNetworkCIDR netip.Prefix `json:"provisioningNetworkCIDR,omitzero"`
	// ProvisioningDHCPRange is the provisioning network's DHCP range:
	// with Managed, the one the installer's dnsmasq hands out
	// (install-config's provisioningDHCPRange); with Unmanaged, the one
	// the lab's own DHCP server hands out (the site's, which the installer
	// leaves to you). Default: the installer's, the CIDR's 10th address
	// to its last but one.
	ProvisioningDHCPRange netaddr.Range `json:"provisioningDHCPRange,omitzero"`
	// BootstrapProvisioningIP and ClusterProvisioningIP are where the
	// bootstrap VM's and then the cluster's provisioning services
	// (Ironic, its dnsmasq and httpd) listen: on the provisioning network
	// (default its .2 and .3, the installer's), or with Disabled on the
	// machine network (default its 7th and 8th addresses, dev-scripts').
	BootstrapProvisioningIP netip.Addr `json:"bootstrapProvisioningIP,omitzero"`
	ClusterProvisioningIP   netip.Addr `json:"clusterProvisioningIP,omitzero"`
	BMC                     BMC        `json:"bmc,omitzero"`
	// PullSecret is the path of the pull secret file (default
	// pull-secret.json, relative to the lab file's directory).
	PullSecret string `json:"pullSecret,omitempty"`
	// SSHKey is the path of the public key the nodes accept (default: the
	// first of ~/.ssh/id_ed25519.pub, ~/.ssh/id_rsa.pub that exists).
	SSHKey string `json:"sshKey,omitempty"`
	// Installer is the path of openshift-install (default: the lab's
	// directory, then PATH).
	Installer string `json:"installer,omitempty"`
	// OC is the path of the OpenShift client, which adds nodes to a
	// running cluster (default: the lab's directory, then PATH).
	OC string `json:"oc,omitempty"`
	// Image is the RHCOS qcow2 the hybrid mode's nodes boot (a path, or an
	// http(s) URL downloaded once into the lab's directory); each node's
	// disk is a thin clone of it. IPI labs do not use it.
	Image string `json:"image,omitempty"`
	// Hybrid holds the hybrid mode's settings.
	Hybrid Hybrid `json:"hybrid,omitzero"`
	// Arbiter is the arbiter node of a two-node control plane (count 1;
	// agent mode): it runs etcd's third member, no workloads.
	Arbiter Role `json:"arbiter,omitzero"`
	// Fencing makes a two-node control plane (masters count 2, no
	// arbiter) fence its nodes through their BMCs (agent mode): each
	// node's Redfish address and credentials go into install-config.
	Fencing bool `json:"fencing,omitempty"`
	// Agent holds the agent mode's settings.
	Agent Agent `json:"agent,omitzero"`
}

// Agent are the settings of `labctl up --mode agent`.
type Agent struct {
	// StaticIPs gives every node its planned address in agent-config
	// (an nmstate networkConfig) instead of a DHCP reservation alone.
	StaticIPs bool `json:"staticIPs,omitempty"`
	// MediaPort is where labctl serves the agent ISO on the lab host's
	// address while the BMCs fetch it (default 8090).
	MediaPort int `json:"mediaPort,omitempty"`
}

// DefaultMediaPort serves the agent ISO to the BMCs.
const DefaultMediaPort = 8090

// Sizes the agent-based installer requires: a single node runs every
// control-plane and worker service (8 vCPUs, 16 GiB); an arbiter only
// etcd's third member (2 vCPUs, 8 GiB).
const (
	DefaultSNOVCPUs         = 8
	DefaultArbiterVCPUs     = 2
	DefaultArbiterMemoryMiB = 8 * 1024
	DefaultArbiterDiskGiB   = 50
)

// Hybrid are the settings of `labctl up --mode hybrid`.
type Hybrid struct {
	// RouterIDs default to ones derived from the cluster's name. Set them
	// when another cluster on the same network has the same ones.
	RouterIDs
	// HybridImages default to the OKD images of the same names.
	HybridImages
	// HostsFile receives the api and console/oauth entries for the lab
	// host (default /etc/hosts).
	HostsFile string `json:"hostsFile,omitempty"`
}

// RouterIDs are keepalived's virtual_router_id for the hybrid mode's VIPs,
// as the lab file sets them (0: derived) and as the plan resolves them
// (plan.Hybrid embeds them).
type RouterIDs struct {
	APIRouterID     int `json:"apiRouterID,omitempty"`
	IngressRouterID int `json:"ingressRouterID,omitempty"`
}

// HybridImages are the images of the hybrid mode's static pods and its CSR
// auto-approver, as the lab file sets them and the plan takes them
// (plan.Hybrid embeds them).
type HybridImages struct {
	KeepalivedImage string `json:"keepalivedImage,omitempty"`
	CoreDNSImage    string `json:"corednsImage,omitempty"`
	HAProxyImage    string `json:"haproxyImage,omitempty"`
	// ApproverImage runs the CSR auto-approver (needs oc).
	ApproverImage string `json:"approverImage,omitempty"`
}

// Default images of the hybrid mode's static pods: OKD's, by tag. A lab
// for a given release should pin the release payload's digests here.
const (
	DefaultKeepalivedImage = "quay.io/openshift/origin-keepalived-ipfailover:latest"
	DefaultCoreDNSImage    = "quay.io/openshift/origin-coredns:latest"
	DefaultHAProxyImage    = "quay.io/openshift/origin-haproxy-router:latest"
	DefaultApproverImage   = "quay.io/openshift/origin-cli:latest"
	DefaultHostsFile       = "/etc/hosts"
)

// Role sizes the nodes of one role. Memory is in MiB, disks in GiB; disks
// are thin, so their size is a ceiling, not an allocation.
type Role struct {
	// Count is the number of nodes; nil means the default (a pointer
	// because 0 workers is a valid compact cluster). Set after defaults.
	Count      *int  `json:"count,omitempty"`
	VCPUs      int   `json:"vcpus,omitempty"`
	MemoryMiB  int   `json:"memoryMiB,omitempty"`
	DiskGiB    int   `json:"diskGiB,omitempty"`
	ExtraDisks []int `json:"extraDisks,omitempty"` // sizes in GiB
	// Placement names the host (of the lab's hosts:) of each node in
	// order; empty spreads the nodes over the hosts round-robin.
	Placement []string `json:"placement,omitempty"`
	// Arch is the nodes' CPU architecture, as libvirt names it: x86_64
	// (default) or aarch64 (install-config's amd64 and arm64). The
	// arbiter's defaults to the masters'.
	Arch string `json:"arch,omitempty"`
	// Personality is the vendor BMC the role's nodes have (vbmcd's
	// personalities: generic, idrac9, idrac10, ilo6, supermicro-x13);
	// empty is generic.
	Personality string `json:"personality,omitempty"`
	// Personalities gives the nodes of the role a personality each, in
	// order, as Placement gives them a host: the i-th node's; an empty
	// entry, or a node past the list (such as a worker added with
	// labctl add-node), has the role's Personality.
	Personalities []string `json:"personalities,omitempty"`
	// Bond, when set, gives the role's nodes two NICs on the machine
	// network, bonded (bond0) in this mode (ocp.BondModes: active-backup,
	// balance-rr …), as dev-scripts' BOND_PRIMARY_INTERFACE and
	// BOND_CONFIG do: the bond is in install-config's hosts' networkConfig
	// (ipi-baremetal) or agent-config's (agent).
	Bond string `json:"bond,omitempty"`
}

// PersonalityOf is the personality of the role's node i (empty: generic)
// and the role's field it comes from: its own entry of Personalities
// ("personalities[i]"), else the role's Personality ("personality").
func (r Role) PersonalityOf(i int) (name, field string) {
	if i < len(r.Personalities) && r.Personalities[i] != "" {
		return r.Personalities[i], fmt.Sprintf("personalities[%d]", i)
	}
	return r.Personality, "personality"
}

// CPU architectures of a pool (Role.Arch), as libvirt and qemu name them.
const (
	ArchX86_64  = "x86_64"
	ArchAArch64 = "aarch64"
)

// N is the number of nodes (0 when Count is unset).
func (r Role) N() int {
	if r.Count == nil {
		return 0
	}
	return *r.Count
}

// BMC says how the installer (and Ironic in the cluster) reaches vbmcd.
type BMC struct {
	// Kind is redfish-virtualmedia (default), redfish or ipmi.
	Kind string `json:"kind,omitempty"`
	// Address is the host or IP the BMCs are reached at (default: the first
	// address of the machine network, the host's side of the baremetal bridge).
	Address string `json:"address,omitempty"`
	// RedfishPort is vbmcd's Redfish port (default 8000).
	RedfishPort int `json:"redfishPort,omitempty"`
	// IPMIPortBase is the UDP port of the first node's IPMI BMC; the others
	// follow (default 6230).
	IPMIPortBase int    `json:"ipmiPortBase,omitempty"`
	Username     string `json:"username,omitempty"`
	Password     string `json:"password,omitempty"`
	// PasswordFile names a file (0600, relative to the lab file) holding
	// the password, so the lab file can be shared or committed without
	// it. BMLAB_BMC_PASSWORD in the environment overrides both.
	PasswordFile string `json:"passwordFile,omitempty"`
	// TLS (default true) serves Redfish over HTTPS with vbmcd's self-signed
	// certificate, so install-config turns certificate verification off.
	TLS *bool `json:"tls,omitempty"`
	// LabCA (default true, with TLS) has labctl make a CA for the lab and
	// vbmcd serve a certificate it issued for the BMC address, so the
	// installer verifies the BMCs (install-config's bmcVerifyCA, OpenShift
	// 4.21 and later). false keeps vbmcd's self-signed certificate and
	// turns verification off (disableCertificateVerification), as older
	// releases need.
	LabCA *bool `json:"labCA,omitempty"`
	// NodeAccounts (default true) gives every node a BMC user of its own,
	// bound to its system, as every real server has: install-config names
	// each host's, and firmware updates through it need no Targets. false
	// gives every host the lab's one user.
	NodeAccounts *bool `json:"nodeAccounts,omitempty"`
	// Network, when set, gives every node's BMC an address of its own on a
	// network of its own, as a data centre's out-of-band management
	// network: a bridge on the lab host with this subnet (IPv4 or IPv6, a
	// family the machine network has), the lab host at its first address
	// and the nodes' BMCs at the next ones, in order. Each BMC serves its
	// node alone: Redfish on port 443 (80 without TLS), IPMI on port 623.
	// The nodes reach it through the lab host, their default gateway.
	Network netip.Prefix `json:"network,omitzero"`
	// Routes names the lab networks the BMC network is routed to, as a
	// rack's router routes its out-of-band network: machine (the machine
	// network, from which the installer's Ironic and the nodes reach the
	// BMCs; always there) and provisioning. Each BMC fetches virtual media
	// from its own address, so an image served on a network it is not
	// routed to is out of its reach, as on a rack whose BMC network
	// reaches no provisioning network (openshift/installer#10876).
	// Default, with a BMC network: [machine].
	Routes []string `json:"routes,omitempty"`
}

// Networks a BMC network can be routed to (cluster.bmc.routes).
const (
	RouteMachine      = "machine"
	RouteProvisioning = "provisioning"
)

// UseNodeAccounts reports whether each node has a BMC user of its own.
func (b BMC) UseNodeAccounts() bool { return b.NodeAccounts == nil || *b.NodeAccounts }

// UseLabCA reports whether the lab's BMCs have a certificate from a lab CA.
func (b BMC) UseLabCA() bool { return b.UseTLS() && (b.LabCA == nil || *b.LabCA) }

// UseTLS reports whether Redfish is served over HTTPS (the default).
func (b BMC) UseTLS() bool { return b.TLS == nil || *b.TLS }

func (c *Config) setClusterDefaults() {
	k := &c.Cluster
	if k.Name == "" {
		k.Name = c.Name
	}
	if k.BaseDomain == "" {
		k.BaseDomain = DefaultBaseDomain
	}
	if k.Masters.Count != nil && *k.Masters.Count == 1 && k.Masters.VCPUs == 0 {
		k.Masters.VCPUs = DefaultSNOVCPUs
	}
	if k.Masters.Count != nil && (*k.Masters.Count == 1 || *k.Masters.Count == 2) && k.Workers.Count == nil {
		zero := 0
		k.Workers.Count = &zero // one or two nodes have no workers unless asked
	}
	k.Masters.setDefaults(DefaultMasters, DefaultMasterVCPUs, DefaultMasterMemoryMiB)
	if k.Arbiter.Count != nil && *k.Arbiter.Count > 0 {
		if k.Arbiter.DiskGiB == 0 {
			k.Arbiter.DiskGiB = DefaultArbiterDiskGiB
		}
		if k.Arbiter.Arch == "" {
			k.Arbiter.Arch = k.Masters.Arch
		}
		k.Arbiter.setDefaults(0, DefaultArbiterVCPUs, DefaultArbiterMemoryMiB)
	}
	if k.Agent.MediaPort == 0 {
		k.Agent.MediaPort = DefaultMediaPort
	}
	k.Workers.setDefaults(DefaultWorkers, DefaultWorkerVCPUs, DefaultWorkerMemoryMiB)
	if k.IPFamily == "" {
		k.IPFamily = IPFamilyV4
	}
	// The other addresses default with the network, never alone: a
	// changed network with the seed's VIPs would fail validation for a
	// value the user never wrote.
	if k.IPFamily == IPFamilyV6 {
		defaultFamily(&k.MachineNetwork, &k.DHCPRange, &k.APIVIP, &k.IngressVIP,
			DefaultMachineNetworkV6, DefaultDHCPRangeV6, DefaultAPIVIPV6, DefaultIngressVIPV6)
	} else {
		defaultFamily(&k.MachineNetwork, &k.DHCPRange, &k.APIVIP, &k.IngressVIP,
			DefaultMachineNetwork, DefaultDHCPRange, DefaultAPIVIP, DefaultIngressVIP)
	}
	if k.IPFamily == IPFamilyDual && !k.DHCPRangeV6.Start.IsValid() && !k.APIVIPV6.IsValid() && !k.IngressVIPV6.IsValid() {
		// IPv6 addresses without their network stay so: validation
		// asks for the network.
		defaultFamily(&k.MachineNetworkV6, &k.DHCPRangeV6, &k.APIVIPV6, &k.IngressVIPV6,
			DefaultMachineNetworkV6, DefaultDHCPRangeV6, DefaultAPIVIPV6, DefaultIngressVIPV6)
	}
	if c.Network.ProvisioningNetwork != ocp.ProvisioningDisabled && !k.ProvisioningNetworkCIDR.IsValid() {
		k.ProvisioningNetworkCIDR = DefaultProvisioningNetworkCIDR
		if k.IPFamily == IPFamilyV6 {
			k.ProvisioningNetworkCIDR = DefaultProvisioningNetworkCIDRV6
		}
	}
	c.setProvisioningDefaults()
	b := &k.BMC
	if len(b.Routes) == 0 && b.Network.IsValid() {
		b.Routes = []string{RouteMachine}
	}
	if b.Kind == "" {
		b.Kind = ocp.BMCRedfishVirtualMedia
	}
	if b.Address == "" && k.MachineNetwork.IsValid() {
		b.Address = k.MachineNetwork.Masked().Addr().Next().String()
	}
	if b.RedfishPort == 0 {
		b.RedfishPort = DefaultRedfishPort
	}
	if b.IPMIPortBase == 0 {
		b.IPMIPortBase = DefaultIPMIPortBase
	}
	if b.Username == "" {
		b.Username = DefaultBMCUsername
	}
	if b.Password == "" && b.PasswordFile == "" {
		b.Password = DefaultBMCPassword
	}
	if b.TLS == nil {
		yes := true
		b.TLS = &yes
	}
	if k.PullSecret == "" {
		k.PullSecret = DefaultPullSecret
	}
	h := &k.Hybrid
	for _, d := range []struct {
		v   *string
		def string
	}{{&h.KeepalivedImage, DefaultKeepalivedImage}, {&h.CoreDNSImage, DefaultCoreDNSImage},
		{&h.HAProxyImage, DefaultHAProxyImage}, {&h.ApproverImage, DefaultApproverImage}, {&h.HostsFile, DefaultHostsFile}} {
		if *d.v == "" {
			*d.v = d.def
		}
	}
}

// defaultFamily sets one family's network and, with it only, its range
// and VIPs.
func defaultFamily(mn *netip.Prefix, r *netaddr.Range, api, ingress *netip.Addr, dmn netip.Prefix, dr netaddr.Range, dapi, dingress netip.Addr) {
	if mn.IsValid() {
		return
	}
	*mn = dmn
	if !r.Start.IsValid() {
		*r = dr
	}
	if !api.IsValid() {
		*api = dapi
	}
	if !ingress.IsValid() {
		*ingress = dingress
	}
}

func (r *Role) setDefaults(count, vcpus, memMiB int) {
	if r.Count == nil {
		r.Count = &count
	}
	if r.Arch == "" {
		r.Arch = ArchX86_64
	}
	if r.VCPUs == 0 {
		r.VCPUs = vcpus
	}
	if r.MemoryMiB == 0 {
		r.MemoryMiB = memMiB
	}
	if r.DiskGiB == 0 {
		r.DiskGiB = DefaultDiskGiB
	}
}

// networkBootRefusal says why a node of personality p cannot be in this
// lab ("" when it can): with bmc.kind redfish, a personality with a
// network boot scheme of its own (an iLO 6: ilo5://ADDR, the
// baremetal-operator's ilo5 driver, network boot by ilo-ipxe) is named by
// it, and that driver boots the node from the provisioning network, reaches
// the BMC by its address alone (RIBCL and the iLO's Redfish ids, served at a
// BMC of its own) and over HTTPS only.
func (c *Config) networkBootRefusal(p *personality.Personality) string {
	b := c.Cluster.BMC
	if p.NetworkBootScheme == "" || b.Kind != ocp.BMCRedfish {
		return ""
	}
	what := fmt.Sprintf("%s with bmc.kind %s is enrolled as %s://ADDR (the vendor's network boot driver)", p.Name, b.Kind, p.NetworkBootScheme)
	switch {
	case c.Network.ProvisioningNetwork == ocp.ProvisioningDisabled:
		return what + ", which boots the node from the provisioning network, and network.provisioningNetwork is Disabled; set network.provisioningNetwork: Managed (or Unmanaged), or use bmc.kind: " + ocp.BMCRedfishVirtualMedia + " (virtual media, no provisioning network)"
	case !b.Network.IsValid():
		return what + ", which reaches the BMC at an address of its own, and the lab has no BMC network; set cluster.bmc.network (e.g. 192.168.125.0/24), or use bmc.kind: " + ocp.BMCRedfishVirtualMedia
	case !b.UseTLS():
		return what + ", which speaks HTTPS only, and cluster.bmc.tls is false; drop tls: false"
	}
	return ""
}

// validateCluster checks the cluster section's shape. The rules the
// OpenShift installer applies (VIPs in the machine network, DNS names, BMC
// schemes) are internal/ipi's, which words them as the installer does.
func (c *Config) validateCluster() []error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf("cluster."+format, a...)) }
	k := &c.Cluster
	if k.Name == "" {
		add("clusterName: must be set")
	}
	if k.BaseDomain == "" {
		add("baseDomain: must be set")
	}
	for _, r := range []struct {
		field string
		role  Role
		min   int
	}{{"masters", k.Masters, 1}, {"workers", k.Workers, 0}, {"arbiter", k.Arbiter, 0}} {
		switch a := r.role.Arch; a {
		case ArchX86_64, ArchAArch64:
		case "":
			if r.field != "arbiter" {
				add("%s.arch: must be set", r.field)
			}
		case "amd64", "arm64":
			add("%s.arch: %q is install-config's name; the lab file names an architecture as libvirt does: %s or %s (%s is %s)", r.field, a, ArchX86_64, ArchAArch64, a, map[string]string{"amd64": ArchX86_64, "arm64": ArchAArch64}[a])
		default:
			add("%s.arch: %q is not one of %s (default), %s", r.field, a, ArchX86_64, ArchAArch64)
		}
		if pers, err := personality.Lookup(r.role.Personality); err != nil {
			add("%s.personality: %v", r.field, err)
		} else if msg := c.networkBootRefusal(pers); msg != "" {
			add("%s.personality: %s", r.field, msg)
		}
		if len(r.role.Personalities) > r.role.N() {
			add("%s.personalities: %d personalities for %d nodes; give one per node at most (an empty entry, or a node past the list, takes %s.personality)", r.field, len(r.role.Personalities), r.role.N(), r.field)
		}
		for i, name := range r.role.Personalities {
			if name == "" {
				continue
			}
			if pers, err := personality.Lookup(name); err != nil {
				add("%s.personalities[%d]: %v", r.field, i, err)
			} else if msg := c.networkBootRefusal(pers); msg != "" {
				add("%s.personalities[%d]: %s", r.field, i, msg)
			}
		}
		switch m := r.role.Bond; {
		case m == "" || slices.Contains(ocp.BondModes, m):
		case m == "802.3ad":
			add("%s.bond: 802.3ad (LACP) needs a switch that speaks LACP, and the lab's is a Linux bridge; use one of %s", r.field, strings.Join(ocp.BondModes, ", "))
		default:
			add("%s.bond: %q is not a bond mode; use one of %s (as dev-scripts' BOND_CONFIG)", r.field, m, strings.Join(ocp.BondModes, ", "))
		}
		if r.field == "arbiter" {
			continue
		}
		if r.role.N() < r.min {
			add("%s.count: %d is less than %d", r.field, r.role.N(), r.min)
		}
		if r.role.VCPUs < 1 || r.role.MemoryMiB < 1 || r.role.DiskGiB < 1 {
			add("%s: vcpus %d, memoryMiB %d and diskGiB %d must all be positive", r.field, r.role.VCPUs, r.role.MemoryMiB, r.role.DiskGiB)
		}
		for i, d := range r.role.ExtraDisks {
			if d < 1 {
				add("%s.extraDisks[%d]: %d GiB must be positive", r.field, i, d)
			}
		}
	}
	mn := k.MachineNetwork
	switch k.IPFamily {
	case IPFamilyV4, IPFamilyV6:
		for _, f := range []struct {
			field string
			set   bool
		}{{"machineNetworkV6", k.MachineNetworkV6.IsValid()}, {"dhcpRangeV6", k.DHCPRangeV6.Start.IsValid() || k.DHCPRangeV6.End.IsValid()},
			{"apiVIPV6", k.APIVIPV6.IsValid()}, {"ingressVIPV6", k.IngressVIPV6.IsValid()}} {
			if f.set {
				add("%s: is a dual-stack lab's second family, but ipFamily is %s; set ipFamily: dual, or write the IPv6 addresses in machineNetwork, dhcpRange, apiVIP and ingressVIP with ipFamily: v6", f.field, k.IPFamily)
			}
		}
		errs = append(errs, family(k.IPFamily, "", mn, k.DHCPRange, k.APIVIP, k.IngressVIP, k.IPFamily == IPFamilyV6)...)
	case IPFamilyDual:
		errs = append(errs, family(k.IPFamily, "", mn, k.DHCPRange, k.APIVIP, k.IngressVIP, false)...)
		if !k.MachineNetworkV6.IsValid() {
			add("machineNetworkV6: must be set when dhcpRangeV6, apiVIPV6 or ingressVIPV6 are; name the IPv6 network they are in (or drop them all for the default %s)", DefaultMachineNetworkV6)
		} else {
			errs = append(errs, family(k.IPFamily, "V6", k.MachineNetworkV6, k.DHCPRangeV6, k.APIVIPV6, k.IngressVIPV6, true)...)
		}
	default:
		add("ipFamily: %q is not one of %s (default), %s, %s", k.IPFamily, IPFamilyV4, IPFamilyV6, IPFamilyDual)
	}
	if k.IPFamily != IPFamilyV4 && c.Network.Shared != "" {
		add("ipFamily: %s on a shared libvirt network (network.shared %s) is not supported: labctl adds IPv4 reservations and records to a shared network only; give the lab its own NAT network (drop network.shared) or use ipFamily: v4", k.IPFamily, c.Network.Shared)
	}
	if c.Network.ProvisioningNetwork == ocp.ProvisioningDisabled && k.ProvisioningNetworkCIDR.IsValid() {
		add("provisioningNetworkCIDR: %s is set but network.provisioningNetwork is Disabled", k.ProvisioningNetworkCIDR)
	}
	if p := k.ProvisioningNetworkCIDR; p.IsValid() && mn.IsValid() && p.Overlaps(mn) {
		add("provisioningNetworkCIDR: %s overlaps machineNetwork %s; the two networks must be apart (the installer's default is %s)", p, mn, DefaultProvisioningNetworkCIDR)
	}
	switch n, arb := k.Masters.N(), k.Arbiter.N(); {
	case n == 2 && arb == 0 && !k.Fencing:
		add("masters.count: 2 control-plane nodes are valid in OpenShift only with fencing through their BMCs or an arbiter node; set cluster.fencing: true or cluster.arbiter: {count: 1} (both: --mode agent), or use 3 masters")
	case n == 2 && arb > 0 && k.Fencing:
		add("fencing: a two-node control plane has fencing or an arbiter, not both; keep one")
	case arb > 1:
		add("arbiter.count: %d; a two-node control plane has one arbiter", arb)
	case arb > 0 && n != 2:
		add("arbiter.count: an arbiter goes with exactly 2 masters (masters.count is %d)", n)
	case k.Fencing && n != 2:
		add("fencing: fencing goes with exactly 2 masters (masters.count is %d)", n)
	}
	if p := k.Agent.MediaPort; p < 1 || p > 65535 {
		add("agent.mediaPort: %d is not a port (1-65535)", p)
	}
	for _, r := range []struct {
		field string
		id    int
	}{{"hybrid.apiRouterID", k.Hybrid.APIRouterID}, {"hybrid.ingressRouterID", k.Hybrid.IngressRouterID}} {
		if r.id < 0 || r.id > 255 {
			add("%s: %d is not a VRRP router ID (1-255)", r.field, r.id)
		}
	}
	if id := k.Hybrid.APIRouterID; id != 0 && id == k.Hybrid.IngressRouterID {
		add("hybrid.ingressRouterID: %d is the API's too; the VIPs need distinct router IDs", id)
	}
	switch k.BMC.Kind {
	case ocp.BMCRedfishVirtualMedia, ocp.BMCRedfish, ocp.BMCIPMI:
	default:
		add("bmc.kind: %q is not one of %s, %s, %s", k.BMC.Kind, ocp.BMCRedfishVirtualMedia, ocp.BMCRedfish, ocp.BMCIPMI)
	}
	if k.BMC.Address == "" {
		add("bmc.address: must be set")
	} else if err := hostOrIP(k.BMC.Address); err != nil {
		add("bmc.address: %v", err)
	}
	for _, p := range []struct {
		field string
		port  int
	}{{"redfishPort", k.BMC.RedfishPort}, {"ipmiPortBase", k.BMC.IPMIPortBase}} {
		if p.port < 1 || p.port > 65535 {
			add("bmc.%s: %d is not a port (1-65535)", p.field, p.port)
		}
	}
	errs = append(errs, c.validateProvisioning()...)
	errs = append(errs, c.validateBMCNetwork()...)
	errs = append(errs, c.validateBMCRoutes()...)
	if last := k.BMC.IPMIPortBase + k.Masters.N() + k.Workers.N() - 1; k.BMC.Kind == ocp.BMCIPMI && last > 65535 && !k.BMC.Network.IsValid() {
		add("bmc.ipmiPortBase: %d leaves no port for every node (the last would be %d)", k.BMC.IPMIPortBase, last)
	}
	return errs
}

// validateBMCNetwork checks cluster.bmc.network: a subnet of a family the
// machine network has, apart from the lab's other networks, with room for
// the lab host and every node's BMC.
func (c *Config) validateBMCNetwork() []error {
	k := &c.Cluster
	bn := k.BMC.Network
	if !bn.IsValid() {
		return nil
	}
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf("cluster.bmc.network: "+format, a...)) }
	if bn != bn.Masked() {
		add("%s has host bits set; use %s", bn, bn.Masked())
	}
	fams := []netip.Prefix{k.MachineNetwork}
	if k.IPFamily == IPFamilyDual {
		fams = append(fams, k.MachineNetworkV6)
	}
	reachable := false
	for _, mn := range fams {
		if mn.IsValid() && mn.Addr().Is6() == bn.Addr().Is6() {
			reachable = true
		}
		if mn.IsValid() && mn.Overlaps(bn) {
			add("%s overlaps the machine network %s; the BMC network is a subnet of its own (for example 192.168.125.0/24, or fd2e:6f44:5dd8:c957::/120)", bn, mn)
		}
	}
	if !reachable {
		add("%s is %s, but the machine network (ipFamily %s) has no address of that family: the nodes could not reach their BMCs; use a subnet of the machine network's family", bn, familyName(bn.Addr()), k.IPFamily)
	}
	if p := k.ProvisioningNetworkCIDR; p.IsValid() && p.Overlaps(bn) {
		add("%s overlaps provisioningNetworkCIDR %s; keep them apart", bn, p)
	}
	if len(c.Hosts) > 0 {
		add("a BMC network of its own is not offered for a lab over several hosts yet; drop cluster.bmc.network or hosts")
	}
	need := 1 + k.Masters.N() + k.Arbiter.N() + k.Workers.N() // the lab host, then every BMC
	if n := hostAddresses(bn); n < need {
		add("%s has %d host addresses; the lab host and %d BMCs need %d: use a larger subnet", bn, n, need-1, need)
	}
	return errs
}

// hostAddresses is how many addresses of p a host may have (not the
// subnet's own, nor IPv4's broadcast); at most 1<<20.
func hostAddresses(p netip.Prefix) int {
	free := p.Addr().BitLen() - p.Bits()
	if free >= 20 {
		return 1 << 20
	}
	n := 1<<free - 1
	if p.Addr().Is4() {
		n--
	}
	return max(n, 0)
}

func familyName(a netip.Addr) string {
	if a.Is6() {
		return "IPv6"
	}
	return "IPv4"
}

// family checks one address family's machine network, DHCP range and
// VIPs; suffix is the fields' ("" or "V6"), v6 the family they must be.
func family(ipFamily, suffix string, mn netip.Prefix, r netaddr.Range, api, ingress netip.Addr, v6 bool) []error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf("cluster."+format, a...)) }
	name, other := "IPv4", "IPv6"
	if v6 {
		name, other = "IPv6", "IPv4"
	}
	fix := "set ipFamily: v6 for an IPv6-only lab, or dual (IPv4 in machineNetwork, IPv6 in machineNetworkV6)"
	if v6 {
		fix = "write an IPv6 network such as " + DefaultMachineNetworkV6.String()
		if ipFamily == IPFamilyDual {
			fix = "machineNetwork holds the IPv4 family, machineNetworkV6 the IPv6 one"
		}
	}
	if mn.IsValid() && mn.Addr().Is6() != v6 {
		add("machineNetwork%s: %s is %s, but ipFamily %s wants %s here; %s", suffix, mn, other, ipFamily, name, fix)
		return errs
	}
	if mn != mn.Masked() {
		add("machineNetwork%s: %s has host bits set; use %s", suffix, mn, mn.Masked())
	}
	if v6 && mn.IsValid() && (mn.Bits() < 64 || mn.Bits() > 126) {
		add("machineNetwork%s: /%d; an IPv6 machine network here is /64 to /126 (libvirt's DHCPv6 range lies in it; dev-scripts uses /120)", suffix, mn.Bits())
	}
	if r.Start.IsValid() != r.End.IsValid() {
		add("dhcpRange%s: set both start and end", suffix)
	} else if r.Start.IsValid() {
		if r.End.Less(r.Start) {
			add("dhcpRange%s: end %s is before start %s", suffix, r.End, r.Start)
		}
		if !mn.Contains(r.Start) || !mn.Contains(r.End) {
			add("dhcpRange%s: %s is not inside machineNetwork%s %s", suffix, r, suffix, mn)
		}
	}
	if !api.IsValid() || !ingress.IsValid() {
		add("apiVIP%s and ingressVIP%s: both must be set when machineNetwork%s is", suffix, suffix, suffix)
	}
	host := mn.Masked().Addr().Next()
	for _, v := range []struct {
		field string
		ip    netip.Addr
	}{{"apiVIP" + suffix, api}, {"ingressVIP" + suffix, ingress}} {
		switch {
		case !v.ip.IsValid():
		case !mn.Contains(v.ip):
			add("%s: %s is outside machineNetwork%s %s; pick a free address inside it, outside dhcpRange%s", v.field, v.ip, suffix, mn, suffix)
		case r.Contains(v.ip):
			add("%s: %s is inside dhcpRange%s %s, where DHCP may lease it to a node; pick one outside the range", v.field, v.ip, suffix, r)
		case v.ip == host:
			add("%s: %s is the lab host's own address on machineNetwork%s (its first); pick another", v.field, v.ip, suffix)
		}
	}
	if api.IsValid() && api == ingress {
		add("ingressVIP%s: %s is the apiVIP%s too; the API and the ingress need an address each", suffix, ingress, suffix)
	}
	return errs
}

// Profiles for `labctl up --profile`.
const (
	ProfileDefault = "default"
	// ProfileTiny keeps the node counts and shrinks every node to 1 vCPU,
	// a few hundred MiB and small disks: enough to define and boot the
	// lab's VMs on a small machine for a demo, not to install OpenShift.
	ProfileTiny = "tiny"
)

// Tiny profile sizes.
const (
	TinyVCPUs           = 1
	TinyMasterMemoryMiB = 512
	TinyWorkerMemoryMiB = 256
	TinyDiskGiB         = 2
)

// ApplyProfile resizes the nodes after the file is loaded; a profile wins
// over the file, as a flag does. "" and "default" change nothing.
func (c *Config) ApplyProfile(name string) error {
	switch name {
	case "", ProfileDefault:
		return nil
	case ProfileTiny:
		c.Cluster.Masters.shrink(TinyMasterMemoryMiB)
		c.Cluster.Workers.shrink(TinyWorkerMemoryMiB)
		return nil
	}
	return fmt.Errorf("profile: %q is not one of %s, %s", name, ProfileDefault, ProfileTiny)
}

func (r *Role) shrink(memMiB int) {
	r.VCPUs = TinyVCPUs
	r.MemoryMiB = memMiB
	r.DiskGiB = TinyDiskGiB
	r.ExtraDisks = nil
}

// PasswordEnv overrides the BMC password of any lab file.
const PasswordEnv = "BMLAB_BMC_PASSWORD"

// resolvePassword takes the BMC password from the environment or from
// bmc.passwordFile (resolved against dir, the lab file's directory).
func (b *BMC) resolvePassword(dir string) error {
	if b.Password != "" && b.PasswordFile != "" {
		return fmt.Errorf("cluster.bmc: password and passwordFile are both set; keep one")
	}
	if env := os.Getenv(PasswordEnv); env != "" {
		b.Password = env
		return nil
	}
	if b.PasswordFile == "" {
		return nil
	}
	path := b.PasswordFile
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("cluster.bmc.passwordFile: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("cluster.bmc.passwordFile %s is readable by other users (mode %04o); run: chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("cluster.bmc.passwordFile: %w", err)
	}
	b.Password = strings.TrimRight(string(data), "\r\n")
	if b.Password == "" {
		return fmt.Errorf("cluster.bmc.passwordFile %s is empty", path)
	}
	return nil
}

// hostOrIP accepts an IP address or a DNS name; what looks like an IPv4
// address (digits and dots) must be one.
func hostOrIP(s string) error {
	if _, err := netip.ParseAddr(s); err == nil {
		return nil
	}
	if strings.Trim(s, "0123456789.") == "" {
		return fmt.Errorf("%q is not an IP address (each of its four numbers is 0-255); write the lab host's address on machineNetwork", s)
	}
	if a, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil && a.Is6() {
		return fmt.Errorf("%q: write the IPv6 address without brackets (%s); labctl adds them where a URL needs them", s, a)
	}
	if strings.Contains(s, ":") {
		return fmt.Errorf("%q is not an IP address", s)
	}
	for _, label := range strings.Split(s, ".") {
		if len(label) == 0 || len(label) > 63 || strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-") || strings.Trim(strings.ToLower(label), "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			return fmt.Errorf("%q is neither an IP address nor a DNS name", s)
		}
	}
	return nil
}
