package plan

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bmlab/bmlab/internal/labconfig"
	"github.com/bmlab/bmlab/internal/netaddr"
	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/ocp"
	"github.com/bmlab/bmlab/internal/personality"
)

// Modes of `labctl up`.
const (
	ModeIPI    = "ipi-baremetal"
	ModeHybrid = "hybrid"
	ModeAgent  = "agent"
)

// Options are what, beside the lab file, selects and shapes a lab: the
// flags every labctl command shares.
type Options struct {
	// ConfigPath is the lab file; ConfigSet says the user named it (then
	// it must exist). Without it, lab.yaml in the working directory, else
	// the seed lab.
	ConfigPath string
	ConfigSet  bool
	// ConfigData, when not nil, is the lab file itself (read from standard
	// input), in place of ConfigPath; Dir must then be set.
	ConfigData []byte
	// Dir is the lab's directory (default: the lab file's directory when
	// the user named it, else the working directory).
	Dir     string
	Profile string
	// Mode is --mode: it overrides the lab file's mode:; "" takes the lab
	// file's, else the mode of the lab that exists (Load reads its state),
	// else the first of Modes. Load refuses one that disagrees with the
	// existing lab.
	Mode string
	// Modes are the install modes labctl knows, each with its traits
	// (internal/lab/modes: modes.All.Specs()), the default first.
	Modes      []ModeSpec
	Netns      string
	LibvirtURI string
	// Vbmcd is the vbmcd binary ("" when not found: only up needs it).
	Vbmcd string
	// HostCPUs is the host's CPU count; it sets how many machines the
	// lab's vbmcd lets start at once (0: unknown, one at a time).
	HostCPUs int
	// PullSecret and SSHKey, when set, override the lab file's input
	// files (up's --pull-secret and --ssh-key).
	PullSecret, SSHKey string
	// AddedWorkers are workers added to the running cluster (labctl
	// add-node), beyond the lab file's; Load reads them from the lab's
	// state (Paths.AddedNodes).
	AddedWorkers int

	modeFrom string // where Load found Mode
}

// Where a plan's mode comes from (Plan.ModeFrom).
const (
	ModeFromFlag    = "--mode"
	ModeFromFile    = "mode: in the lab file"
	ModeFromState   = "the lab's state"
	ModeFromDefault = "the default"
)

// settleMode gives the options the mode of the lab that exists (its
// state file names it) when neither --mode nor the lab file's mode: does,
// and refuses either when it disagrees with that lab: a lab is taken down
// before it is built again in another mode. The profile is settled the
// same way (settleProfile).
func (o *Options) settleMode(cfg *labconfig.Config, statePath string) error {
	var st struct {
		Lab     string  `json:"lab"`
		Mode    string  `json:"mode"`
		Profile *string `json:"profile"`
	}
	b, err := os.ReadFile(statePath)
	if err != nil || json.Unmarshal(b, &st) != nil || st.Mode == "" || st.Lab != cfg.Name {
		// No lab here (or a damaged state file, which the lab's state
		// reader reports).
		return nil
	}
	if err := o.settleProfile(cfg.Name, st.Profile, statePath); err != nil {
		return err
	}
	given, from := o.Mode, ModeFromFlag
	if given == "" {
		given, from = cfg.Mode, ModeFromFile
	}
	switch {
	case given == "":
		o.Mode, o.modeFrom = st.Mode, ModeFromState
	case given != st.Mode && from == ModeFromFlag:
		return fmt.Errorf("--mode %s: lab %q exists in mode %s (%s); `labctl down` it first, or leave --mode out", given, cfg.Name, st.Mode, statePath)
	case given != st.Mode:
		return fmt.Errorf("mode: %s in the lab file, but lab %q exists in mode %s (%s); `labctl down` it first, or write mode: %s", given, cfg.Name, st.Mode, statePath, st.Mode)
	}
	return nil
}

// settleProfile gives the options the profile of the lab that exists
// (built, the sizes of its nodes are facts of the lab: a command given
// another profile would plan other disks and memory than the lab has) when
// --profile is not given, and refuses a --profile that disagrees with it.
// built is the profile its state records ("" the default); nil when the
// state predates the record (then --profile is taken as given).
func (o *Options) settleProfile(lab string, built *string, statePath string) error {
	if built == nil {
		return nil
	}
	given := o.Profile
	if given == labconfig.ProfileDefault {
		given = ""
	}
	switch {
	case o.Profile == "":
		o.Profile = *built
	case given != *built:
		name := *built
		if name == "" {
			name = labconfig.ProfileDefault
		}
		return fmt.Errorf("--profile %s: lab %q exists with profile %s (%s); `labctl down` it first, or leave --profile out", o.Profile, lab, name, statePath)
	}
	return nil
}

// Plan is every fact about a lab, resolved once. Commands read it; none
// recomputes a fact.
type Plan struct {
	Lab  string `json:"lab"`
	Mode string `json:"mode"`
	// ModeFrom says where Mode comes from, for messages: --mode, the lab
	// file's mode:, the lab's state, or the default.
	ModeFrom string `json:"-"`
	// Traits are the mode's (the zero Traits for a mode labctl does not
	// know).
	Traits     Traits `json:"-"`
	Profile    string `json:"profile,omitempty"`
	Dir        string `json:"dir"`
	StateDir   string `json:"stateDir"`
	LibvirtURI string `json:"libvirtURI"`
	// Netns is the network namespace of the lab's links and vbmcd (where
	// libvirtd runs); "" is labctl's own.
	Netns     string    `json:"netns,omitempty"`
	Nodes     []Node    `json:"nodes"`
	Network   Network   `json:"network"`
	Storage   Storage   `json:"storage"`
	BMC       BMC       `json:"bmc"`
	Vbmcd     Vbmcd     `json:"vbmcd"`
	Installer Installer `json:"installer"`
	Hybrid    *Hybrid   `json:"hybrid,omitempty"`
	Agent     *Agent    `json:"agent,omitempty"`
	// Hosts are the libvirt hosts of a lab spread over several, the hub
	// first; empty for a lab on one host.
	Hosts []Host `json:"hosts,omitempty"`
	// Spoke names the host when this is the part of a lab over several
	// hosts that one of the other hosts holds (ForSpoke).
	Spoke string `json:"spoke,omitempty"`
	// LinksOnly is set when labctl leaves libvirt out (--no-libvirt): the
	// lab's links only, without libvirt's networks or what reads the
	// nodes over libvirt (the LLDP sender), which stay as they are.
	LinksOnly bool `json:"-"`
	// Cluster is the OpenShift cluster the lab installs.
	Cluster Cluster `json:"cluster"`
	// Paths are the files and directories labctl writes beside the
	// objects it makes.
	Paths Paths `json:"paths"`

	addedWorkers int

	// Source is the lab file as read (nil for the seed lab): what labctl
	// hands to labctl on the other hosts of the lab.
	Source []byte `json:"-"`
}

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
	// for dual they are IPv4 and Secondary is the IPv6 family (nil
	// otherwise), as the installer orders them.
	IPFamily  string          `json:"ipFamily"`
	Secondary *netaddr.Family `json:"secondary,omitempty"`
	Masters   int             `json:"masters"`
	Arbiters  int             `json:"arbiters,omitempty"`
	Workers   int             `json:"workers"`
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
	if f := c.Secondary; f != nil {
		out = append(out, f.DHCPRange)
	}
	return out
}

