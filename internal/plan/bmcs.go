package plan

// The BMCs: the BMC network and its rules, the nodes' BMC passwords and
// vbmcd's invocation.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"time"

	"github.com/bmlab/bmlab/internal/labconfig"
	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/ocp"
)

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
			if f := p.Cluster.Secondary; !f.IsZero() {
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

// Vbmcd is the lab's BMC daemon as facts: what it serves and where it
// keeps its files. The provider turns them into its command line
// (labvirt: vbmcd's flags); the plan holds no flag. Zero when the mode's
// nodes have no BMC (Serves).
type Vbmcd struct {
	Path string `json:"path"`
	// Env marks the process as the lab's (MarkEnv=<lab>), so down finds
	// it without the state file.
	Env []string `json:"env"`
	// CredentialsFile (0600) holds the BMC user and password: never on
	// the command line, where every local user reads it.
	CredentialsFile string `json:"credentialsFile"`
	Log             string `json:"log"`
	// Libvirt are the lab's hosts' libvirt URIs; Domains the nodes it
	// serves, in the plan's order.
	Libvirt []LibvirtURI `json:"libvirt,omitempty"`
	Domains []string     `json:"domains,omitempty"`
	// RedfishAddr is the Redfish listener (host:port; the host empty
	// when the BMC host is a name: every address); IPMIAddr the IPMI
	// listener's address ("" when the BMCs speak no IPMI there).
	RedfishAddr  string `json:"redfishAddr,omitempty"`
	IPMIAddr     string `json:"ipmiAddr,omitempty"`
	InsecureHTTP bool   `json:"insecureHTTP,omitempty"`
	StateDir     string `json:"stateDir,omitempty"`
	MediaDir     string `json:"mediaDir,omitempty"`
	// MaxStarting machines start at once, StartGap after the last start.
	MaxStarting int           `json:"maxStarting,omitempty"`
	StartGap    time.Duration `json:"startGap,omitempty"`
	// TLSCert and TLSKey are the BMCs' certificate, issued by the lab's
	// CA (BMC.LabCA); CACert and CAKey that CA, which issues the
	// certificate of each BMC at an address of its own.
	TLSCert string `json:"tlsCert,omitempty"`
	TLSKey  string `json:"tlsKey,omitempty"`
	CACert  string `json:"caCert,omitempty"`
	CAKey   string `json:"caKey,omitempty"`
	// BMCAddresses pin nodes' BMCs to their addresses on the BMC network.
	BMCAddresses []NodeAddress `json:"bmcAddresses,omitempty"`
}

// Serves says whether the lab has a BMC daemon at all.
func (v Vbmcd) Serves() bool { return v.RedfishAddr != "" }

// LibvirtURI is a libvirt connection of the lab: Host names the lab's
// host it reaches ("" in a lab on one host).
type LibvirtURI struct {
	Host string `json:"host,omitempty"`
	URI  string `json:"uri"`
}

// NodeAddress is a node's address.
type NodeAddress struct {
	Node string     `json:"node"`
	Addr netip.Addr `json:"addr"`
}

// LLDPSender is the lab's LLDP sender as facts (`vbmcd lldp`, marked as
// the lab's as vbmcd is): the switches' frames on the taps of the nodes of
// Domains, reached through Libvirt.
type LLDPSender struct {
	Path    string       `json:"path"`
	Env     []string     `json:"env"`
	Log     string       `json:"log"`
	Libvirt []LibvirtURI `json:"libvirt"`
	Domains []string     `json:"domains"`
}

// MarkEnv is the environment variable that marks a process as a lab's.
const MarkEnv = "BMLAB_LAB"

// libvirtURIs are the lab's libvirt connections: one a host, else the
// lab's own.
func (p *Plan) libvirtURIs() []LibvirtURI {
	var uris []LibvirtURI
	for _, h := range p.Hosts {
		uris = append(uris, LibvirtURI{Host: h.Name, URI: h.LibvirtURI})
	}
	if len(uris) == 0 {
		uris = []LibvirtURI{{URI: p.LibvirtURI}}
	}
	return uris
}

// nodeNames are the nodes' names.
func nodeNames(nodes []Node) []string {
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}
	return names
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

// vbmcd is the lab's BMC daemon. It listens on the BMC address only
// (when that is an IP), so labs on different machine networks share ports.
func (p *Plan) vbmcd(path string, cpus int) Vbmcd {
	if !p.Traits.BMCs {
		return Vbmcd{} // the mode's nodes have no BMC
	}
	// Starts are paced: an installer powers every master on at once on
	// the host that runs them all. A booting machine keeps about four
	// CPUs busy; each start waits a few seconds after the last one.
	listen := ""
	if a, err := netip.ParseAddr(p.BMC.Host); err == nil {
		listen = a.String()
	}
	v := Vbmcd{
		Path:            path,
		Env:             []string{MarkEnv + "=" + p.Lab},
		CredentialsFile: filepath.Join(p.StateDir, "vbmcd", "credentials.yaml"),
		Log:             filepath.Join(p.StateDir, "vbmcd.log"),
		Libvirt:         p.libvirtURIs(),
		Domains:         nodeNames(p.Nodes),
		RedfishAddr:     net.JoinHostPort(listen, strconv.Itoa(p.BMC.RedfishPort)),
		InsecureHTTP:    p.BMC.Scheme == "http",
		StateDir:        filepath.Join(p.StateDir, "vbmcd"),
		MediaDir:        filepath.Join(p.StateDir, "media"),
		MaxStarting:     max(1, cpus/4),
		StartGap:        StartGap,
	}
	if p.BMC.LabCA {
		v.TLSCert, v.TLSKey = p.Paths.BMCCert, p.Paths.BMCKey
	}
	if p.BMC.Kind == ocp.BMCIPMI {
		v.IPMIAddr = listen
	}
	if p.BMC.Network.IsValid() {
		// Every node a BMC of its own, at its address on the BMC network;
		// their certificates issued by the lab's CA.
		v.BMCAddresses = []NodeAddress{}
		for _, n := range p.Nodes {
			if n.BMC.Addr.IsValid() {
				v.BMCAddresses = append(v.BMCAddresses, NodeAddress{Node: n.Name, Addr: n.BMC.Addr})
			}
		}
		if p.BMC.LabCA {
			v.CACert, v.CAKey = p.Paths.CACert, p.Paths.CAKey
		}
	}
	return v
}
