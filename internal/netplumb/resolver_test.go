package netplumb

import (
	"net/netip"
	"testing"
)

// TestResolverDropInContent pins both drop-ins. The resolved one is not
// run here (this machine has no systemd): its keys are resolved.conf(5)'s
// [Resolve] DNS= and Domains= with a routing-only ~domain.
func TestResolverDropInContent(t *testing.T) {
	head := "# bmlab lab l: the names of cluster c.lab.test for this host. labctl writes this\n" +
		"# file (`labctl up`, `labctl net repair`) and removes it (`labctl down`).\n"
	for _, tc := range []struct {
		d    ResolverDropIn
		want string
	}{
		{ResolverDropIn{Kind: ResolverDnsmasq, Lab: "l", Domain: "c.lab.test", DNS: netip.MustParseAddr("10.1.2.1")},
			head + "server=/c.lab.test/10.1.2.1\n"},
		{ResolverDropIn{Kind: ResolverDnsmasq, Lab: "l", Domain: "c.lab.test", DNS: netip.MustParseAddr("10.1.2.1"), Apps: netip.MustParseAddr("10.1.2.6")},
			head + "server=/c.lab.test/10.1.2.1\naddress=/apps.c.lab.test/10.1.2.6\n"},
		{ResolverDropIn{Kind: ResolverResolved, Lab: "l", Domain: "c.lab.test", DNS: netip.MustParseAddr("10.1.2.1")},
			head + "[Resolve]\nDNS=10.1.2.1\nDomains=~c.lab.test\n"},
	} {
		if got := string(tc.d.Content()); got != tc.want {
			t.Errorf("%s drop-in:\n%s\nwant:\n%s", tc.d.Kind, got, tc.want)
		}
	}
	if got := ResolverDropInPath("/etc/systemd/resolved.conf.d", "l"); got != "/etc/systemd/resolved.conf.d/bmlab-l.conf" {
		t.Errorf("path %s", got)
	}
}
