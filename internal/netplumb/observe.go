package netplumb

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// ObservedLink is what the kernel says about one link.
type ObservedLink struct {
	Index  int    `json:"index"`
	Name   string `json:"name"`
	Kind   string `json:"kind"` // IFLA_INFO_KIND; "" for a plain device
	Alias  string `json:"alias,omitempty"`
	MTU    int    `json:"mtu"`
	Up     bool   `json:"up"` // administratively up (IFF_UP)
	Master int    `json:"master,omitempty"`
	// Link is IFLA_LINK: a veth's peer, a VLAN's parent.
	Link int `json:"link,omitempty"`
	// LinkElsewhere is set when Link lives in another namespace
	// (IFLA_LINK_NETNSID), such as a veth whose peer was moved away.
	LinkElsewhere bool           `json:"linkElsewhere,omitempty"`
	VLANID        int            `json:"vlanID,omitempty"`
	Addresses     []netip.Prefix `json:"addresses,omitempty"`
	// VXLAN is the VNI, addresses and port of a vxlan link.
	VXLAN *VXLAN `json:"vxlan,omitempty"`
}

// Observed is a snapshot of a namespace's links.
type Observed struct {
	Links map[string]ObservedLink `json:"links"`
	// Rules are the rules that carry the lab's mark (ObserveRules).
	Rules   []Rule `json:"rules,omitempty"`
	byIndex map[int]string
}

// NewObserved indexes links; it is how tests build an observed state by hand.
func NewObserved(links ...ObservedLink) Observed {
	o := Observed{Links: map[string]ObservedLink{}, byIndex: map[int]string{}}
	for _, l := range links {
		o.Links[l.Name] = l
		o.byIndex[l.Index] = l.Name
	}
	return o
}

// name returns the name of the link with index i in this namespace, or "".
func (o Observed) name(i int) string { return o.byIndex[i] }

// Observe reads every link and address of h's namespace: one link dump and
// one address dump, whatever the number of links.
func Observe(h *netlink.Handle) (Observed, error) {
	links, err := retryDump(h.LinkList)
	if err != nil {
		return Observed{}, fmt.Errorf("list links: %w", err)
	}
	addrs, err := retryDump(func() ([]netlink.Addr, error) { return h.AddrList(nil, netlink.FAMILY_ALL) })
	if err != nil {
		return Observed{}, fmt.Errorf("list addresses: %w", err)
	}
	byIndex := map[int][]netip.Prefix{}
	for _, a := range addrs {
		if p, ok := prefixOf(a.IPNet); ok {
			byIndex[a.LinkIndex] = append(byIndex[a.LinkIndex], p)
		}
	}
	obs := make([]ObservedLink, 0, len(links))
	for _, l := range links {
		la := l.Attrs()
		ol := ObservedLink{
			Index:         la.Index,
			Name:          la.Name,
			Kind:          l.Type(),
			Alias:         la.Alias,
			MTU:           la.MTU,
			Up:            la.Flags&net.FlagUp != 0,
			Master:        la.MasterIndex,
			Link:          la.ParentIndex,
			LinkElsewhere: la.NetNsID >= 0,
			Addresses:     byIndex[la.Index],
		}
		if ol.Kind == "device" {
			ol.Kind = ""
		}
		if v, ok := l.(*netlink.Vlan); ok {
			ol.VLANID = v.VlanId
		}
		if v, ok := l.(*netlink.Vxlan); ok {
			x := &VXLAN{Name: la.Name, ID: v.VxlanId, Port: v.Port}
			x.Local, _ = netip.AddrFromSlice(v.SrcAddr)
			x.Remote, _ = netip.AddrFromSlice(v.Group)
			x.Local, x.Remote = x.Local.Unmap(), x.Remote.Unmap()
			ol.VXLAN = x
		}
		sort.Slice(ol.Addresses, func(i, j int) bool { return ol.Addresses[i].String() < ol.Addresses[j].String() })
		obs = append(obs, ol)
	}
	o := NewObserved(obs...)
	if o.Rules, err = ObserveRules(h); err != nil {
		return Observed{}, err
	}
	return o, nil
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	ip, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(ip.Unmap(), ones), true
}

// retryDump runs a netlink dump again when the kernel says the table changed
// while it was being read.
func retryDump[T any](dump func() (T, error)) (T, error) {
	var (
		v   T
		err error
	)
	for range 5 {
		v, err = dump()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return v, err
		}
	}
	return v, err
}

// OpenNamespace returns a netlink handle on the named network namespace (as
// in /run/netns, `ip netns add`), or on the caller's namespace when name is
// "". The namespace is entered only by netlink.NewHandleAt's own
// thread-locked helper; the caller's goroutine never switches. Close the
// handle when done.
func OpenNamespace(name string) (*netlink.Handle, error) {
	if name == "" {
		h, err := netlink.NewHandle()
		if err != nil {
			return nil, fmt.Errorf("open netlink: %w", err)
		}
		return h, nil
	}
	ns, err := netns.GetFromName(name)
	if err != nil {
		return nil, fmt.Errorf("network namespace %q: %w (list them with `ip netns list`)", name, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, fmt.Errorf("open netlink in namespace %q: %w", name, err)
	}
	return h, nil
}

func ipNet(p netip.Prefix) *net.IPNet {
	bits := 32
	if p.Addr().Is6() {
		bits = 128
	}
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), bits)}
}
