package plan

import (
	"cmp"
	"crypto/sha256"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/bmlab/bmlab/internal/labconfig"
	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/ocp"
)

// Host is one libvirt host of a lab spread over several (the lab file's
// hosts:). The hub (the first host) runs vbmcd and the installer and holds
// the lab's NAT network and its veth; the others hold only the lab's
// bridges. Every other host's bridges are joined to the hub's by one VXLAN
// link per bridge: a star, since bridges joined in a full mesh would loop
// frames without spanning tree.
type Host struct {
	Name       string     `json:"name"`
	LibvirtURI string     `json:"libvirtURI"`
	Underlay   netip.Addr `json:"underlay"`
	Hub        bool       `json:"hub,omitempty"`
	// Exec is the argv prefix that runs a command on the host (the lab
	// file's exec:), Labctl the labctl program there; without Exec, labctl
	// on the hub cannot reach the host's links and files, and says what the
	// user must run there.
	Exec   []string `json:"exec,omitempty"`
	Labctl string   `json:"labctl,omitempty"`
	// Topology is this host's links: what `labctl net --host NAME` checks
	// and repairs when run on that host.
	Topology netplumb.Topology `json:"topology"`
}

// joinedBridges are the lab bridges that VXLAN joins across hosts.
var joinedBridges = []string{labconfig.BaremetalBridge, labconfig.ProvisioningBridge}

// vxlanName names the VXLAN link that carries bridge to the host named
// remote: vxb-<remote> for baremetal, vxp-<remote> for provisioning (host
// names are at most 11 bytes, so the name fits the kernel's 15).
func vxlanName(bridge, remote string) string { return fmt.Sprintf("vx%c-%s", bridge[0], remote) }

// vni derives the VXLAN network identifier of one bridge between the hub
// and one host from the lab's name: distinct per bridge and per host, so
// that the hub's links to several hosts never share a VNI (the kernel
// refuses two vxlan devices with one VNI on one port).
func vni(lab, bridge, hub, host string) int {
	h := sha256.Sum256([]byte("bmlab-vxlan/" + lab + "/" + bridge + "/" + hub + "/" + host))
	return 1 + (int(h[0])<<16|int(h[1])<<8|int(h[2]))%(1<<24-1)
}

// resolveHosts gives each host its topology and each node its host.
func (p *Plan) resolveHosts(cfg *labconfig.Config) {
	if len(cfg.Hosts) == 0 {
		return
	}
	base := p.Network.Topology
	hub := cfg.Hosts[0]
	bridgeMTU := map[string]int{}
	for _, b := range base.Bridges {
		bridgeMTU[b.Name] = b.MTU
	}
	for i, h := range cfg.Hosts {
		host := Host{Name: h.Name, LibvirtURI: h.LibvirtURI, Underlay: h.Underlay, Hub: i == 0, Exec: slices.Clone(h.Exec)}
		if !host.Hub {
			host.Labctl = cmp.Or(h.Labctl, "labctl")
		}
		if host.Hub {
			host.Topology = cloneTopology(base)
		} else {
			host.Topology = netplumb.Topology{Bridges: slices.Clone(base.Bridges)}
		}
		for _, br := range joinedBridges {
			mtu, ok := bridgeMTU[br]
			if !ok {
				continue
			}
			if host.Hub {
				for _, spoke := range cfg.Hosts[1:] {
					host.Topology.VXLANs = append(host.Topology.VXLANs, netplumb.VXLAN{
						Name: vxlanName(br, spoke.Name), ID: vni(p.Lab, br, hub.Name, spoke.Name),
						Local: hub.Underlay, Remote: spoke.Underlay, Master: br, MTU: mtu})
				}
			} else {
				host.Topology.VXLANs = append(host.Topology.VXLANs, netplumb.VXLAN{
					Name: vxlanName(br, hub.Name), ID: vni(p.Lab, br, hub.Name, h.Name),
					Local: h.Underlay, Remote: hub.Underlay, Master: br, MTU: mtu})
			}
		}
		p.Hosts = append(p.Hosts, host)
	}
	p.LibvirtURI = hub.LibvirtURI
	// Placement: the lab file's per role, else round-robin over all nodes
	// in order; the hybrid bootstrap stays on the hub with the installer.
	next := 0
	count := map[string]int{}
	for i := range p.Nodes {
		n := &p.Nodes[i]
		var placed []string
		switch n.Role {
		case ocp.RoleMaster:
			placed = cfg.Cluster.Masters.Placement
		case ocp.RoleWorker:
			placed = cfg.Cluster.Workers.Placement
		}
		switch {
		case n.Role == ocp.RoleBootstrap:
			n.Host = hub.Name
		case len(placed) > 0:
			n.Host = placed[count[n.Role]]
		default:
			n.Host = cfg.Hosts[next%len(cfg.Hosts)].Name
			next++
		}
		count[n.Role]++
	}
}

