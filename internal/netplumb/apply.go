package netplumb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// ErrForeign means a link with a lab name is not the lab's. The lab never
// modifies or deletes such a link.
var ErrForeign = errors.New("link not owned by the lab")

// ErrExternalMissing means a link the topology relies on but does not own is
// not there (or is no bridge where a master is wanted).
var ErrExternalMissing = errors.New("link outside the lab is missing")

// BlockedError lists the differences that stop Apply before it changes
// anything. errors.Is matches ErrForeign and ErrExternalMissing.
type BlockedError struct {
	Differences []Difference
}

func (e *BlockedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "nothing changed: %d problem(s) the lab must not repair itself", len(e.Differences))
	for _, d := range e.Differences {
		fmt.Fprintf(&b, "\n  %s\n    fix: %s", d, d.Fix)
	}
	return b.String()
}

// Is reports whether target is the sentinel of one of the differences.
func (e *BlockedError) Is(target error) bool {
	for _, d := range e.Differences {
		if d.Kind == Foreign && target == ErrForeign || d.Kind == ExternalMissing && target == ErrExternalMissing {
			return true
		}
	}
	return false
}

// Plumber plans and applies a topology in the namespace of one netlink
// handle. It does not own the handle.
type Plumber struct {
	h     *netlink.Handle
	owner string
	log   *zap.Logger
}

// New returns a Plumber for the lab named lab (its links carry the alias
// Owner(lab)), working through h.
func New(h *netlink.Handle, lab string, log *zap.Logger) *Plumber {
	if log == nil {
		log = zap.NewNop()
	}
	return &Plumber{h: h, owner: Owner(lab), log: log}
}

// Plan compares the topology with the namespace's links.
func (p *Plumber) Plan(t Topology) (*Plan, error) { return PlanAt(p.h, t, p.owner) }

// Apply plans and applies the plan: see ApplyPlan.
func (p *Plumber) Apply(ctx context.Context, t Topology) (*Plan, error) {
	plan, err := p.Plan(t)
	if err != nil {
		return nil, err
	}
	return plan, p.ApplyPlan(ctx, t, plan)
}

