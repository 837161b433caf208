package netplumb

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ErrAddressNotReady says an address is on its link but cannot be used
// yet: an IPv6 address is tentative until duplicate address detection has
// run, which needs the link to have a carrier (a bridge needs a port up).
// Nothing binds a tentative address (EADDRNOTAVAIL).
var ErrAddressNotReady = errors.New("address not ready")

// WaitAddress returns once addr is on link and usable (for IPv6: neither
// tentative nor failed duplicate address detection), or fails after
// timeout saying what it saw.
func WaitAddress(ctx context.Context, h *netlink.Handle, link string, addr netip.Addr, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		state, err := addressState(h, link, addr)
		if err != nil {
			return err
		}
		if state == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s on %s is %s after %s: %w", addr, link, state, timeout, ErrAddressNotReady)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// addressState is "" for a usable address, else what is wrong with it.
func addressState(h *netlink.Handle, link string, addr netip.Addr) (string, error) {
	l, err := h.LinkByName(link)
	if err != nil {
		return "", fmt.Errorf("link %s: %w", link, err)
	}
	family := netlink.FAMILY_V4
	if addr.Is6() {
		family = netlink.FAMILY_V6
	}
	addrs, err := retryDump(func() ([]netlink.Addr, error) { return h.AddrList(l, family) })
	if err != nil {
		return "", fmt.Errorf("addresses of %s: %w", link, err)
	}
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok || ip.Unmap() != addr {
			continue
		}
		switch {
		case a.Flags&unix.IFA_F_DADFAILED != 0:
			return "a duplicate (duplicate address detection failed)", nil
		case a.Flags&unix.IFA_F_TENTATIVE != 0:
			if l.Attrs().OperState != netlink.OperUp {
				return "tentative (the link has no carrier: none of its ports is up)", nil
			}
			return "tentative (duplicate address detection is running)", nil
		}
		return "", nil
	}
	return "missing", nil
}
