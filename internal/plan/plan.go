package plan

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/bmlab/bmlab/internal/labconfig"
	"github.com/bmlab/bmlab/internal/ocp"
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

// Storage is the lab's pool.
type Storage struct {
	Pool string `json:"pool"`
	Dir  string `json:"dir"`
}

// Installer is where the installer runs.
type Installer struct {
	Binary string `json:"binary,omitempty"`
	Dir    string `json:"dir"`
	// OC is the configured OpenShift client (day-2 nodes).
	OC string `json:"oc,omitempty"`
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
		p.Hybrid = &Hybrid{Image: k.Image, Backing: k.Image, HybridImages: h.HybridImages}
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
		if f := p.Cluster.Secondary; !f.IsZero() {
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

// inputPath is a lab file's (or flag's) path of an input file: relative to
// the lab's directory; "~/" stays for the reader to resolve.
func inputPath(path, dir string) string {
	if filepath.IsAbs(path) || strings.HasPrefix(path, "~/") {
		return path
	}
	return filepath.Join(dir, path)
}

// IsURL reports whether an image is given by an http(s) URL.
func IsURL(s string) bool { return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") }