// HasIPv4 and HasIPv6 say whether the machine network has the family
// (both in a dual-stack lab).
func (c Cluster) HasIPv4() bool { return c.IPFamily != labconfig.IPFamilyV6 }

// HasIPv6: see HasIPv4.
func (c Cluster) HasIPv6() bool { return c.IPFamily != labconfig.IPFamilyV4 }

// SecondaryFamily is the second family, the zero Family for a single
// stack (as install-config, agent-config and the static pods take it).
func (c Cluster) SecondaryFamily() netaddr.Family {
	if c.Secondary == nil {
		return netaddr.Family{}
	}
	return *c.Secondary
}

// Paths are the files labctl keeps for a lab, all under its directory.
type Paths struct {
	// State records the last step done (labctl status).
	State string `json:"state"`
	// Logs holds the nodes' serial logs.
	Logs string `json:"logs"`
	// InstallConfig is install-config.yaml in the installer's directory;
	// InstallConfigCopy the copy kept in the state directory (the
	// installer consumes its own).
	InstallConfig     string `json:"installConfig"`
	InstallConfigCopy string `json:"installConfigCopy"`
	// InstallerLog is the installer's own log, InstallerOutput labctl's
	// record of what it printed.
	InstallerLog    string `json:"installerLog"`
	InstallerOutput string `json:"installerOutput"`
	// Kubeconfig and KubeadminPassword are the installer's, once the
	// cluster is up.
	Kubeconfig        string `json:"kubeconfig"`
	KubeadminPassword string `json:"kubeadminPassword"`
	// IgnitionDir holds each hybrid node's merged ignition, readable by
	// qemu (every mode's plan names it, so down --lab removes it).
	IgnitionDir string `json:"ignitionDir"`
	// Markers record what happened outside the host's objects (the
	// installer's waits), so that up resumes after them.
	BootstrapComplete string `json:"bootstrapComplete"`
	BootstrapRemoved  string `json:"bootstrapRemoved"`
	InstallComplete   string `json:"installComplete"`
	// Started lists the nodes up has started, one name a line: one of
	// them found shut off again was shut off on purpose, and up leaves it
	// so unless asked (--start-stopped).
	Started string `json:"started"`
	// HostsFile gets the cluster's names for the lab host (hybrid).
	HostsFile string `json:"hostsFile"`
	// CACert and CAKey are the lab's CA (the key 0600); BMCCert and BMCKey
	// the certificate it issued for vbmcd (the BMC address).
	CACert  string `json:"caCert"`
	CAKey   string `json:"caKey"`
	BMCCert string `json:"bmcCert"`
	BMCKey  string `json:"bmcKey"`
	// AddedNodes records the workers added to the running cluster
	// (labctl add-node); NodeImageDir is where oc makes their ISO.
	AddedNodes   string `json:"addedNodes"`
	NodeImageDir string `json:"nodeImageDir"`
	// AgentConfig is agent-config.yaml in the installer's directory, and
	// its copy in the state directory (agent mode); AgentISO the image
	// `agent create image` writes; MediaBooted records the nodes booted
	// from it, one name a line.
	AgentConfig     string `json:"agentConfig"`
	AgentConfigCopy string `json:"agentConfigCopy"`
	AgentISO        string `json:"agentISO"`
	MediaBooted     string `json:"mediaBooted"`
}

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

// Node is one VM.
type Node struct {
	Name string `json:"name"`
	Role string `json:"role"`
	// MAC is the node's NIC on the node network (the machine network):
	// its DHCP reservation and address there.
	MAC string `json:"mac"`
	// BootMAC is the NIC the node network-boots from, install-config's
	// bootMACAddress: its first NIC, on the provisioning network where the
	// lab has one (provisioning.go), else MAC.
	BootMAC string `json:"bootMAC"`
	// NICs are its NICs in the domain's order.
	NICs []NIC      `json:"nics"`
	UUID string     `json:"uuid"`
	IP   netip.Addr `json:"ip"`
	// SecondaryIP is a dual-stack node's IPv6 address (the same place in
	// dhcpRangeV6 as IP in dhcpRange); invalid otherwise.
	SecondaryIP netip.Addr `json:"secondaryIP,omitzero"`
	VCPUs       uint       `json:"vcpus"`
	MemoryMiB   uint       `json:"memoryMiB"`
	// Arch is the node's CPU architecture: x86_64 or aarch64.
	Arch string `json:"arch"`
	// Disks are the node's volumes, the boot disk first.
	Disks     []Disk `json:"disks"`
	SerialLog string `json:"serialLog"`
	// BMC is the node's endpoint; empty for hybrid nodes, which have none.
	BMC Endpoint `json:"bmc,omitzero"`
	// Ignition is the file qemu hands the node through fw_cfg (hybrid).
	Ignition string `json:"ignition,omitempty"`
	// Host is the libvirt host the node is placed on (labs with hosts:).
	Host string `json:"host,omitempty"`
	// Added marks a node added to the running cluster (labctl add-node):
	// not in the installer's files, which describe the cluster installed.
	Added bool `json:"added,omitempty"`
	// Bond is the mode of the bond of its NICs on the machine network
	// (its role's cluster.*.bond; "": none).
	Bond string `json:"bond,omitempty"`
}

