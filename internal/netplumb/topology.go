package netplumb

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// Topology is the lab's declared network: the links the lab owns.
type Topology struct {
	// Bridges are created first; they are the masters of the lab's ports.
	Bridges []Bridge `json:"bridges,omitempty"`
	// Veths are pairs; each end may have a master, which is a bridge of the
	// topology or a bridge outside it (libvirt's network bridge).
	Veths []Veth `json:"veths,omitempty"`
	// VLANs are 802.1Q sub-interfaces of a link of the topology or of a link
	// outside it (a host NIC).
	VLANs []VLAN `json:"vlans,omitempty"`
	// VXLANs join a bridge of this host to the same bridge on other hosts
	// over the underlay (one point-to-point link per remote host).
	VXLANs []VXLAN `json:"vxlans,omitempty"`
	// Rules are routing policy rules the lab owns (rules.go): what a
	// network of the lab's reaches, as its router would route it.
	Rules []Rule `json:"rules,omitempty"`
}

// Bridge is a Linux bridge the lab owns.
type Bridge struct {
	Name      string         `json:"name"`
	MTU       int            `json:"mtu,omitempty"` // 0: the kernel's default
	Addresses []netip.Prefix `json:"addresses,omitempty"`
}

// Veth is a veth pair the lab owns; both ends are up.
type Veth struct {
	Name       string `json:"name"`
	Master     string `json:"master,omitempty"`
	Peer       string `json:"peer"`
	PeerMaster string `json:"peerMaster,omitempty"`
	MTU        int    `json:"mtu,omitempty"` // both ends; 0: the kernel's default
}

// VLAN is an 802.1Q sub-interface the lab owns.
type VLAN struct {
	Name      string         `json:"name"`
	Parent    string         `json:"parent"`
	ID        int            `json:"id"`
	Master    string         `json:"master,omitempty"`
	MTU       int            `json:"mtu,omitempty"`
	Addresses []netip.Prefix `json:"addresses,omitempty"`
}

// VXLAN is a point-to-point VXLAN link the lab owns (RFC 7348): frames
// that enter it leave as UDP from Local to Remote, port Port.
type VXLAN struct {
	Name   string     `json:"name"`
	ID     int        `json:"id"` // the VNI
	Local  netip.Addr `json:"local"`
	Remote netip.Addr `json:"remote"`
	Port   int        `json:"port,omitempty"` // default 4789 (IANA)
	Master string     `json:"master,omitempty"`
	MTU    int        `json:"mtu,omitempty"`
}

// VXLANPort is the IANA VXLAN port, the default of VXLAN.Port.
const VXLANPort = 4789

// Link kinds as the kernel names them (IFLA_INFO_KIND).
const (
	KindBridge = "bridge"
	KindVeth   = "veth"
	KindVLAN   = "vlan"
	KindVXLAN  = "vxlan"
)

// linkSpec is one link of a topology, flattened: a veth pair gives two.
type linkSpec struct {
	name   string
	kind   string
	mtu    int
	master string
	peer   string // veth
	parent string // vlan
	vlanID int    // vlan
	addrs  []netip.Prefix
	vxlan  *VXLAN // vxlan
}

// specs returns the topology's links in dependency order: bridges, veth
// ends, VLANs. Validate guarantees that a link's master and parent come
// before it or lie outside the topology.
func (t Topology) specs() []linkSpec {
	var out []linkSpec
	for _, b := range t.Bridges {
		out = append(out, linkSpec{name: b.Name, kind: KindBridge, mtu: b.MTU, addrs: b.Addresses})
	}
	for _, v := range t.Veths {
		out = append(out,
			linkSpec{name: v.Name, kind: KindVeth, mtu: v.MTU, master: v.Master, peer: v.Peer},
			linkSpec{name: v.Peer, kind: KindVeth, mtu: v.MTU, master: v.PeerMaster, peer: v.Name})
	}
	for _, v := range t.VLANs {
		out = append(out, linkSpec{name: v.Name, kind: KindVLAN, mtu: v.MTU, master: v.Master,
			parent: v.Parent, vlanID: v.ID, addrs: v.Addresses})
	}
	for _, v := range t.VXLANs {
		x := v
		if x.Port == 0 {
			x.Port = VXLANPort
		}
		out = append(out, linkSpec{name: v.Name, kind: KindVXLAN, mtu: v.MTU, master: v.Master, vxlan: &x})
	}
	return out
}

