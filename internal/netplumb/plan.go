package netplumb

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
)

// DiffKind names one way the kernel's links differ from the topology.
type DiffKind string

// The differences Plan reports. Foreign and ExternalMissing are blocking:
// Apply refuses to run while they stand.
const (
	Missing        DiffKind = "missing"         // the link does not exist
	Down           DiffKind = "down"            // the link is administratively down
	WrongMaster    DiffKind = "wrong-master"    // enslaved elsewhere or not at all
	WrongMTU       DiffKind = "wrong-mtu"       //
	WrongType      DiffKind = "wrong-type"      // a lab link of another kind (or another VLAN)
	PeerMissing    DiffKind = "peer-missing"    // a veth end whose peer is gone or is another link
	AddressMissing DiffKind = "address-missing" //
	Foreign        DiffKind = "foreign"         // a link with a lab name that the lab does not own
	// ExternalMissing: a link outside the lab that the topology relies on
	// (libvirt's bridge as a master, a NIC under a VLAN) is not there, or a
	// master is no bridge.
	ExternalMissing DiffKind = "external-missing"
)

// Difference is one way a link differs from the topology.
type Difference struct {
	Link string   `json:"link"`
	Kind DiffKind `json:"kind"`
	Want string   `json:"want,omitempty"`
	Got  string   `json:"got,omitempty"`
	// Blocking differences cannot be repaired by the lab; Fix says what the
	// user should do instead.
	Blocking bool   `json:"blocking,omitempty"`
	Fix      string `json:"fix"`
}

