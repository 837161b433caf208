package labconfig

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"

	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/ocp"
	"github.com/bmlab/bmlab/internal/yamljson"
)

// APIVersion and Kind head every lab configuration file.
const (
	APIVersion = "bmlab.dev/v1alpha1"
	Kind       = "Lab"
)

// DefaultPath is where labctl looks for the file when no --config is given.
const DefaultPath = "lab.yaml"

// Seed lab defaults.
const (
	DefaultName          = "seed"
	DefaultMTU           = 1500
	DefaultLibvirtBridge = "virbr0"
	// DefaultSharedNetwork is libvirt's own network, on DefaultLibvirtBridge.
	DefaultSharedNetwork = "default"
	BaremetalBridge      = "baremetal"
	ProvisioningBridge   = "provisioning"
	SeedVeth             = "bmlab-veth0" // in baremetal
	SeedVethPeer         = "bmlab-veth1" // in libvirt's bridge
	DefaultNMConfDir     = "/etc/NetworkManager/conf.d"
)

// Host resolvers (network.hostResolver): how the lab host resolves the
// cluster's names.
const (
	// ResolverHosts puts api and the console and oauth routes in the
	// hosts file at install-complete (hybrid mode; cluster.hybrid.hostsFile).
	ResolverHosts = "hosts"
	// ResolverDnsmasq writes a drop-in for NetworkManager's dnsmasq plugin
	// that sends the cluster's domain to the lab network's DNS.
	ResolverDnsmasq = "dnsmasq"
	// ResolverResolved writes a systemd-resolved drop-in: the lab network's
	// DNS for the cluster's domain only (a routing domain, ~domain).
	ResolverResolved = "resolved"
	// ResolverNone leaves the host's resolution alone.
	ResolverNone = "none"
	// DefaultDnsmasqDir and DefaultResolvedDir are where each drop-in goes.
	DefaultDnsmasqDir  = "/etc/NetworkManager/dnsmasq.d"
	DefaultResolvedDir = "/etc/systemd/resolved.conf.d"
)

// Config is the lab's configuration file.
type Config struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Name names the lab; the lab marks what it creates with it.
	Name string `json:"name"`
	// Mode is the install mode (ipi-baremetal, hybrid, agent); labctl's
	// --mode overrides it, and neither may disagree with a lab that
	// exists. Empty: ipi-baremetal, or the existing lab's.
	Mode    string  `json:"mode,omitempty"`
	Network Network `json:"network"`
	// Cluster is what `labctl up --mode ipi-baremetal` installs.
	Cluster Cluster `json:"cluster,omitzero"`
	// Hosts, when given, spread the lab over several libvirt hosts; the
	// first is the hub (see Host). Without it the lab is on one host.
	Hosts []Host `json:"hosts,omitempty"`
}

// Network is the lab's host network.
type Network struct {
	// ProvisioningNetwork is Managed, Unmanaged or Disabled (the default);
	// unless it is Disabled the lab has a provisioning bridge.
	ProvisioningNetwork string `json:"provisioningNetwork,omitempty"`
	// MTU is the MTU of every link that does not set its own (default 1500).
	MTU int `json:"mtu,omitempty"`
	// LibvirtBridge is the bridge of the libvirt network (default virbr0)
	// whose DHCP, DNS and NAT the lab borrows through the seed veth pair.
	LibvirtBridge string `json:"libvirtBridge,omitempty"`
	// Shared names a libvirt network the lab shares with other labs (or
	// with anything else): libvirt's "default", another lab's NAT network
	// (<lab>-machine) or one of the user's. The lab then makes no NAT
	// network of its own: it adds its nodes' DHCP reservations and its DNS
	// records to the shared one, marked as its own, and its down removes
	// them and nothing else. LibvirtBridge must be that network's bridge
	// (virbr0, the default, is default's).
	Shared string `json:"shared,omitempty"`
	// Bridges default to baremetal, and provisioning unless
	// ProvisioningNetwork is Disabled.
	Bridges []Bridge `json:"bridges,omitempty"`
	// Veths default to bmlab-veth0 in baremetal paired with bmlab-veth1 in
	// LibvirtBridge; an empty list (veths: []) means none.
	Veths []Veth `json:"veths,omitempty"`
	VLANs []VLAN `json:"vlans,omitempty"`
	// NetworkManagerConfDir receives the unmanaged-devices snippet when
	// NetworkManager is present (default /etc/NetworkManager/conf.d).
	NetworkManagerConfDir string `json:"networkManagerConfDir,omitempty"`
	// HostResolver says how the lab host resolves the cluster's names:
	// hosts (the default: api, console and oauth in the hosts file, hybrid
	// mode), dnsmasq (a NetworkManager dnsmasq-plugin drop-in), resolved (a
	// systemd-resolved drop-in) or none. The drop-ins send the whole
	// cluster domain, *.apps included, to the lab network's DNS.
	HostResolver string `json:"hostResolver,omitempty"`
	// HostResolverDir is where the drop-in goes (default
	// /etc/NetworkManager/dnsmasq.d or /etc/systemd/resolved.conf.d).
	HostResolverDir string `json:"hostResolverDir,omitempty"`
	// LLDP says whether the lab's switches announce themselves: LLDP
	// frames on every running node NIC's tap with what the node's BMC
	// reports as the port's LLDPReceive (`vbmcd lldp`). Default: on where
	// the nodes have BMCs (ipi-baremetal, agent), off in hybrid mode.
	LLDP *bool `json:"lldp,omitempty"`
}