func cloneTopology(t netplumb.Topology) netplumb.Topology {
	return netplumb.Topology{Bridges: slices.Clone(t.Bridges), Veths: slices.Clone(t.Veths),
		VLANs: slices.Clone(t.VLANs), VXLANs: slices.Clone(t.VXLANs)}
}

// HubTopology is the links of the host labctl up runs on: the hub's (with
// its VXLAN links) for a lab over several hosts, else the lab's topology.
func (p *Plan) HubTopology() netplumb.Topology {
	for _, h := range p.Hosts {
		if h.Hub {
			return h.Topology
		}
	}
	return p.Network.Topology
}

// ForHost returns the host with that name.
func (p *Plan) ForHost(name string) (Host, bool) {
	for _, h := range p.Hosts {
		if h.Name == name {
			return h, true
		}
	}
	return Host{}, false
}

// LocalNodes returns the nodes placed on the named host; a lab on one host
// (no hosts:) has every node there, whatever the name.
func (p *Plan) LocalNodes(host string) []Node {
	if len(p.Hosts) == 0 {
		return p.Nodes
	}
	var out []Node
	for _, n := range p.Nodes {
		if n.Host == host {
			out = append(out, n)
		}
	}
	return out
}

// Spokes are the hosts other than the hub.
func (p *Plan) Spokes() []Host {
	var out []Host
	for _, h := range p.Hosts {
		if !h.Hub {
			out = append(out, h)
		}
	}
	return out
}

// ForSpoke is the part of the plan that labctl on a host other than the hub
// builds there, as a lab on one host: that host's libvirt, links and nodes;
// no NAT network (the hub's); no vbmcd or installer (the hub runs them for
// every host); no LLDP sender. Its commands (`up|down --host NAME`) make and remove only
// what is on that host.
func (p *Plan) ForSpoke(name string) (*Plan, error) {
	h, ok := p.ForHost(name)
	switch {
	case len(p.Hosts) == 0:
		return nil, fmt.Errorf("--host %q: lab %q is on one host (its lab file has no hosts:)", name, p.Lab)
	case !ok:
		return nil, fmt.Errorf("--host %q: lab %q has hosts %s", name, p.Lab, p.hostNames())
	case h.Hub:
		return nil, fmt.Errorf("--host %s: that is the hub of lab %q; run up and down there without --host", name, p.Lab)
	}
	s := *p
	s.Hosts = nil
	s.LibvirtURI = h.LibvirtURI
	s.Nodes = p.LocalNodes(name)
	s.Network.Topology = h.Topology
	s.Network.NAT = nil
	s.Network.LLDP = nil             // the hub's sender covers the hub's taps alone
	s.Network.ProvisioningDHCP = nil // the hub's, on the hub's bridge, which VXLAN joins to this one
	s.Spoke = name
	return &s, nil
}

func (p *Plan) hostNames() string {
	var names []string
	for _, h := range p.Hosts {
		names = append(names, h.Name)
	}
	return strings.Join(names, ", ")
}