// ApplyPlan performs the plan's steps in order, then plans again and fails
// unless nothing differs. When the plan has blocking differences it returns
// a *BlockedError and changes nothing. Every step is idempotent: "exists" on
// create and "not found" on delete count as success once the link read back
// is what the step wanted.
func (p *Plumber) ApplyPlan(ctx context.Context, t Topology, plan *Plan) error {
	if b := plan.Blocking(); len(b) > 0 {
		return &BlockedError{Differences: b}
	}
	for _, s := range plan.Steps {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := p.step(s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
		p.log.Debug("applied", zap.Stringer("step", s))
	}
	after, err := p.Plan(t)
	if err != nil {
		return fmt.Errorf("read back: %w", err)
	}
	if len(after.Differences) > 0 {
		var ds []string
		for _, d := range after.Differences {
			ds = append(ds, d.String())
		}
		return fmt.Errorf("after repair the network still differs: %s", strings.Join(ds, "; "))
	}
	return nil
}

func (p *Plumber) step(s Step) error {
	switch s.Op {
	case OpDelete:
		return p.deleteOwned(s.Link)
	case OpCreate:
		return p.create(s.spec)
	case OpRuleAdd, OpRuleDel:
		return p.ruleStep(s)
	}
	l, err := p.owned(s.Link)
	if err != nil {
		return err
	}
	switch s.Op {
	case OpMTU:
		mtu, err := strconv.Atoi(s.Arg)
		if err != nil {
			return err
		}
		return p.h.LinkSetMTU(l, mtu)
	case OpMaster:
		if s.Arg == "" {
			return p.h.LinkSetNoMaster(l)
		}
		m, err := p.h.LinkByName(s.Arg)
		if err != nil {
			return fmt.Errorf("master %q: %w", s.Arg, err)
		}
		if m.Type() != KindBridge {
			return fmt.Errorf("master %q is a %s, not a bridge", s.Arg, m.Type())
		}
		return p.h.LinkSetMasterByIndex(l, m.Attrs().Index)
	case OpUp:
		return p.h.LinkSetUp(l)
	case OpAddress:
		err := p.h.AddrAdd(l, &netlink.Addr{IPNet: ipNet(s.addr)})
		if errors.Is(err, unix.EEXIST) {
			return nil
		}
		return err
	}
	return fmt.Errorf("unknown step %q", s.Op)
}

// owned returns the named link, or an error unless it carries the lab's alias.
func (p *Plumber) owned(name string) (netlink.Link, error) {
	l, err := p.h.LinkByName(name)
	if err != nil {
		return nil, err
	}
	if a := l.Attrs().Alias; a != p.owner {
		return nil, fmt.Errorf("%q has %s, not %s: %w", name, aliasText(a), p.owner, ErrForeign)
	}
	return l, nil
}

func (p *Plumber) deleteOwned(name string) error {
	l, err := p.owned(name)
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := p.h.LinkDel(l); err != nil && !isNotFound(err) {
		return fmt.Errorf("delete %q: %w", name, err)
	}
	return nil
}

// create adds the link (a veth with its peer), accepts EEXIST when the link
// there is the lab's and of the right kind, marks it as the lab's and reads
// it back.
func (p *Plumber) create(s linkSpec) error {
	attrs := netlink.LinkAttrs{Name: s.name, MTU: s.mtu}
	var link netlink.Link
	switch s.kind {
	case KindBridge:
		link = &netlink.Bridge{LinkAttrs: attrs}
	case KindVeth:
		link = &netlink.Veth{LinkAttrs: attrs, PeerName: s.peer, PeerMTU: uint32(s.mtu)}
	case KindVLAN:
		parent, err := p.h.LinkByName(s.parent)
		if err != nil {
			return fmt.Errorf("parent %q: %w", s.parent, err)
		}
		attrs.ParentIndex = parent.Attrs().Index
		link = &netlink.Vlan{LinkAttrs: attrs, VlanId: s.vlanID}
	case KindVXLAN:
		x := s.vxlan
		// Point to point: the one remote is the default destination, and
		// MACs are learnt from what arrives, as on a bridge port.
		link = &netlink.Vxlan{LinkAttrs: attrs, VxlanId: x.ID, SrcAddr: x.Local.AsSlice(),
			Group: x.Remote.AsSlice(), Port: x.Port, Learning: true}
	default:
		return fmt.Errorf("cannot create a link of kind %q", s.kind)
	}
	err := p.h.LinkAdd(link)
	switch {
	case errors.Is(err, unix.EEXIST):
		// Someone made it between plan and apply: fine only if it is ours.
		if _, err := p.owned(s.name); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("add %s: %w", describe(s), err)
	default:
		// The kernel takes no alias on creation; mark the new links now.
		// A crash right here leaves an unmarked link that the next run
		// reports as foreign, with the command to delete it.
		names := []string{s.name}
		if s.kind == KindVeth {
			names = append(names, s.peer)
		}
		for _, n := range names {
			l, err := p.h.LinkByName(n)
			if err != nil {
				return fmt.Errorf("read back %q: %w", n, err)
			}
			if err := p.h.LinkSetAlias(l, p.owner); err != nil {
				return fmt.Errorf("mark %q as the lab's: %w", n, err)
			}
		}
	}
	return p.verify(s)
}

// verify reads the link back and checks it is what s wants.
func (p *Plumber) verify(s linkSpec) error {
	l, err := p.owned(s.name)
	if err != nil {
		return fmt.Errorf("read back: %w", err)
	}
	if l.Type() != s.kind {
		return fmt.Errorf("read back %q: it is a %s, not a %s", s.name, l.Type(), s.kind)
	}
	if s.kind == KindVeth {
		peer, err := p.owned(s.peer)
		if err != nil {
			return fmt.Errorf("read back peer: %w", err)
		}
		if l.Attrs().ParentIndex != peer.Attrs().Index {
			return fmt.Errorf("read back %q: its peer is not %q", s.name, s.peer)
		}
	}
	return nil
}

// DownResult says what Down removed and what it left alone.
type DownResult struct {
	Deleted []string `json:"deleted"`
	// Foreign links hold lab names but are not the lab's; Down left them.
	Foreign []string `json:"foreign"`
}

// Down deletes the topology's links that the lab owns, VLANs first, bridges
// last, and nothing else; a missing link is no error. Deleting one end of a
// veth pair deletes the other, and both are reported.
func (p *Plumber) Down(ctx context.Context, t Topology) (*DownResult, error) {
	o, err := Observe(p.h)
	if err != nil {
		return nil, err
	}
	res := &DownResult{Deleted: []string{}, Foreign: []string{}}
	names := t.Names()
	slices.Reverse(names)
	for _, n := range names {
		l, ok := o.Links[n]
		switch {
		case !ok:
			continue
		case l.Alias != p.owner:
			res.Foreign = append(res.Foreign, n)
			continue
		case l.Kind == KindVeth && !l.LinkElsewhere:
			// Deleting a veth end deletes its peer: keep both when the
			// peer is someone else's.
			if peer, ok := o.Links[o.name(l.Link)]; ok && peer.Alias != p.owner {
				res.Foreign = append(res.Foreign, peer.Name)
				continue
			}
		}
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if err := p.deleteOwned(n); err != nil {
			return res, err
		}
		res.Deleted = append(res.Deleted, n)
		p.log.Debug("deleted", zap.String("link", n))
	}
	return res, nil
}

func isNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf) || errors.Is(err, unix.ENODEV)
}

// Owned lists the links of the namespace that carry the lab's alias,
// whatever topology declared them: what `labctl down` removes when the lab
// file that declared them is gone or has changed.
func (p *Plumber) Owned() ([]string, error) {
	o, err := Observe(p.h)
	if err != nil {
		return nil, err
	}
	var out []string
	for name, l := range o.Links {
		if l.Alias == p.owner {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// DownOwned deletes every link that carries the lab's alias: veths and
// VLANs first, bridges last. A veth whose peer is someone else's is kept
// (deleting one end deletes both) and reported as foreign.
func (p *Plumber) DownOwned(ctx context.Context) (*DownResult, error) {
	o, err := Observe(p.h)
	if err != nil {
		return nil, err
	}
	var t Topology
	for name, l := range o.Links {
		if l.Alias != p.owner {
			continue
		}
		switch l.Kind {
		case KindBridge:
			t.Bridges = append(t.Bridges, Bridge{Name: name})
		default:
			// Names() orders VLANs before bridges; a veth listed as a VLAN
			// is only a name to delete here.
			t.VLANs = append(t.VLANs, VLAN{Name: name})
		}
	}
	slices.SortFunc(t.Bridges, func(a, b Bridge) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(t.VLANs, func(a, b VLAN) int { return strings.Compare(a.Name, b.Name) })
	return p.Down(ctx, t)
}
