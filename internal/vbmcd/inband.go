package vbmcd

import (
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/ipmi"
	"github.com/bmlab/bmlab/internal/qemuaccess"
)

// inbandOptions are the IPMI Manager's options for the in-band face and
// the LAN configuration both faces report: the machines' personality,
// the host networks their BMC addresses are on, and, with the libvirt
// backend, qemu's user as the owner of the in-band sockets (0600), so that
// qemu and root alone can connect.
func inbandOptions(cfg Config, hn *hostNet, log *zap.Logger) []ipmi.Option {
	opts := []ipmi.Option{
		ipmi.WithPersonality(cfg.Personality),
		ipmi.WithHostNet(hn.lookup),
		ipmi.WithInband(cfg.IPMIInband),
	}
	if cfg.Backend == "libvirt" && cfg.IPMIInband {
		u, err := qemuaccess.Lookup("")
		if err != nil {
			log.Warn("the user qemu runs as is unknown: the in-band IPMI sockets stay root's, and a qemu that does not run as root cannot connect", zap.Error(err))
		} else {
			opts = append(opts, ipmi.WithInbandOwner(int(u.UID)))
		}
	}
	return opts
}

// hostNet answers, from the host's interfaces and routes (in vbmcd's
// network namespace), the prefix of the network an address is on and the
// default gateway through that network's link, for a while.
type hostNet struct {
	keep time.Duration

	mu   sync.Mutex
	seen map[netip.Addr]hostNetAnswer
}

type hostNetAnswer struct {
	bits int
	gw   netip.Addr
	at   time.Time
}

func newHostNet(keep time.Duration) *hostNet {
	return &hostNet{keep: keep, seen: map[netip.Addr]hostNetAnswer{}}
}

// lookup implements machine.HostNet.
func (h *hostNet) lookup(a netip.Addr) (int, netip.Addr) {
	now := time.Now()
	h.mu.Lock()
	if ans, ok := h.seen[a]; ok && now.Sub(ans.at) < h.keep {
		h.mu.Unlock()
		return ans.bits, ans.gw
	}
	h.mu.Unlock()
	bits, gw := readHostNet(a)
	h.mu.Lock()
	if len(h.seen) > 4096 {
		clear(h.seen)
	}
	h.seen[a] = hostNetAnswer{bits: bits, gw: gw, at: now}
	h.mu.Unlock()
	return bits, gw
}

// readHostNet finds the host address whose network holds a, the most
// specific one, and the default route through its link.
func readHostNet(a netip.Addr) (int, netip.Addr) {
	family := netlink.FAMILY_V4
	if a.Is6() {
		family = netlink.FAMILY_V6
	}
	addrs, err := netlink.AddrList(nil, family)
	if err != nil {
		return 0, netip.Addr{}
	}
	bits, link := -1, 0
	for _, ad := range addrs {
		if ad.IPNet == nil {
			continue
		}
		p, ok := prefixOf(ad.IPNet)
		if ok && p.Contains(a) && p.Bits() > bits {
			bits, link = p.Bits(), ad.LinkIndex
		}
	}
	if bits < 0 {
		return 0, netip.Addr{}
	}
	routes, err := netlink.RouteListFiltered(family, &netlink.Route{LinkIndex: link}, netlink.RT_FILTER_OIF)
	if err != nil {
		return bits, netip.Addr{}
	}
	for _, r := range routes {
		if r.Gw == nil || (r.Dst != nil && !isDefault(r.Dst)) {
			continue
		}
		if gw, ok := netip.AddrFromSlice(r.Gw); ok {
			return bits, gw.Unmap()
		}
	}
	return bits, netip.Addr{}
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	ip, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(ip.Unmap(), ones), true
}

func isDefault(n *net.IPNet) bool {
	ones, _ := n.Mask.Size()
	return ones == 0
}