// Disk is a thin volume of the lab's pool.
type Disk struct {
	Volume  string `json:"volume"`
	Path    string `json:"path"`
	SizeGiB uint   `json:"sizeGiB"`
	// Backing is the image the volume is a thin clone of (hybrid).
	Backing string `json:"backing,omitempty"`
}

// Endpoint is how installers reach a node's BMC.
type Endpoint struct {
	// Address is bmc.address in install-config.
	Address string `json:"address"`
	// SystemURL is the node's Redfish System, which vbmcd serves for every
	// node whatever the kind; labctl checks the BMC there. It names the
	// System as Address does (a vendor's id at a BMC of its own, else the
	// node's UUID).
	SystemURL string `json:"systemURL"`
	IPMIPort  int    `json:"ipmiPort,omitempty"`
	// Addr is the node's BMC's own address on the BMC network
	// (cluster.bmc.network; invalid: none, the BMC is at BMC.Host).
	Addr netip.Addr `json:"addr,omitzero"`
	// Username and Password are the node's own BMC user, bound to its
	// system (empty: the lab's user serves every node).
	Username string `json:"username,omitempty"`
	Password string `json:"-"`
	// Personality is the vendor BMC vbmcd gives the node (its entry of
	// its role's personalities in the lab file, else the role's
	// personality); empty is generic.
	Personality string `json:"personality,omitempty"`
	// Vendor is its Manufacturer, as the node's BMC reports it.
	Vendor string `json:"vendor,omitempty"`
	// PersonalityField is the lab file's field Personality comes from
	// (cluster.masters.personality, cluster.workers.personalities[1]), for
	// the errors of checks that refuse it.
	PersonalityField string `json:"personalityField,omitempty"`
	// Inband says the node's in-band IPMI (the KCS its OS reaches as
	// /dev/ipmi0) is wired to this BMC: an x86_64 node on the host the
	// lab's vbmcd runs on, whose socket it can reach.
	Inband bool `json:"inband,omitempty"`
}

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
	// LLDP is the lab's LLDP sender (`vbmcd lldp`, marked as the lab's as
	// vbmcd is): the switches' frames on every running node NIC's tap.
	// Nil when network.lldp is off.
	LLDP *Vbmcd `json:"lldp,omitempty"`
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
	MTU       int             `json:"mtu"`
	Domain    string          `json:"domain"`
	Secondary *netaddr.Family `json:"secondary,omitempty"`
}

