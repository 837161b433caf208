package listen

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/netaddr"
)

// Pool is --bmc-addresses: the addresses machines' own BMCs take. Items
// are an address (10.0.0.5, fd00::5), a range of one family
// (127.0.0.10-127.0.0.99, fd00::10-fd00::ff) or a machine's pinned address
// (master-0=10.0.0.5, by name or UUID). Pinned machines take their pin;
// the others take the lowest free address of the ranges, in the order
// given, and keep it (it is recorded with the machine, as an IPMI port
// from --ipmi-port-base is).
type Pool struct {
	ranges []netaddr.Range // of one family each
	pins   []pin
}

type pin struct {
	machine string // a name or a UUID, as given
	addr    netip.Addr
}

// maxPoolRange bounds one range, so that a typo (10.0.0.1-10.255.0.1)
// is an error rather than a walk over millions of addresses.
const maxPoolRange = 1 << 16

// ParsePool reads --bmc-addresses; nil when items name no address.
func ParsePool(items []string) (*Pool, error) {
	p := &Pool{}
	seen := map[netip.Addr]string{}
	taken := func(a netip.Addr, item string) error {
		if prev, ok := seen[a]; ok {
			return fmt.Errorf("--bmc-addresses %q: %s is given twice (also in %q); every BMC needs an address of its own", item, a, prev)
		}
		seen[a] = item
		return nil
	}
	for _, raw := range items {
		item := strings.TrimSpace(raw)
		if name, a, ok := strings.Cut(item, "="); ok {
			name = strings.TrimSpace(name)
			addr, err := bmcAddr(item, strings.TrimSpace(a))
			if err != nil {
				return nil, err
			}
			if name == "" {
				return nil, fmt.Errorf("--bmc-addresses %q: want MACHINE=ADDRESS, with a machine's name or UUID before the '='", item)
			}
			for _, q := range p.pins {
				if strings.EqualFold(q.machine, name) {
					return nil, fmt.Errorf("--bmc-addresses %q: machine %s is pinned twice", item, name)
				}
			}
			if err := taken(addr, item); err != nil {
				return nil, err
			}
			p.pins = append(p.pins, pin{machine: name, addr: addr})
			continue
		}
		lo, hi, isRange := strings.Cut(item, "-")
		first, err := bmcAddr(item, strings.TrimSpace(lo))
		if err != nil {
			return nil, err
		}
		last := first
		if isRange {
			if last, err = bmcAddr(item, strings.TrimSpace(hi)); err != nil {
				return nil, err
			}
		}
		switch {
		case first.Is4() != last.Is4():
			return nil, fmt.Errorf("--bmc-addresses %q: a range's two ends must be of one family (IPv4 or IPv6)", item)
		case last.Less(first):
			return nil, fmt.Errorf("--bmc-addresses %q: the range ends before it starts; write the lower address first", item)
		case rangeSize(first, last) > maxPoolRange:
			return nil, fmt.Errorf("--bmc-addresses %q: at most %d addresses in one range", item, maxPoolRange)
		}
		for a := first; ; a = a.Next() {
			if err := taken(a, item); err != nil {
				return nil, err
			}
			if a == last {
				break
			}
		}
		p.ranges = append(p.ranges, netaddr.Range{Start: first, End: last})
	}
	if len(p.ranges)+len(p.pins) == 0 {
		return nil, nil
	}
	return p, nil
}

// bmcAddr parses one address of item: an IPv4 or IPv6 address (brackets
// allowed), not a wildcard, multicast or zoned one.
func bmcAddr(item, s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	switch {
	case err != nil:
		return a, fmt.Errorf("--bmc-addresses %q: %q is not an IP address; want ADDRESS, FIRST-LAST or MACHINE=ADDRESS", item, s)
	case a.IsUnspecified() || a.IsMulticast():
		return a, fmt.Errorf("--bmc-addresses %q: %s cannot be one BMC's address; give unicast addresses", item, a)
	case a.Zone() != "":
		return a, fmt.Errorf("--bmc-addresses %q: %s has a zone; give global or unique local IPv6 addresses", item, a)
	}
	return a.Unmap(), nil
}

// rangeSize counts the addresses from first to last, stopping past the bound.
func rangeSize(first, last netip.Addr) int {
	n := 0
	for a := first; n <= maxPoolRange; a = a.Next() {
		n++
		if a == last {
			break
		}
	}
	return n
}

// size is how many addresses the pool holds.
func (p *Pool) size() int {
	n := len(p.pins)
	for _, r := range p.ranges {
		n += rangeSize(r.Start, r.End)
	}
	return n
}

// pinFor returns the pin naming m, by name or UUID.
func (p *Pool) pinFor(m *machine.Machine) (netip.Addr, bool) {
	for _, q := range p.pins {
		if strings.EqualFold(q.machine, m.ID) || q.machine == m.Name {
			return q.addr, true
		}
	}
	return netip.Addr{}, false
}

// assign decides every machine's BMC address: its pin, else the address
// recorded with it when that is still in a range and no other machine's,
// else the lowest free address of the ranges. Machines are taken in ms's
// (stable) order; a machine left without one when the ranges are used up
// is in short.
func (p *Pool) assign(ms []*machine.Machine) (want map[string]netip.Addr, short []*machine.Machine) {
	want = make(map[string]netip.Addr, len(ms))
	used := make(map[netip.Addr]bool, len(ms)+len(p.pins))
	for _, q := range p.pins {
		used[q.addr] = true
	}
	var rest []*machine.Machine
	for _, m := range ms {
		if a, ok := p.pinFor(m); ok {
			want[m.ID] = a
		} else {
			rest = append(rest, m)
		}
	}
	var fresh []*machine.Machine
	for _, m := range rest {
		a, err := netip.ParseAddr(m.Settings.BMCAddress)
		if err == nil && !used[a] && p.InRange(a) {
			want[m.ID], used[a] = a, true
			continue
		}
		fresh = append(fresh, m)
	}
	ri, next := 0, netip.Addr{}
	if len(p.ranges) > 0 {
		next = p.ranges[0].Start
	}
	for _, m := range fresh {
		for ri < len(p.ranges) && used[next] {
			if next == p.ranges[ri].End {
				if ri++; ri < len(p.ranges) {
					next = p.ranges[ri].Start
				}
				continue
			}
			next = next.Next()
		}
		if ri == len(p.ranges) {
			short = append(short, m)
			continue
		}
		want[m.ID], used[next] = next, true
	}
	return want, short
}

// Addrs are the addresses that bound the pool: each range's first and
// last, then each pin's.
func (p *Pool) Addrs() []netip.Addr {
	var out []netip.Addr
	for _, r := range p.ranges {
		out = append(out, r.Start, r.End)
	}
	for _, q := range p.pins {
		out = append(out, q.addr)
	}
	return out
}

// Pinned reports whether a is some machine's pinned address.
func (p *Pool) Pinned(a netip.Addr) bool {
	for _, q := range p.pins {
		if q.addr == a {
			return true
		}
	}
	return false
}

// InRange reports whether a is an address of the pool's ranges.
func (p *Pool) InRange(a netip.Addr) bool {
	for _, r := range p.ranges {
		if r.Contains(a) {
			return true
		}
	}
	return false
}

// unmatchedPins returns the pins that name none of ms.
func (p *Pool) unmatchedPins(ms []*machine.Machine) []string {
	var out []string
	for _, q := range p.pins {
		found := false
		for _, m := range ms {
			if strings.EqualFold(q.machine, m.ID) || q.machine == m.Name {
				found = true
				break
			}
		}
		if !found {
			out = append(out, q.machine)
		}
	}
	return out
}
