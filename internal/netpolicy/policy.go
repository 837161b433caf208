// Package netpolicy says which addresses vbmcd may connect to on a
// client's behalf: the image servers virtual media and firmware updates
// fetch from (internal/media) and the listeners event subscriptions post
// to (internal/redfish). Both take the Policy that vbmcd builds from its
// --media-deny-private, --media-allow-cidr and --media-deny-cidr flags;
// loopback is the media's with --media-allow-loopback and the events'
// with --events-allow-loopback only (Events). Both check it on the address actually
// dialled (Policy.Control), after name resolution and for every
// connection, so a name that resolves differently the second time (DNS
// rebinding) cannot get past it.
//
// What it does not do: resolve names, make connections, or know which
// client asked.
package netpolicy

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// Policy says which addresses vbmcd may connect to for a client.
//
// Always refused unless listed in Allow: loopback (127.0.0.0/8, ::1; see
// AllowLoopback), link-local (169.254.0.0/16, fe80::/10; the cloud metadata
// address is there), unspecified (0.0.0.0/8, ::), multicast and broadcast.
// Private ranges (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7) are
// allowed unless DenyPrivate: a lab's image server and its Ironic are
// usually on one.
type Policy struct {
	// AllowLoopback allows 127.0.0.0/8 and ::1 (an image server or an
	// event listener on the BMC host itself).
	AllowLoopback bool
	// DenyPrivate refuses the private ranges too.
	DenyPrivate bool
	// Allow lists ranges allowed whatever the rules above say.
	Allow []netip.Prefix
	// Deny lists ranges refused whatever else says (Allow included).
	Deny []netip.Prefix
	// LoopbackFlag, when set, is the flag that allows loopback, which
	// AllowLoopback alone then does (Allow does not): an event listener
	// on the BMC host is asked for by a flag of its own (Events).
	LoopbackFlag string
}

// Events is p for event deliveries: loopback allowed by allowLoopback
// (--events-allow-loopback) alone, whatever p allows for media (issue 46:
// sushy-emulator mode's --media-allow-loopback opened loopback event
// destinations, and an event with a custom header was POSTed to a
// loopback admin URL).
func (p Policy) Events(allowLoopback bool) Policy {
	p.AllowLoopback, p.LoopbackFlag = allowLoopback, "--events-allow-loopback"
	return p
}

// loopbackFlag is the flag a refusal of loopback names.
func (p Policy) loopbackFlag() string {
	if p.LoopbackFlag != "" {
		return p.LoopbackFlag
	}
	return "--media-allow-loopback"
}

var (
	linkLocal4 = netip.MustParsePrefix("169.254.0.0/16")
	thisNet4   = netip.MustParsePrefix("0.0.0.0/8")
	cgnat      = netip.MustParsePrefix("100.64.0.0/10")
	broadcast4 = netip.MustParseAddr("255.255.255.255")
)

// ErrDenied marks a connection refused by the Policy.
var ErrDenied = errors.New("the address is not allowed by the BMC's outbound address policy")

// Allows reports whether vbmcd may connect to a.
func (p Policy) Allows(a netip.Addr) bool {
	return p.Why(a) == ""
}

// Why says why a is refused, naming the rule and the vbmcd flag that
// changes it; "" when a is allowed.
func (p Policy) Why(a netip.Addr) string {
	a = a.Unmap()
	for _, d := range p.Deny {
		if d.Contains(a) {
			return fmt.Sprintf("%s is in %s, refused by --media-deny-cidr", a, d)
		}
	}
	if a.IsLoopback() && p.LoopbackFlag != "" && !p.AllowLoopback {
		return fmt.Sprintf("%s is a loopback address, refused unless %s", a, p.LoopbackFlag)
	}
	for _, al := range p.Allow {
		if al.Contains(a) {
			return ""
		}
	}
	switch {
	case !a.IsValid():
		return "not an IP address"
	case a.IsUnspecified(), thisNet4.Contains(a):
		return fmt.Sprintf("%s is an unspecified address, always refused", a)
	case a == broadcast4, a.IsMulticast(), a.IsInterfaceLocalMulticast():
		return fmt.Sprintf("%s is a multicast or broadcast address, always refused", a)
	case a.IsLinkLocalUnicast(), linkLocal4.Contains(a):
		return fmt.Sprintf("%s is link-local (where cloud metadata services live), refused unless --media-allow-cidr lists it", a)
	case a.IsLoopback():
		if p.AllowLoopback {
			return ""
		}
		return fmt.Sprintf("%s is a loopback address, refused unless %s", a, p.loopbackFlag())
	case a.IsPrivate(), cgnat.Contains(a):
		if p.DenyPrivate {
			return fmt.Sprintf("%s is a private address, refused by --media-deny-private", a)
		}
	}
	return ""
}

// Control is a net.Dialer Control: it runs on the resolved address just
// before the socket connects and refuses it when the policy does.
func (p Policy) Control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w (%s is not an IP address and port)", ErrDenied, address)
	}
	if why := p.Why(ap.Addr()); why != "" {
		return &DeniedError{Addr: ap.Addr(), Why: why, Rule: p.Refusal(ap.Addr())}
	}
	return nil
}

// Dialer is a dialer whose every connection is checked against p.
func (p Policy) Dialer(timeout time.Duration) *net.Dialer {
	return &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second, Control: p.Control}
}

// DeniedError names the refused address and the rule, for the operator's
// log (Why); Rule says the same without the address, for the client. It
// unwraps to ErrDenied.
type DeniedError struct {
	Addr netip.Addr
	Why  string
	Rule string
}

// Refusal says, for a client, which rule refuses a and which vbmcd flag
// would allow it; it does not name the address.
func (p Policy) Refusal(a netip.Addr) string {
	a = a.Unmap()
	for _, d := range p.Deny {
		if d.Contains(a) {
			return "the address is in a range vbmcd refuses (--media-deny-cidr), which no other flag overrides"
		}
	}
	switch {
	case a.IsLoopback() && p.LoopbackFlag != "":
		return "loopback addresses are refused unless vbmcd runs with " + p.LoopbackFlag
	case a.IsLoopback():
		return "loopback addresses are refused unless vbmcd runs with --media-allow-loopback (or --media-allow-cidr naming the range)"
	case a.IsLinkLocalUnicast(), linkLocal4.Contains(a):
		return "link-local addresses (the cloud metadata address among them) are refused unless vbmcd runs with --media-allow-cidr naming the range"
	case a.IsPrivate(), cgnat.Contains(a):
		return "private addresses are refused because vbmcd runs with --media-deny-private; --media-allow-cidr allows a range of them"
	}
	return "unspecified, broadcast and multicast addresses are refused unless vbmcd runs with --media-allow-cidr naming the range"
}

func (e *DeniedError) Error() string { return ErrDenied.Error() + ": " + e.Why }
func (e *DeniedError) Unwrap() error { return ErrDenied }