// MarshalJSON writes the NAT network in libvirt's words (cidr, gateway,
// dhcpStart, dhcpEnd), as `virsh net-dumpxml` shows it, which is what
// the plan's JSON shows people and its golden files pin.
func (n NAT) MarshalJSON() ([]byte, error) {
	type family struct {
		CIDR       netip.Prefix `json:"cidr"`
		Gateway    netip.Addr   `json:"gateway"`
		DHCPStart  netip.Addr   `json:"dhcpStart"`
		DHCPEnd    netip.Addr   `json:"dhcpEnd"`
		APIVIP     netip.Addr   `json:"apiVIP"`
		IngressVIP netip.Addr   `json:"ingressVIP"`
	}
	words := func(f netaddr.Family) family {
		return family{f.MachineNetwork, f.HostAddress, f.DHCPRange.Start, f.DHCPRange.End, f.APIVIP, f.IngressVIP}
	}
	v := struct {
		Name       string       `json:"name"`
		Bridge     string       `json:"bridge"`
		CIDR       netip.Prefix `json:"cidr"`
		Gateway    netip.Addr   `json:"gateway"`
		DHCPStart  netip.Addr   `json:"dhcpStart"`
		DHCPEnd    netip.Addr   `json:"dhcpEnd"`
		MTU        int          `json:"mtu"`
		Domain     string       `json:"domain"`
		APIVIP     netip.Addr   `json:"apiVIP"`
		IngressVIP netip.Addr   `json:"ingressVIP"`
		Secondary  *family      `json:"secondary,omitempty"`
	}{Name: n.Name, Bridge: n.Bridge, MTU: n.MTU, Domain: n.Domain}
	w := words(n.Family)
	v.CIDR, v.Gateway, v.DHCPStart, v.DHCPEnd, v.APIVIP, v.IngressVIP = w.CIDR, w.Gateway, w.DHCPStart, w.DHCPEnd, w.APIVIP, w.IngressVIP
	if n.Secondary != nil {
		f := words(*n.Secondary)
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
	// addresses may fall in it.
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

// Storage is the lab's pool.
type Storage struct {
	Pool string `json:"pool"`
	Dir  string `json:"dir"`
}

// BMC is how vbmcd serves the lab's BMCs.
type BMC struct {
	Kind         string `json:"kind"`
	Scheme       string `json:"scheme"` // https or http
	Host         string `json:"host"`
	RedfishPort  int    `json:"redfishPort"`
	IPMIPortBase int    `json:"ipmiPortBase,omitempty"`
	Username     string `json:"username"`
	Password     string `json:"-"`
	// LabCA: the BMCs' certificate is issued by the lab's CA (Paths.CA*),
	// which install-config carries (bmcVerifyCA).
	LabCA bool `json:"labCA,omitempty"`
	// Network is the BMCs' network of their own (cluster.bmc.network;
	// invalid: none): Bridge on the lab host, which is HostAddress there;
	// each node's BMC is at its Endpoint.Addr, a listener of its own.
	Network     netip.Prefix `json:"network,omitzero"`
	Bridge      string       `json:"bridge,omitempty"`
	HostAddress netip.Addr   `json:"hostAddress,omitzero"`
	// Routes are the lab's networks the BMC network is routed to
	// (cluster.bmc.routes): each BMC fetches images from its own address,
	// and rules of the lab's topology let its traffic reach these and
	// nothing else (bmcRules).
	Routes []string `json:"routes,omitempty"`
}

// bmcBridge names the bridge of a lab's BMC network.
func bmcBridge(lab string) string { return labBridge("bmbmc-", lab) }

// bmcNetwork adds the BMC network's bridge to the lab's topology: the lab
// host's address and every node's BMC address on it.
func (p *Plan) bmcNetwork() {
	if !p.BMC.Network.IsValid() {
		return
	}
	br := netplumb.Bridge{Name: p.BMC.Bridge, Addresses: []netip.Prefix{netip.PrefixFrom(p.BMC.HostAddress, p.BMC.Network.Bits())}}
	for _, n := range p.Nodes {
		if n.BMC.Addr.IsValid() {
			br.Addresses = append(br.Addresses, netip.PrefixFrom(n.BMC.Addr, p.BMC.Network.Bits()))
		}
	}
	p.Network.Topology.Bridges = append(p.Network.Topology.Bridges, br)
	p.Network.Topology.Rules = p.bmcRules()
}

// bmcRules route the BMC network as a rack's router routes its
// out-of-band network: traffic from the BMCs' addresses reaches the BMC
// network itself and the networks of cluster.bmc.routes (the machine
// network, of the BMC network's family; the provisioning network), by the
// lab host's routes; anything else is unreachable. Replies to the
// installer's Ironic on the machine network go out as before; an image
// served on a network not routed (the provisioning network of
// openshift/installer#10876) is out of the BMCs' reach, as on the rack.
func (p *Plan) bmcRules() []netplumb.Rule {
	bn := p.BMC.Network
	first, n := netplumb.RulePriorities(p.Lab)
	to := []netip.Prefix{bn}
	for _, r := range p.BMC.Routes {
		switch r {
		case labconfig.RouteMachine:
			to = append(to, p.Cluster.MachineNetwork)
			if f := p.Cluster.Secondary; f != nil {
				to = append(to, f.MachineNetwork)
			}
		case labconfig.RouteProvisioning:
			to = append(to, p.Cluster.ProvisioningNetworkCIDR)
		}
	}
	var rules []netplumb.Rule
	for _, d := range to {
		if d.IsValid() && d.Addr().Is4() == bn.Addr().Is4() {
			rules = append(rules, netplumb.Rule{Priority: first + len(rules), From: bn, To: d})
		}
	}
	return append(rules, netplumb.Rule{Priority: first + n - 1, From: bn, Unreachable: true})
}

// Vbmcd is the lab's vbmcd invocation.
type Vbmcd struct {
	Path string   `json:"path"`
	Args []string `json:"args"`
	// Env marks the process as the lab's (MarkEnv=<lab>), so down finds
	// it without the state file.
	Env []string `json:"env"`
	// CredentialsFile (0600) holds the BMC user and password: never on
	// the command line, where every local user reads it.
	CredentialsFile string `json:"credentialsFile"`
	Log             string `json:"log"`
}

// MarkEnv is the environment variable that marks a process as a lab's.
const MarkEnv = "BMLAB_LAB"

// Installer is where the installer runs.
type Installer struct {
	Binary string `json:"binary,omitempty"`
	Dir    string `json:"dir"`
	// OC is the configured OpenShift client (day-2 nodes).
	OC string `json:"oc,omitempty"`
}

// Hybrid is what only a mode with the BootImage trait (the hybrid mode)
// needs.
type Hybrid struct {
	// Image is the RHCOS qcow2 (path or URL) the nodes' disks clone;
	// Backing is where the clones find it: the path itself, or the cache
	// file a URL is downloaded to once.
	Image   string `json:"image"`
	Backing string `json:"backing"`
	// APIRouterID and IngressRouterID are keepalived's virtual_router_id
	// for the VIPs.
	APIRouterID     int `json:"apiRouterID"`
	IngressRouterID int `json:"ingressRouterID"`
	// Upstream is where the nodes' coredns forwards other names: the lab
	// network's own DNS (libvirt's dnsmasq on the NAT bridge).
	Upstream []netip.Addr `json:"upstream"`
	// Images of the static pods and the CSR approver.
	KeepalivedImage string `json:"keepalivedImage"`
	CoreDNSImage    string `json:"corednsImage"`
	HAProxyImage    string `json:"haproxyImage"`
	ApproverImage   string `json:"approverImage"`
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

// Load reads the lab file, applies the profile and resolves the plan.
func Load(o Options) (*Plan, error) {
	var cfg *labconfig.Config
	var source []byte
	var err error
	switch {
	case o.ConfigData != nil:
		if o.Dir == "" {
			return nil, errors.New("a lab file on standard input needs the lab's directory: pass --dir")
		}
		if cfg, err = labconfig.LoadData(o.ConfigData, o.Dir); err != nil {
			return nil, fmt.Errorf("the lab file on standard input: %w", err)
		}
		source = o.ConfigData
	default:
		if cfg, source, err = labconfig.LoadFile(o.ConfigPath, o.ConfigSet); err != nil {
			return nil, err
		}
	}
	if o.Dir == "" {
		if o.ConfigSet {
			o.Dir = filepath.Dir(o.ConfigPath)
		} else if o.Dir, err = os.Getwd(); err != nil {
			return nil, err
		}
	}
	if o.Dir, err = filepath.Abs(o.Dir); err != nil {
		return nil, err
	}
	if o.AddedWorkers, err = ReadAdded(filepath.Join(o.Dir, ".bmlab", "added-nodes.json")); err != nil {
		return nil, err
	}
	if err := o.settleMode(cfg, filepath.Join(o.Dir, ".bmlab", "state.json")); err != nil {
		return nil, err
	}
	if err := cfg.ApplyProfile(o.Profile); err != nil {
		return nil, err
	}
	p, err := Resolve(cfg, o)
	if err != nil {
		return nil, err
	}
	p.Source = source
	return p, nil
}

// Resolve turns a loaded lab file and the options into the plan. It is pure:
// it reads nothing but its arguments.
func Resolve(cfg *labconfig.Config, o Options) (*Plan, error) {
	from := ModeFromFlag
	switch {
	case o.Mode != "":
		if o.modeFrom != "" {
			from = o.modeFrom
		}
	case cfg.Mode != "":
		o.Mode, from = cfg.Mode, ModeFromFile
	case len(o.Modes) > 0:
		o.Mode, from = o.Modes[0].Name, ModeFromDefault
	}
	if len(o.Modes) == 0 {
		return nil, errors.New("plan: no install modes to resolve the lab with (Options.Modes: modes.All.Specs())")
	}
	traits := traitsOf(o.Modes, o.Mode)
	if err := checkTopology(cfg, o.Mode, traits, o.Modes); err != nil {
		return nil, err
	}
	if o.LibvirtURI == "" {
		o.LibvirtURI = "qemu:///system"
	}
	if o.Profile == labconfig.ProfileDefault {
		o.Profile = "" // one name for the default, as the lab's state records it
	}
	k := cfg.Cluster
	state := filepath.Join(o.Dir, ".bmlab")
	p := &Plan{
		Lab: cfg.Name, Mode: o.Mode, ModeFrom: from, Traits: traits, Profile: o.Profile, Dir: o.Dir, StateDir: state,
		LibvirtURI: o.LibvirtURI, Netns: o.Netns,
		Storage:   Storage{Pool: cfg.Name + "-disks", Dir: filepath.Join(state, "disks")},
		Installer: Installer{Binary: k.Installer, Dir: filepath.Join(o.Dir, "install"), OC: k.OC},
	}
	p.Paths = resolvePaths(state, p.Installer.Dir, k.Hybrid.HostsFile, k.Masters.Arch)
	p.addedWorkers = o.AddedWorkers
	p.Network = resolveNetwork(cfg)
	p.Cluster = resolveCluster(cfg, o, p.Network)
	p.resolveProvisioning(cfg)
	p.BMC = BMC{
		Kind: k.BMC.Kind, Scheme: "http", Host: k.BMC.Address, RedfishPort: k.BMC.RedfishPort,
		Username: k.BMC.Username, Password: k.BMC.Password,
	}
	if k.BMC.UseTLS() {
		p.BMC.Scheme = "https"
		p.BMC.LabCA = k.BMC.UseLabCA()
	}
	if k.BMC.Kind == ocp.BMCIPMI && !k.BMC.Network.IsValid() {
		p.BMC.IPMIPortBase = k.BMC.IPMIPortBase
	}
	if bn := k.BMC.Network; bn.IsValid() {
		if !traits.BMCs {
			return nil, fmt.Errorf("cluster.bmc.network: the %s mode's nodes have no BMC; drop cluster.bmc.network", o.Mode)
		}
		p.BMC.Network, p.BMC.Bridge, p.BMC.HostAddress = bn, bmcBridge(cfg.Name), bn.Addr().Next()
		p.BMC.Routes = k.BMC.Routes
	}
	if traits.BootImage {
		if k.Image == "" {
			return nil, fmt.Errorf("cluster.image: the %s mode boots its nodes from an RHCOS qcow2; name it (a path or an http(s) URL) in the lab file", o.Mode)
		}
		h := k.Hybrid
		p.Hybrid = &Hybrid{
			Image: k.Image, Backing: k.Image,
			KeepalivedImage: h.KeepalivedImage, CoreDNSImage: h.CoreDNSImage, HAProxyImage: h.HAProxyImage,
			ApproverImage: h.ApproverImage,
		}
		if IsURL(k.Image) {
			p.Hybrid.Backing = filepath.Join(state, "images", path.Base(k.Image))
		} else if !filepath.IsAbs(k.Image) {
			p.Hybrid.Backing = filepath.Join(o.Dir, k.Image)
		}
		if k.Masters.N() == 1 && k.Workers.N() == 0 {
			p.Hybrid.SingleNode, p.Hybrid.InstallationDisk = true, InstallationDisk
			p.Hybrid.BootISO = filepath.Join(p.Paths.IgnitionDir, cfg.Name+"-"+ocp.RoleMaster+"-0.iso")
		}
		p.Hybrid.APIRouterID, p.Hybrid.IngressRouterID = RouterIDs(k.Name)
		if h.APIRouterID != 0 {
			p.Hybrid.APIRouterID = h.APIRouterID
		}
		if h.IngressRouterID != 0 {
			p.Hybrid.IngressRouterID = h.IngressRouterID
		}
		p.Hybrid.Segment = cfg.Network.LibvirtBridge
		// On a shared network too, dnsmasq listens on its first address.
		// Without a NAT network of its own, the lab borrows another
		// libvirt network, whose dnsmasq listens on its first address.
		p.Hybrid.Upstream = []netip.Addr{k.MachineNetwork.Masked().Addr().Next()}
		if p.Network.NAT != nil {
			p.Hybrid.Upstream = []netip.Addr{p.Network.NAT.HostAddress}
			p.Hybrid.Segment = p.Network.NAT.Bridge
		}
		if f := p.Cluster.Secondary; f != nil {
			p.Hybrid.Upstream = append(p.Hybrid.Upstream, f.HostAddress)
		}
	}
	if err := p.resolveNodes(cfg); err != nil {
		return nil, err
	}
	p.bmcNetwork()
	p.resolveHosts(cfg)
	p.resolveInband()
	p.provisioningAddress()
	if traits.AgentISO {
		p.resolveAgent(cfg)
	}
	if p.Hybrid != nil && p.Hybrid.SingleNode {
		p.nodeHoldsVIPs(p.Nodes[0])
	}
	p.resolveShared()
	if err := p.resolveResolver(cfg); err != nil {
		return nil, err
	}
	p.Vbmcd = p.vbmcd(o.Vbmcd, o.HostCPUs)
	p.Network.LLDP = p.lldp(cfg.Network.LLDP, o.Vbmcd)
	p.Network.ProvisioningDHCP = p.provisioningDHCP()
	return p, nil
}

// lldp is the lab's LLDP sender: `vbmcd lldp` over the lab's nodes, in
// the lab's namespace; nil when the lab file turns it off (network.lldp),
// or, in a mode without the LLDP trait (hybrid), unless it turns it on. In a lab over several hosts it
// is the hub's, over the hub's nodes alone: a tap is a name on its own
// host, and another host's vnet3 may be a local tap of another machine.
func (p *Plan) lldp(on *bool, path string) *Vbmcd {
	if on != nil && !*on || on == nil && !p.Traits.LLDP {
		return nil
	}
	v := Vbmcd{Path: path, Env: []string{MarkEnv + "=" + p.Lab}, Log: filepath.Join(p.StateDir, "lldp.log")}
	uris, nodes := p.libvirtURIs(), p.Nodes
	for _, h := range p.Hosts {
		if h.Hub {
			uris, nodes = []string{"--libvirt-uri", h.Name + "=" + h.LibvirtURI}, p.LocalNodes(h.Name)
		}
	}
	if len(nodes) == 0 {
		return nil // no node to announce to (an empty --domains is every domain)
	}
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}
	v.Args = append(append([]string{"lldp"}, uris...), "--domains", strings.Join(names, ","))
	return &v
}

// libvirtURIs are vbmcd's --libvirt-uri flags for the lab's hosts.
func (p *Plan) libvirtURIs() []string {
	var uris []string
	for _, h := range p.Hosts {
		uris = append(uris, "--libvirt-uri", h.Name+"="+h.LibvirtURI)
	}
	if len(uris) == 0 {
		uris = []string{"--libvirt-uri", p.LibvirtURI}
	}
	return uris
}

// nodeNames are the nodes' names, comma-separated (vbmcd's --domains).
func (p *Plan) nodeNames() string {
	names := make([]string, len(p.Nodes))
	for i, n := range p.Nodes {
		names[i] = n.Name
	}
	return strings.Join(names, ",")
}

// resolvePaths names the files labctl keeps: state and markers in the
// state directory, the installer's files in its directory.
func resolvePaths(state, install, hostsFile, controlPlaneArch string) Paths {
	return Paths{
		State:             filepath.Join(state, "state.json"),
		Logs:              filepath.Join(state, "logs"),
		InstallConfig:     filepath.Join(install, ocp.InstallConfigFile),
		InstallConfigCopy: filepath.Join(state, ocp.InstallConfigFile),
		InstallerLog:      filepath.Join(install, ocp.InstallerLogName),
		InstallerOutput:   filepath.Join(install, ocp.OutputLogName),
		Kubeconfig:        filepath.Join(install, "auth", "kubeconfig"),
		KubeadminPassword: filepath.Join(install, "auth", "kubeadmin-password"),
		IgnitionDir:       filepath.Join(state, "ignition"),
		BootstrapComplete: filepath.Join(state, "bootstrap-complete"),
		BootstrapRemoved:  filepath.Join(state, "bootstrap-removed"),
		InstallComplete:   filepath.Join(state, "install-complete"),
		Started:           filepath.Join(state, "started"),
		HostsFile:         hostsFile,
		CACert:            filepath.Join(state, "ca", "ca.crt"),
		CAKey:             filepath.Join(state, "ca", "ca.key"),
		BMCCert:           filepath.Join(state, "vbmcd", "tls.crt"),
		BMCKey:            filepath.Join(state, "vbmcd", "tls.key"),
		AddedNodes:        filepath.Join(state, "added-nodes.json"),
		NodeImageDir:      filepath.Join(state, "node-image"),
		AgentConfig:       filepath.Join(install, "agent-config.yaml"),
		AgentConfigCopy:   filepath.Join(state, "agent-config.yaml"),
		AgentISO:          filepath.Join(install, ocp.AgentISOName(controlPlaneArch)),
		MediaBooted:       filepath.Join(state, "media-booted"),
	}
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
// gives them: the first, and a dual-stack lab's IPv6 one (nil otherwise).
// The lab host's address on each is its first.
func families(k labconfig.Cluster) (netaddr.Family, *netaddr.Family) {
	first := netaddr.Family{MachineNetwork: k.MachineNetwork, HostAddress: k.MachineNetwork.Masked().Addr().Next(),
		DHCPRange: k.DHCPRange, APIVIP: k.APIVIP, IngressVIP: k.IngressVIP}
	if k.IPFamily != labconfig.IPFamilyDual {
		return first, nil
	}
	return first, &netaddr.Family{MachineNetwork: k.MachineNetworkV6, HostAddress: k.MachineNetworkV6.Masked().Addr().Next(),
		DHCPRange: k.DHCPRangeV6, APIVIP: k.APIVIPV6, IngressVIP: k.IngressVIPV6}
}

// inputPath is a lab file's (or flag's) path of an input file: relative to
// the lab's directory; "~/" stays for the reader to resolve.
func inputPath(path, dir string) string {
	if filepath.IsAbs(path) || strings.HasPrefix(path, "~/") {
		return path
	}
	return filepath.Join(dir, path)
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

// nodeHoldsVIPs makes a single node's address the one the lab network's
// DNS gives api, api-int and *.apps.
func (p *Plan) nodeHoldsVIPs(n Node) {
	ip := n.IP
	if p.Network.NAT != nil {
		p.Network.NAT.APIVIP, p.Network.NAT.IngressVIP = ip, ip
		if f := p.Network.NAT.Secondary; f != nil {
			f.APIVIP, f.IngressVIP = n.SecondaryIP, n.SecondaryIP
		}
	}
	if p.Network.Shared != nil {
		p.Network.Shared.APIVIP, p.Network.Shared.IngressVIP = ip, ip
	}
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

// resolveNodes names the nodes <lab>-<role>-N (and <lab>-bootstrap in the
// modes with the BootImage trait), derives MACs and UUIDs from the names, reserves the DHCP
// range's addresses in order and gives each its disks and BMC endpoint.
func (p *Plan) resolveNodes(cfg *labconfig.Config) error {
	k := cfg.Cluster
	type group struct {
		role  string
		spec  labconfig.Role
		n     int
		field string // the role's in the lab file
	}
	groups := []group{{ocp.RoleMaster, k.Masters, k.Masters.N(), "masters"}, {ocp.RoleArbiter, k.Arbiter, k.Arbiter.N(), "arbiter"}, {ocp.RoleWorker, k.Workers, k.Workers.N() + p.addedWorkers, "workers"}}
	if p.Traits.BootImage && !p.Hybrid.SingleNode {
		// The bootstrap is sized like a master and first in line.
		groups = append([]group{{ocp.RoleBootstrap, k.Masters, 1, "masters"}}, groups...)
	}
	ip, ip6 := k.DHCPRange.Start, netip.Addr{}
	if k.IPFamily == labconfig.IPFamilyDual {
		ip6 = k.DHCPRangeV6.Start
	}
	for _, g := range groups {
		for i := 0; i < g.n; i++ {
			name := fmt.Sprintf("%s-%s-%d", cfg.Name, g.role, i)
			if g.role == ocp.RoleBootstrap {
				name = cfg.Name + "-bootstrap"
			}
			if !ip.IsValid() || !k.DHCPRange.Contains(ip) {
				return fmt.Errorf("cluster.dhcpRange: %s has no room for %d nodes; widen it", k.DHCPRange, len(p.Nodes)+1)
			}
			if ip6.IsValid() && !k.DHCPRangeV6.Contains(ip6) {
				return fmt.Errorf("cluster.dhcpRangeV6: %s has no room for %d nodes; widen it", k.DHCPRangeV6, len(p.Nodes)+1)
			}
			n := Node{
				Added: g.role == ocp.RoleWorker && i >= k.Workers.N(),
				Name:  name, Role: g.role, MAC: MACFor(cfg.Name, name), UUID: UUIDFor(cfg.Name, name), IP: ip,
				VCPUs: uint(g.spec.VCPUs), MemoryMiB: uint(g.spec.MemoryMiB), Arch: g.spec.Arch,
				SerialLog: filepath.Join(p.Paths.Logs, name+".serial.log"), Bond: g.spec.Bond,
			}
			p.nodeNICs(&n, p.Network.BridgeNetworks)
			ip = ip.Next()
			if ip6.IsValid() {
				n.SecondaryIP, ip6 = ip6, ip6.Next()
			}
			disk := Disk{Volume: name + ".qcow2", SizeGiB: uint(g.spec.DiskGiB)}
			if p.Hybrid != nil {
				disk.Backing = p.Hybrid.Backing
				n.Ignition = filepath.Join(p.Paths.IgnitionDir, name+".ign")
			}
			if p.Hybrid != nil && p.Hybrid.SingleNode {
				// A blank disk: the live ISO installs onto it. The merged
				// ignition stays beside the ISO it is embedded in, but
				// qemu does not hand it over (no fw_cfg).
				disk.Backing = ""
			}
			n.Disks = append(n.Disks, disk)
			for j, gib := range g.spec.ExtraDisks {
				n.Disks = append(n.Disks, Disk{Volume: fmt.Sprintf("%s-extra%d.qcow2", name, j+1), SizeGiB: uint(gib)})
			}
			for j := range n.Disks {
				n.Disks[j].Path = filepath.Join(p.Storage.Dir, n.Disks[j].Volume)
			}
			if p.Traits.BMCs {
				persona, field := g.spec.PersonalityOf(i)
				if err := p.endpoint(&n, len(p.Nodes), k.BMC.Kind, persona); err != nil {
					return err
				}
				if persona != "" {
					n.BMC.PersonalityField = "cluster." + g.field + "." + field
				}
				if k.BMC.UseNodeAccounts() {
					n.BMC.Username, n.BMC.Password = n.Name, NodePassword(p.BMC.Password, p.Lab, n.Name)
					if k.BMC.Kind == ocp.BMCIPMI || k.BMC.Network.IsValid() {
						// IPMI's longest password is 20 bytes (IPMI v2.0
						// §22.30): ipmitool, and Ironic through it, refuse
						// a longer one before they send anything. A BMC
						// of its own (a BMC network) answers IPMI at port
						// 623 whatever the kind (fence_ipmilan uses it).
						n.BMC.Password = n.BMC.Password[:ipmiMaxPassword]
						if len(n.Name) > ipmiMaxName {
							return fmt.Errorf("cluster.bmc.nodeAccounts: node %s's BMC user is its name, %d bytes, and an IPMI user name has at most %d (IPMI v2.0 §22.28); give the lab a shorter name (name) or every node the lab's user (cluster.bmc.nodeAccounts: false)", n.Name, len(n.Name), ipmiMaxName)
						}
					}
				}
			}
			p.Nodes = append(p.Nodes, n)
		}
	}
	return nil
}

// endpoint gives node i its BMC address: the one place it is made. A node
// whose BMC is a Dell's (personality) is reached as the installer reaches
// an iDRAC, by the idrac-virtualmedia scheme, where the lab boots from
// virtual media. At a BMC of its own (a BMC network) a vendor's BMC is
// named by the path the vendor serves, as a real rack's would be
// (/redfish/v1/Systems/System.Embedded.1 for an iDRAC, /Systems/1 for an
// iLO or a Supermicro: vbmcd serves the vendor's ids there); on the
// shared listener every System is named by its node's UUID, the one id
// unique there. install-config's address and labctl's own SystemURL name
// the same System.
func (p *Plan) endpoint(n *Node, i int, kind, persona string) error {
	pers, err := personality.Lookup(persona)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	if persona != "" {
		n.BMC.Personality, n.BMC.Vendor = persona, pers.Manufacturer
		if pers.Manufacturer == "Dell Inc." && kind == ocp.BMCRedfishVirtualMedia {
			kind = ocp.BMCIDRACVirtualMedia
		}
	}
	if p.BMC.Network.IsValid() {
		// A BMC of its own: the next address of the BMC network, Redfish
		// and IPMI at their usual ports there.
		a := p.BMC.HostAddress
		for range i + 1 {
			a = a.Next()
		}
		if !p.BMC.Network.Contains(a) || (a.Is4() && !p.BMC.Network.Contains(a.Next())) {
			return fmt.Errorf("cluster.bmc.network: %s has no address left for node %s's BMC; use a larger subnet", p.BMC.Network, n.Name)
		}
		system := n.UUID
		if pers.SystemID != "" {
			system = pers.SystemID
		}
		n.BMC.Addr = a
		n.BMC.SystemURL = fmt.Sprintf("%s://%s/redfish/v1/Systems/%s", p.BMC.Scheme, hostForURL(a), system)
		addr, err := ocp.BMCAddress(ocp.BMCEndpoint{Kind: kind, Host: a.String(), TLS: p.BMC.Scheme == "https", OwnAddress: true}, system, 0)
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		n.BMC.Address = addr
		return nil
	}
	host := net.JoinHostPort(p.BMC.Host, strconv.Itoa(p.BMC.RedfishPort))
	n.BMC.SystemURL = fmt.Sprintf("%s://%s/redfish/v1/Systems/%s", p.BMC.Scheme, host, n.UUID)
	if p.BMC.Kind == ocp.BMCIPMI {
		n.BMC.IPMIPort = p.BMC.IPMIPortBase + i
	}
	addr, err := ocp.BMCAddress(ocp.BMCEndpoint{Kind: kind, Host: p.BMC.Host, RedfishPort: p.BMC.RedfishPort, TLS: p.BMC.Scheme == "https"}, n.UUID, n.BMC.IPMIPort)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	n.BMC.Address = addr
	return nil
}

// resolveInband wires the in-band IPMI of the nodes that have a BMC, an
// ISA bus for the KCS (x86_64) and the lab's vbmcd on their host (the
// hub, in a lab over several hosts: a unix socket does not cross hosts).
func (p *Plan) resolveInband() {
	hub := ""
	for _, h := range p.Hosts {
		if h.Hub {
			hub = h.Name
		}
	}
	for i := range p.Nodes {
		n := &p.Nodes[i]
		n.BMC.Inband = n.BMC.SystemURL != "" && n.Arch == ArchX86_64 && n.Host == hub
	}
}

// hostForURL is an address as a URL's host: IPv6 in brackets.
func hostForURL(a netip.Addr) string {
	if a.Is6() {
		return "[" + a.String() + "]"
	}
	return a.String()
}

// ipmiMaxPassword and ipmiMaxName are IPMI's longest password and user
// name (internal/accounts' MaxPasswordLength and MaxNameLength, which vbmcd
// enforces).
const (
	ipmiMaxPassword = 20
	ipmiMaxName     = 16
)

// NodePassword derives a node's own BMC password from the lab's: the same
// across down and up, different for every node, and nothing to store.
func NodePassword(labPassword, lab, node string) string {
	m := hmac.New(sha256.New, []byte(labPassword))
	m.Write([]byte("bmlab-node-bmc/" + lab + "/" + node))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))[:24]
}

// StartGap is how long the lab's vbmcd waits after one machine's start
// finished before it starts the next.
const StartGap = 3 * time.Second

// vbmcd is the lab's vbmcd invocation. It listens on the BMC address only
// (when that is an IP), so labs on different machine networks share ports.
func (p *Plan) vbmcd(path string, cpus int) Vbmcd {
	if !p.Traits.BMCs {
		return Vbmcd{} // the mode's nodes have no BMC
	}
	// Starts are paced: an installer powers every master on at once on
	// the host that runs them all. A booting machine keeps about four
	// CPUs busy; each start waits a few seconds after the last one.
	maxStarting := max(1, cpus/4)
	listen := ""
	if a, err := netip.ParseAddr(p.BMC.Host); err == nil {
		listen = a.String()
	}
	v := Vbmcd{
		Path:            path,
		Env:             []string{MarkEnv + "=" + p.Lab},
		CredentialsFile: filepath.Join(p.StateDir, "vbmcd", "credentials.yaml"),
		Log:             filepath.Join(p.StateDir, "vbmcd.log"),
	}
	v.Args = append(p.libvirtURIs(),
		"--domains", p.nodeNames(),
		"--redfish-addr", net.JoinHostPort(listen, strconv.Itoa(p.BMC.RedfishPort)),
		"--credentials-file", v.CredentialsFile,
		"--state-dir", filepath.Join(p.StateDir, "vbmcd"),
		"--media-dir", filepath.Join(p.StateDir, "media"),
		"--log-format", "json",
		"--max-starting", strconv.Itoa(maxStarting),
		"--start-gap", StartGap.String(),
	)
	if p.BMC.Scheme == "http" {
		v.Args = append(v.Args, "--insecure-http")
	}
	if p.BMC.LabCA {
		v.Args = append(v.Args, "--tls-cert", p.Paths.BMCCert, "--tls-key", p.Paths.BMCKey)
	}
	if p.BMC.Kind == ocp.BMCIPMI && listen != "" {
		v.Args = append(v.Args, "--ipmi-addr", listen)
	}
	if p.BMC.Network.IsValid() {
		// Every node a BMC of its own, at its address on the BMC network;
		// their certificates issued by the lab's CA.
		var pins []string
		for _, n := range p.Nodes {
			if n.BMC.Addr.IsValid() {
				pins = append(pins, n.Name+"="+n.BMC.Addr.String())
			}
		}
		v.Args = append(v.Args, "--bmc-addresses", strings.Join(pins, ","))
		if p.BMC.LabCA {
			v.Args = append(v.Args, "--tls-ca-cert", p.Paths.CACert, "--tls-ca-key", p.Paths.CAKey)
		}
	}
	return v
}

// IsURL reports whether an image is given by an http(s) URL.
func IsURL(s string) bool { return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") }

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

// MACFor returns a node's boot MAC: the qemu prefix and three bytes of a
// hash of the lab's and the node's names, so a lab brought down and up again
// keeps its MACs.
func MACFor(lab, node string) string {
	h := sha256.Sum256([]byte(lab + "/" + node))
	return fmt.Sprintf("52:54:00:%02x:%02x:%02x", h[0], h[1], h[2])
}

// UUIDFor returns a node's domain UUID (name-based, version 5 layout), so
// the BMC addresses survive down and up.
func UUIDFor(lab, node string) string {
	h := sha1.Sum([]byte("bmlab-lab/" + lab + "/" + node))
	h[6] = (h[6] & 0x0f) | 0x50
	h[8] = (h[8] & 0x3f) | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// Node returns the node with that name.
func (p *Plan) Node(name string) (Node, bool) {
	for _, n := range p.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return Node{}, false
}

// NodeNames lists the nodes' names in order.
func (p *Plan) NodeNames() []string {
	out := make([]string, len(p.Nodes))
	for i, n := range p.Nodes {
		out[i] = n.Name
	}
	return out
}

// Added is what labctl add-node records: the workers added to the running
// cluster.
type Added struct {
	Workers int `json:"workers"`
}

// ReadAdded reads the workers added to a lab (0 when none were).
func ReadAdded(path string) (int, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("added nodes: %w", err)
	}
	var a Added
	if err := json.Unmarshal(b, &a); err != nil || a.Workers < 0 {
		return 0, fmt.Errorf("added nodes: %s is damaged (%v); write {\"workers\": N} or remove it", path, err)
	}
	return a.Workers, nil
}
