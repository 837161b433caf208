package media

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"
)

// Policy says which addresses images may be fetched from. It is checked on
// the address actually dialled (after name resolution, for every redirect
// hop), so a name that resolves differently the second time (DNS
// rebinding) cannot get past it.
//
// Always refused unless listed in Allow: loopback (127.0.0.0/8, ::1; see
// AllowLoopback), link-local (169.254.0.0/16, fe80::/10; the cloud metadata
// address is there), unspecified (0.0.0.0/8, ::), multicast and broadcast.
// Private ranges (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7) are
// allowed unless DenyPrivate: a lab's image server is usually on one.
type Policy struct {
	// AllowLoopback allows 127.0.0.0/8 and ::1 (an image server on the BMC
	// host itself).
	AllowLoopback bool
	// DenyPrivate refuses the private ranges too.
	DenyPrivate bool
	// Allow lists ranges allowed whatever the rules above say.
	Allow []netip.Prefix
	// Deny lists ranges refused whatever else says (Allow included).
	Deny []netip.Prefix
}

var (
	linkLocal4 = netip.MustParsePrefix("169.254.0.0/16")
	thisNet4   = netip.MustParsePrefix("0.0.0.0/8")
	cgnat      = netip.MustParsePrefix("100.64.0.0/10")
	broadcast4 = netip.MustParseAddr("255.255.255.255")
)

// ErrDenied marks a fetch refused by the Policy.
var ErrDenied = errors.New("the image server's address is not allowed by the BMC's media policy")

// Allows reports whether images may be fetched from a.
func (p Policy) Allows(a netip.Addr) bool {
	a = a.Unmap()
	for _, d := range p.Deny {
		if d.Contains(a) {
			return false
		}
	}
	for _, al := range p.Allow {
		if al.Contains(a) {
			return true
		}
	}
	switch {
	case !a.IsValid(), a.IsUnspecified(), thisNet4.Contains(a), a == broadcast4,
		a.IsMulticast(), a.IsLinkLocalUnicast(), linkLocal4.Contains(a), a.IsInterfaceLocalMulticast():
		return false
	case a.IsLoopback():
		return p.AllowLoopback
	case a.IsPrivate(), cgnat.Contains(a):
		return !p.DenyPrivate
	}
	return true
}

// control is a net.Dialer Control: it runs on the resolved address just
// before the socket connects.
func (p Policy) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w (%s is not an IP address and port)", ErrDenied, address)
	}
	if !p.Allows(ap.Addr()) {
		return &deniedError{addr: ap.Addr(), why: p.refusal(ap.Addr())}
	}
	return nil
}

// refusal says, for the client, which rule refuses a and which vbmcd flag
// would allow it; it does not name the address.
func (p Policy) refusal(a netip.Addr) string {
	a = a.Unmap()
	for _, d := range p.Deny {
		if d.Contains(a) {
			return "the address is in a range vbmcd refuses (--media-deny-cidr), which no other flag overrides"
		}
	}
	switch {
	case a.IsLoopback():
		return "loopback addresses are refused unless vbmcd runs with --media-allow-loopback (or --media-allow-cidr naming the range)"
	case a.IsLinkLocalUnicast(), linkLocal4.Contains(a):
		return "link-local addresses (the cloud metadata address among them) are refused unless vbmcd runs with --media-allow-cidr naming the range"
	case a.IsPrivate(), cgnat.Contains(a):
		return "private addresses are refused because vbmcd runs with --media-deny-private; --media-allow-cidr allows a range of them"
	}
	return "unspecified, broadcast and multicast addresses are refused unless vbmcd runs with --media-allow-cidr naming the range"
}

// deniedError names the refused address for the operator's log; clients
// are told only ErrDenied and why (Refusal).
type deniedError struct {
	addr netip.Addr
	why  string
}

func (e *deniedError) Error() string {
	return ErrDenied.Error() + ": " + e.addr.String() + ": " + e.why
}
func (e *deniedError) Unwrap() error { return ErrDenied }

// refusedError is what a client is told of a refused address: the rule and
// the flag that would allow it, not the address.
type refusedError struct{ why string }

func (e *refusedError) Error() string {
	if e.why == "" {
		return ErrDenied.Error()
	}
	return ErrDenied.Error() + ": " + e.why
}
func (e *refusedError) Unwrap() error { return ErrDenied }

// refusal is the client's error for a fetch the policy refused.
func refusal(err error) error {
	var de *deniedError
	if errors.As(err, &de) {
		return &refusedError{why: de.why}
	}
	return &refusedError{}
}