func (d Difference) String() string {
	s := fmt.Sprintf("%s: %s", d.Link, d.Kind)
	if d.Want != "" || d.Got != "" {
		s += fmt.Sprintf(" (want %s, got %s)", orNone(d.Want), orNone(d.Got))
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// Plan is the difference between a topology and a namespace's links, and the
// steps that remove it.
type Plan struct {
	Differences []Difference `json:"differences"`
	Steps       []Step       `json:"steps"`
}

// Blocking returns the differences Apply cannot repair.
func (p *Plan) Blocking() []Difference {
	var out []Difference
	for _, d := range p.Differences {
		if d.Blocking {
			out = append(out, d)
		}
	}
	return out
}

// Op is what a Step does.
type Op string

// The operations Apply performs, in the order it performs them for one link.
const (
	OpDelete  Op = "delete"  // an owned link of the wrong kind, or half a veth pair
	OpCreate  Op = "create"  // also marks the link (and a veth's peer) as the lab's
	OpMTU     Op = "set-mtu" //
	OpMaster  Op = "set-master"
	OpUp      Op = "set-up"
	OpAddress Op = "add-address"
)

// Step is one change Apply makes.
type Step struct {
	Op   Op     `json:"op"`
	Link string `json:"link"`
	// Arg is the MTU, the master, or the address, as text.
	Arg  string   `json:"arg,omitempty"`
	spec linkSpec // for OpCreate
	addr netip.Prefix
	rule Rule // for OpRuleAdd and OpRuleDel
}

func (s Step) String() string {
	if s.Arg == "" {
		return fmt.Sprintf("%s %s", s.Op, s.Link)
	}
	return fmt.Sprintf("%s %s %s", s.Op, s.Link, s.Arg)
}

// Owner is the link alias that marks a link as owned by the named lab.
func Owner(lab string) string { return "bmlab:" + lab }

// Diff compares a topology with an observed state. owner is the alias that
// marks the lab's links (see Owner). It is pure: the same inputs give the
// same plan.
func Diff(t Topology, owner string, o Observed) *Plan {
	p := &Plan{Differences: []Difference{}, Steps: []Step{}}
	specs := t.specs()
	byName := map[string]linkSpec{}
	for _, s := range specs {
		byName[s.name] = s
	}

	// Blocking differences first: a foreign link with a lab name, and a
	// master or parent outside the lab that is not there.
	foreign := map[string]bool{}
	for _, s := range specs {
		if l, ok := o.Links[s.name]; ok && l.Alias != owner {
			foreign[s.name] = true
			p.add(Difference{Link: s.name, Kind: Foreign, Want: "alias " + owner, Got: aliasText(l.Alias),
				Blocking: true,
				Fix: fmt.Sprintf("the lab never changes a link it does not own: delete %s (ip link del %s) if it is stale, or give the lab's %s another name in the lab configuration",
					s.name, s.name, s.kind)})
		}
	}
	masters := map[string]bool{}
	for _, s := range specs {
		masters[s.master] = true
	}
	for _, ext := range t.External() {
		l, ok := o.Links[ext]
		switch {
		case !ok:
			p.add(Difference{Link: ext, Kind: ExternalMissing, Want: "present", Blocking: true,
				Fix: fmt.Sprintf("%s is not the lab's, the lab needs it: create it (libvirt's bridge: virsh net-start <network>)", ext)})
		case masters[ext] && l.Kind != KindBridge:
			p.add(Difference{Link: ext, Kind: ExternalMissing, Want: KindBridge, Got: orNone(l.Kind), Blocking: true,
				Fix: fmt.Sprintf("%s is not the lab's and is no bridge; name a bridge as master in the lab configuration", ext)})
		}
	}

	done := map[string]bool{}
	for _, s := range specs {
		if done[s.name] {
			continue
		}
		done[s.name] = true
		if s.kind == KindVeth {
			done[s.peer] = true
			if !foreign[s.name] && !foreign[s.peer] {
				p.vethPair(s, byName[s.peer], o, owner)
			}
			continue
		}
		if foreign[s.name] {
			continue
		}
		l, exists := o.Links[s.name]
		switch {
		case !exists:
			p.add(Difference{Link: s.name, Kind: Missing, Want: s.kind, Fix: "create " + describe(s)})
		case l.Kind != s.kind || (s.kind == KindVLAN && (l.VLANID != s.vlanID || o.name(l.Link) != s.parent)) ||
			(s.kind == KindVXLAN && !sameVXLAN(s.vxlan, l.VXLAN)):
			p.add(Difference{Link: s.name, Kind: WrongType, Want: typeText(s), Got: observedTypeText(l, o),
				Fix: "delete and create " + describe(s)})
			p.deleteStep(l, o, owner)
			exists = false
		}
		if !exists {
			p.Steps = append(p.Steps, Step{Op: OpCreate, Link: s.name, spec: s})
		}
		p.settle(s, l, o, !exists)
	}
	// Rules last: their networks' links first.
	p.diffRules(t, o.Rules)
	return p
}

// vethPair plans both ends of a veth pair. A veth end never exists alone:
// unless the two ends are each other's peers, whatever is left of the pair
// is deleted and the pair created again.
func (p *Plan) vethPair(a, b linkSpec, o Observed, owner string) {
	la, ea := o.Links[a.name]
	lb, eb := o.Links[b.name]
	paired := func(l ObservedLink, peer string) bool {
		return l.Kind == KindVeth && !l.LinkElsewhere && o.name(l.Link) == peer
	}
	if ea && eb && paired(la, b.name) && paired(lb, a.name) {
		p.settle(a, la, o, false)
		p.settle(b, lb, o, false)
		return
	}
	ends := []struct {
		s, other  linkSpec
		l         ObservedLink
		exists    bool
		otherVeth bool
	}{{a, b, la, ea, eb && lb.Kind == KindVeth}, {b, a, lb, eb, ea && la.Kind == KindVeth}}
	for _, e := range ends {
		switch {
		case !e.exists && e.otherVeth:
			// Reported as the other end's missing peer.
		case !e.exists:
			p.add(Difference{Link: e.s.name, Kind: Missing, Want: KindVeth, Fix: "create " + describe(a)})
		case e.l.Kind != KindVeth:
			p.add(Difference{Link: e.s.name, Kind: WrongType, Want: KindVeth, Got: orNone(e.l.Kind),
				Fix: "delete and create " + describe(a)})
		default:
			got := o.name(e.l.Link)
			if e.l.LinkElsewhere {
				got = "a link in another namespace"
			}
			p.add(Difference{Link: e.s.name, Kind: PeerMissing, Want: e.other.name, Got: orNone(got),
				Fix: "delete and create " + describe(a)})
		}
	}
	for _, e := range ends {
		if e.exists {
			p.deleteStep(e.l, o, owner)
		}
	}
	p.Steps = append(p.Steps, Step{Op: OpCreate, Link: a.name, Arg: b.name, spec: a})
	p.settle(a, ObservedLink{}, o, true)
	p.settle(b, ObservedLink{}, o, true)
}

// deleteStep schedules the deletion of an owned link. Deleting a veth end
// deletes its peer too, so a peer the lab does not own blocks the plan.
func (p *Plan) deleteStep(l ObservedLink, o Observed, owner string) {
	p.Steps = append(p.Steps, Step{Op: OpDelete, Link: l.Name})
	if l.Kind != KindVeth || l.LinkElsewhere {
		return
	}
	if peer, ok := o.Links[o.name(l.Link)]; ok && peer.Alias != owner && !p.has(peer.Name, Foreign) {
		p.add(Difference{Link: peer.Name, Kind: Foreign, Want: "alias " + owner, Got: aliasText(peer.Alias), Blocking: true,
			Fix: fmt.Sprintf("%s is the veth peer of the lab's %s, which must be recreated, and deleting it would delete %s too: delete %s yourself (ip link del %s) if it is stale",
				peer.Name, l.Name, peer.Name, l.Name, l.Name)})
	}
}

// settle adds the differences and steps for a link's MTU, master, state and
// addresses. For a link about to be created, it adds the steps only.
func (p *Plan) settle(s linkSpec, l ObservedLink, o Observed, created bool) {
	// A link is created with its MTU.
	if !created && s.mtu != 0 && l.MTU != s.mtu {
		p.add(Difference{Link: s.name, Kind: WrongMTU, Want: fmt.Sprint(s.mtu), Got: fmt.Sprint(l.MTU),
			Fix: fmt.Sprintf("set MTU %d", s.mtu)})
		p.Steps = append(p.Steps, Step{Op: OpMTU, Link: s.name, Arg: fmt.Sprint(s.mtu)})
	}
	if got := o.name(l.Master); created && s.master != "" || !created && got != s.master {
		if !created {
			fix := "set master " + s.master
			if s.master == "" {
				fix = "release from " + got
			}
			p.add(Difference{Link: s.name, Kind: WrongMaster, Want: s.master, Got: got, Fix: fix})
		}
		p.Steps = append(p.Steps, Step{Op: OpMaster, Link: s.name, Arg: s.master})
	}
	if created || !l.Up {
		if !created {
			p.add(Difference{Link: s.name, Kind: Down, Want: "up", Got: "down", Fix: "set up"})
		}
		p.Steps = append(p.Steps, Step{Op: OpUp, Link: s.name})
	}
	for _, a := range s.addrs {
		if !created && slices.Contains(l.Addresses, a) {
			continue
		}
		if !created {
			p.add(Difference{Link: s.name, Kind: AddressMissing, Want: a.String(), Fix: "add address " + a.String()})
		}
		p.Steps = append(p.Steps, Step{Op: OpAddress, Link: s.name, Arg: a.String(), addr: a})
	}
}

func (p *Plan) add(d Difference) { p.Differences = append(p.Differences, d) }

func (p *Plan) has(link string, kind DiffKind) bool {
	return slices.ContainsFunc(p.Differences, func(d Difference) bool { return d.Link == link && d.Kind == kind })
}

// sameVXLAN compares the wire identity of two vxlan links (VNI, ends, port).
func sameVXLAN(want, got *VXLAN) bool {
	return got != nil && want.ID == got.ID && want.Local == got.Local && want.Remote == got.Remote && want.Port == got.Port
}

func vxlanText(x *VXLAN) string {
	return fmt.Sprintf("vxlan %d %s -> %s:%d", x.ID, x.Local, x.Remote, x.Port)
}

func describe(s linkSpec) string {
	switch s.kind {
	case KindVXLAN:
		return fmt.Sprintf("%s (%s)", s.name, vxlanText(s.vxlan))
	case KindVeth:
		return fmt.Sprintf("veth pair %s <-> %s", s.name, s.peer)
	case KindVLAN:
		return fmt.Sprintf("vlan %s (%s.%d)", s.name, s.parent, s.vlanID)
	}
	return fmt.Sprintf("%s %s", s.kind, s.name)
}

func typeText(s linkSpec) string {
	if s.kind == KindVXLAN {
		return vxlanText(s.vxlan)
	}
	if s.kind == KindVLAN {
		return fmt.Sprintf("vlan %d on %s", s.vlanID, s.parent)
	}
	return s.kind
}

func observedTypeText(l ObservedLink, o Observed) string {
	if l.VXLAN != nil {
		return vxlanText(l.VXLAN)
	}
	if l.Kind == KindVLAN {
		return fmt.Sprintf("vlan %d on %s", l.VLANID, orNone(o.name(l.Link)))
	}
	return orNone(l.Kind)
}

func aliasText(a string) string {
	if a == "" {
		return "no alias"
	}
	return "alias " + a
}

// Summary is a one-line account of a plan for people.
func (p *Plan) Summary() string {
	if len(p.Differences) == 0 {
		return "the network matches the lab's topology"
	}
	kinds := map[DiffKind]int{}
	var order []string
	for _, d := range p.Differences {
		if kinds[d.Kind] == 0 {
			order = append(order, string(d.Kind))
		}
		kinds[d.Kind]++
	}
	parts := make([]string, len(order))
	for i, k := range order {
		parts[i] = fmt.Sprintf("%d %s", kinds[DiffKind(k)], k)
	}
	return fmt.Sprintf("%d difference(s): %s", len(p.Differences), strings.Join(parts, ", "))
}

// PlanAt reads h's namespace and compares it with the topology.
func PlanAt(h *netlink.Handle, t Topology, owner string) (*Plan, error) {
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("invalid topology: %w", err)
	}
	o, err := Observe(h)
	if err != nil {
		return nil, err
	}
	return Diff(t, owner, o), nil
}
