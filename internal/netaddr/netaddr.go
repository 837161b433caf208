// Package netaddr holds the one shape of a lab's addressing that every
// layer shares: an address family of the machine network (Family) and an
// inclusive range of addresses (Range). The plan resolves them from the lab
// file; install-config (internal/ipi), agent-config (internal/agent), the
// hybrid nodes (internal/upi) and the lab's libvirt network
// (internal/labvirt, whose shared networks' metadata writes a Range as
// "start-end") take them as they are, so a second family is one more
// value, not one more type per layer; vbmcd's --bmc-addresses ranges are
// Ranges too.
//
// What it does not do: decide addresses (internal/plan) or check them
// against anyone's rules (internal/labconfig, internal/ipi).
package netaddr

import (
	"encoding/xml"
	"net/netip"
	"strings"
)

// Family is one address family of the lab's machine network: the subnet,
// the lab host's address on it (the NAT network's gateway), the range the
// nodes' addresses come from, and the cluster's VIPs (invalid: none). A
// lab has one family (IPv4 or IPv6) or two (dual stack: IPv4 first, as the
// installer orders them).
type Family struct {
	MachineNetwork netip.Prefix `json:"machineNetwork"`
	HostAddress    netip.Addr   `json:"hostAddress"`
	DHCPRange      Range        `json:"dhcpRange"`
	APIVIP         netip.Addr   `json:"apiVIP"`
	IngressVIP     netip.Addr   `json:"ingressVIP"`
}

// IsZero reports whether f is no family at all (a single-stack lab's
// second).
func (f Family) IsZero() bool { return f == Family{} }

// Range is an inclusive range of addresses (a DHCP range, a lab's block
// on a shared network).
type Range struct {
	Start netip.Addr `json:"start"`
	End   netip.Addr `json:"end"`
}

// Contains reports whether a is in the range; the zero range holds nothing.
func (r Range) Contains(a netip.Addr) bool {
	return r.Start.IsValid() && a.Compare(r.Start) >= 0 && a.Compare(r.End) <= 0
}

// Overlaps reports whether the two ranges share an address.
func (r Range) Overlaps(o Range) bool {
	return r.Start.IsValid() && o.Start.IsValid() && !(r.End.Less(o.Start) || o.End.Less(r.Start))
}

func (r Range) String() string { return r.Start.String() + "-" + r.End.String() }

// ParseRange reads "start-end"; ok is false for anything else.
func ParseRange(s string) (r Range, ok bool) {
	a, b, found := strings.Cut(s, "-")
	x, err1 := netip.ParseAddr(a)
	y, err2 := netip.ParseAddr(b)
	if !found || err1 != nil || err2 != nil {
		return Range{}, false
	}
	return Range{Start: x, End: y}, true
}

// MarshalXMLAttr writes r as "start-end" (a lab's block in a shared
// network's metadata); the zero range writes no attribute.
func (r Range) MarshalXMLAttr(name xml.Name) (xml.Attr, error) {
	if !r.Start.IsValid() {
		return xml.Attr{}, nil
	}
	return xml.Attr{Name: name, Value: r.String()}, nil
}

// UnmarshalXMLAttr reads "start-end"; anything else is the zero range
// (it holds no address), not an error: one lab's bad entry must not hide
// the others'.
func (r *Range) UnmarshalXMLAttr(a xml.Attr) error {
	*r, _ = ParseRange(a.Value)
	return nil
}
