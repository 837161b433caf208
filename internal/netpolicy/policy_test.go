package netpolicy

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestPolicyDefaults(t *testing.T) {
	var p Policy
	for addr, want := range map[string]bool{
		"127.0.0.1": false, "::1": false, "169.254.169.254": false, "fe80::1": false,
		"0.0.0.0": false, "::": false, "224.0.0.1": false, "ff02::1": false, "255.255.255.255": false,
		"::ffff:127.0.0.1": false, "::ffff:169.254.169.254": false,
		"10.1.2.3": true, "192.168.122.1": true, "172.16.0.1": true, "fd00::1": true, "203.0.113.7": true,
	} {
		if got := p.Allows(netip.MustParseAddr(addr)); got != want {
			t.Errorf("default policy, %s: allowed %v, want %v", addr, got, want)
		}
	}
	p = Policy{AllowLoopback: true, DenyPrivate: true, Allow: []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16")}, Deny: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}}
	for addr, want := range map[string]bool{"127.0.0.1": true, "127.0.0.2": false, "10.1.2.3": false, "10.9.1.1": true, "192.168.1.1": false} {
		if got := p.Allows(netip.MustParseAddr(addr)); got != want {
			t.Errorf("%+v, %s: allowed %v, want %v", p, addr, got, want)
		}
	}
}

// Why names the rule and the flag that changes it.
func TestPolicyWhy(t *testing.T) {
	p := Policy{DenyPrivate: true, Deny: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}}
	for addr, want := range map[string]string{
		"127.0.0.1":       "--media-allow-loopback",
		"0.0.0.0":         "unspecified",
		"169.254.169.254": "link-local",
		"10.0.0.1":        "--media-deny-private",
		"203.0.113.9":     "--media-deny-cidr",
		"198.51.100.1":    "",
	} {
		got := p.Why(netip.MustParseAddr(addr))
		if want == "" && got != "" || !strings.Contains(got, want) {
			t.Errorf("Why(%s) = %q, want it to name %q", addr, got, want)
		}
	}
}

// The dialer refuses at connect time, after resolution: "localhost" is
// refused as 127.0.0.1 is.
func TestDialerChecksResolvedAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	for _, host := range []string{"127.0.0.1", "localhost"} {
		_, err := Policy{}.Dialer(time.Second).Dial("tcp", net.JoinHostPort(host, port))
		var de *DeniedError
		if !errors.Is(err, ErrDenied) || !errors.As(err, &de) || !de.Addr.IsLoopback() {
			t.Errorf("dial %s under the default policy: %v, want a DeniedError for a loopback address", host, err)
		}
	}
	c, err := Policy{AllowLoopback: true}.Dialer(time.Second).Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial with AllowLoopback: %v", err)
	}
	c.Close()
}