// Bridge is a bridge the lab owns.
type Bridge struct {
	Name      string         `json:"name"`
	MTU       int            `json:"mtu,omitempty"`
	Addresses []netip.Prefix `json:"addresses,omitempty"`
	// LibvirtNetwork (default true) defines a libvirt network with the
	// bridge's name and bridge, which the IPI installer's bridge check needs.
	LibvirtNetwork *bool `json:"libvirtNetwork,omitempty"`
}

// Veth is a veth pair the lab owns, as netplumb makes it (the lab file's
// network.veths are netplumb's records, word for word).
type Veth = netplumb.Veth

// VLAN is an 802.1Q sub-interface the lab owns, as netplumb makes it.
type VLAN = netplumb.VLAN

// Default returns the seed lab's configuration.
func Default() *Config {
	c := &Config{}
	c.SetDefaults()
	return c
}

// Load reads the file at path, fills in defaults and validates it. When
// mustExist is false and the file does not exist, it returns Default().
func Load(path string, mustExist bool) (*Config, error) {
	c, _, err := LoadFile(path, mustExist)
	return c, err
}

// LoadFile is Load that also returns the file's bytes (nil for the seed lab).
func LoadFile(path string, mustExist bool) (*Config, []byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && !mustExist {
		c := Default()
		return c, nil, c.Cluster.BMC.resolvePassword(".")
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read lab configuration: %w", err)
	}
	c, err := LoadData(data, filepath.Dir(path))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, data, nil
}

// LoadData is Load for a lab file read already (from standard input, say),
// whose relative paths are relative to dir.
func LoadData(data []byte, dir string) (*Config, error) {
	c, err := Parse(data)
	if err != nil {
		return nil, err
	}
	if err := c.Cluster.BMC.resolvePassword(dir); err != nil {
		return nil, err
	}
	return c, nil
}