// Names returns the names of the links the topology owns, in dependency order.
func (t Topology) Names() []string {
	specs := t.specs()
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.name
	}
	return names
}

// External returns the links the topology refers to (as master or VLAN
// parent) but does not own, such as libvirt's network bridge.
func (t Topology) External() []string {
	own := map[string]bool{}
	for _, s := range t.specs() {
		own[s.name] = true
	}
	var out []string
	seen := map[string]bool{}
	for _, s := range t.specs() {
		for _, ref := range []string{s.master, s.parent} {
			if ref != "" && !own[ref] && !seen[ref] {
				seen[ref] = true
				out = append(out, ref)
			}
		}
	}
	return out
}

// Validate checks the topology on its own: names are valid and unique,
// masters are bridges, VLAN IDs are in range.
func (t Topology) Validate() error {
	errs := validateRules(t.Rules)
	specs := t.specs()
	kinds := map[string]string{}
	for _, s := range specs {
		if err := ValidName(s.name); err != nil {
			errs = append(errs, err)
			continue
		}
		if _, dup := kinds[s.name]; dup {
			errs = append(errs, fmt.Errorf("link %q is declared twice", s.name))
		}
		kinds[s.name] = s.kind
	}
	for _, s := range specs {
		if s.kind == KindVeth && s.peer == s.name {
			errs = append(errs, fmt.Errorf("veth %q cannot be its own peer", s.name))
		}
		if s.master != "" {
			if err := ValidName(s.master); err != nil {
				errs = append(errs, fmt.Errorf("master of %q: %w", s.name, err))
			} else if k, own := kinds[s.master]; own && k != KindBridge {
				errs = append(errs, fmt.Errorf("master of %q is %q, a %s; a master must be a bridge", s.name, s.master, k))
			} else if s.master == s.name {
				errs = append(errs, fmt.Errorf("link %q cannot be its own master", s.name))
			}
		}
		if s.kind == KindVLAN {
			if s.vlanID < 1 || s.vlanID > 4094 {
				errs = append(errs, fmt.Errorf("vlan %q: id %d is not in 1..4094", s.name, s.vlanID))
			}
			if err := ValidName(s.parent); err != nil {
				errs = append(errs, fmt.Errorf("parent of vlan %q: %w", s.name, err))
			} else if kinds[s.parent] == KindVLAN {
				errs = append(errs, fmt.Errorf("parent of vlan %q is vlan %q; stacked VLANs are not supported", s.name, s.parent))
			}
		}
		if x := s.vxlan; x != nil {
			if x.ID < 1 || x.ID > 1<<24-1 {
				errs = append(errs, fmt.Errorf("vxlan %q: id %d is not in 1..16777215", s.name, x.ID))
			}
			if !x.Remote.IsValid() || !x.Local.IsValid() || x.Remote == x.Local {
				errs = append(errs, fmt.Errorf("vxlan %q: local %s and remote %s must be two addresses", s.name, x.Local, x.Remote))
			}
			if x.Port < 1 || x.Port > 65535 {
				errs = append(errs, fmt.Errorf("vxlan %q: port %d is not in 1..65535", s.name, x.Port))
			}
		}
		if s.mtu != 0 && (s.mtu < 68 || s.mtu > 65535) {
			errs = append(errs, fmt.Errorf("link %q: MTU %d is not in 68..65535", s.name, s.mtu))
		}
		for _, a := range s.addrs {
			if !a.IsValid() {
				errs = append(errs, fmt.Errorf("link %q: invalid address", s.name))
			}
		}
	}
	return errors.Join(errs...)
}

// ValidName reports whether name can name a Linux network interface.
func ValidName(name string) error {
	switch {
	case name == "":
		return errors.New("empty interface name")
	case len(name) > 15:
		return fmt.Errorf("interface name %q is longer than 15 bytes", name)
	case name == "." || name == "..":
		return fmt.Errorf("interface name %q is not allowed", name)
	case strings.ContainsAny(name, "/: \t\n"):
		return fmt.Errorf("interface name %q contains '/', ':' or white space", name)
	}
	return nil
}