// Parse decodes a configuration file, fills in defaults and validates it.
func Parse(data []byte) (*Config, error) {
	if err := checkShape(data); err != nil {
		return nil, err
	}
	c := &Config{}
	if err := yamljson.UnmarshalStrict(data, c); err != nil {
		msg := err.Error()
		return nil, fmt.Errorf("not a lab configuration: %s", msg)
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// SetDefaults fills in what the file leaves out, so that an empty file
// describes the seed lab.
func (c *Config) SetDefaults() {
	c.APIVersion = cmp.Or(c.APIVersion, APIVersion)
	c.Kind = cmp.Or(c.Kind, Kind)
	c.Name = cmp.Or(c.Name, DefaultName)
	n := &c.Network
	n.ProvisioningNetwork = cmp.Or(n.ProvisioningNetwork, ocp.ProvisioningDisabled)
	n.MTU = cmp.Or(n.MTU, DefaultMTU)
	n.LibvirtBridge = cmp.Or(n.LibvirtBridge, DefaultLibvirtBridge)
	n.NetworkManagerConfDir = cmp.Or(n.NetworkManagerConfDir, DefaultNMConfDir)
	n.HostResolver = cmp.Or(n.HostResolver, ResolverHosts)
	if n.HostResolverDir == "" {
		switch n.HostResolver {
		case ResolverDnsmasq:
			n.HostResolverDir = DefaultDnsmasqDir
		case ResolverResolved:
			n.HostResolverDir = DefaultResolvedDir
		}
	}
	if n.Bridges == nil {
		n.Bridges = []Bridge{{Name: BaremetalBridge}}
		if n.ProvisioningNetwork != ocp.ProvisioningDisabled {
			n.Bridges = append(n.Bridges, Bridge{Name: ProvisioningBridge})
		}
	}
	if n.Veths == nil {
		n.Veths = []Veth{{Name: SeedVeth, Master: BaremetalBridge, Peer: SeedVethPeer, PeerMaster: n.LibvirtBridge}}
	}
	for i := range n.Bridges {
		setMTU(&n.Bridges[i].MTU, n.MTU)
	}
	for i := range n.Veths {
		setMTU(&n.Veths[i].MTU, n.MTU)
	}
	for i := range n.VLANs {
		setMTU(&n.VLANs[i].MTU, n.MTU)
	}
	c.setClusterDefaults()
}

func setMTU(mtu *int, def int) {
	if *mtu == 0 {
		*mtu = def
	}
}

// sharedName is what a libvirt network name may be here: no path
// separators, nothing a shell or XML would read otherwise.
var sharedName = regexp.MustCompile(`^[A-Za-z0-9][-A-Za-z0-9_.]{0,62}$`)

// labName keeps the lab's name fit for link aliases, file names and
// libvirt metadata.
var labName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,46}[a-z0-9])?$`)

// Validate checks the configuration, naming the field at fault.
func (c *Config) Validate() error {
	var errs []error
	if c.APIVersion != APIVersion {
		errs = append(errs, fmt.Errorf("apiVersion: %q is not supported; use %q", c.APIVersion, APIVersion))
	}
	if c.Kind != Kind {
		errs = append(errs, fmt.Errorf("kind: %q is not supported; use %q", c.Kind, Kind))
	}
	if !labName.MatchString(c.Name) {
		errs = append(errs, fmt.Errorf("name: %q must be 1 to 48 lower-case letters, digits and inner dashes", c.Name))
	}
	switch c.Network.ProvisioningNetwork {
	case ocp.ProvisioningManaged, ocp.ProvisioningUnmanaged, ocp.ProvisioningDisabled:
	default:
		errs = append(errs, fmt.Errorf("network.provisioningNetwork: %q is not one of Managed, Unmanaged, Disabled", c.Network.ProvisioningNetwork))
	}
	names := func(field string, ns ...string) {
		for _, n := range ns {
			if n == "" {
				continue
			}
			if err := netplumb.ValidName(n); err != nil {
				errs = append(errs, fmt.Errorf("network.%s: %w", field, err))
			}
		}
	}
	names("libvirtBridge", c.Network.LibvirtBridge)
	switch r := c.Network.HostResolver; r {
	case ResolverHosts, ResolverDnsmasq, ResolverResolved, ResolverNone:
		if d := c.Network.HostResolverDir; d != "" && (r == ResolverHosts || r == ResolverNone) {
			errs = append(errs, fmt.Errorf("network.hostResolverDir: %s is set but network.hostResolver is %s, which writes no drop-in; set hostResolver: %s or %s, or leave the directory out", d, r, ResolverDnsmasq, ResolverResolved))
		} else if d != "" && !filepath.IsAbs(d) {
			errs = append(errs, fmt.Errorf("network.hostResolverDir: %q is not an absolute path; name the directory the resolver reads (%s or %s)", d, DefaultDnsmasqDir, DefaultResolvedDir))
		}
	default:
		errs = append(errs, fmt.Errorf("network.hostResolver: %q is not one of %s, %s, %s, %s (hosts file entries, a NetworkManager dnsmasq drop-in, a systemd-resolved drop-in, nothing)", r, ResolverHosts, ResolverDnsmasq, ResolverResolved, ResolverNone))
	}
	if sh := c.Network.Shared; sh != "" {
		if !sharedName.MatchString(sh) {
			errs = append(errs, fmt.Errorf("network.shared: %q is not a libvirt network name (letters, digits, '.', '_' and '-'); name the network to share, as `virsh net-list --all` shows it", sh))
		} else if sh != DefaultSharedNetwork && c.Network.LibvirtBridge == DefaultLibvirtBridge {
			errs = append(errs, fmt.Errorf("network.shared: %q is not libvirt's %q network, whose bridge is %s; name its bridge in network.libvirtBridge (`virsh net-info %s` shows it; a lab's NAT network <lab>-machine is on bmnat-<lab>)", sh, DefaultSharedNetwork, DefaultLibvirtBridge, sh))
		}
	}
	for i, b := range c.Network.Bridges {
		names(fmt.Sprintf("bridges[%d].name", i), b.Name)
	}
	bridges := map[string]bool{}
	for _, b := range c.Network.Bridges {
		bridges[b.Name] = true
	}
	for i, v := range c.Network.Veths {
		names(fmt.Sprintf("veths[%d]", i), v.Name, v.Peer, v.Master, v.PeerMaster)
		if v.Master != "" && !bridges[v.Master] {
			errs = append(errs, fmt.Errorf("network.veths[%d].master: %q is not one of the lab's bridges (network.bridges); name one of them, or leave master out", i, v.Master))
		}
	}
	for i, v := range c.Network.VLANs {
		names(fmt.Sprintf("vlans[%d]", i), v.Name, v.Parent, v.Master)
	}
	errs = append(errs, c.validateCluster()...)
	errs = append(errs, c.validateHosts()...)
	if len(errs) == 0 {
		if err := c.Network.Topology().Validate(); err != nil {
			errs = append(errs, fmt.Errorf("network: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Topology is the network part as netplumb declares it.
func (n Network) Topology() netplumb.Topology {
	var t netplumb.Topology
	for _, b := range n.Bridges {
		t.Bridges = append(t.Bridges, netplumb.Bridge{Name: b.Name, MTU: b.MTU, Addresses: b.Addresses})
	}
	t.Veths = append(t.Veths, n.Veths...)
	t.VLANs = append(t.VLANs, n.VLANs...)
	return t
}

// LibvirtNetworks returns the bridges that get a libvirt network of the
// same name.
func (n Network) LibvirtNetworks() []string {
	var out []string
	for _, b := range n.Bridges {
		if b.LibvirtNetwork == nil || *b.LibvirtNetwork {
			out = append(out, b.Name)
		}
	}
	return out
}
