package labctl_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/netplumb/netnstest"
)

// TestMultiHostLabVXLAN: a lab spread over two hosts, alpha (the hub) and
// beta, each a network namespace joined to the other by an underlay veth.
// `labctl net repair --host` builds each host's bridges and the VXLAN links
// between them; a namespace on alpha's baremetal bridge then pings one on
// beta's; `net check` is clean on both; a deleted VXLAN link is reported,
// the ping fails, `net repair` recreates it and the ping works again;
// `net down` leaves no link of the lab on either host.
func TestMultiHostLabVXLAN(t *testing.T) {
	nsA, hA := netnstest.New(t)
	nsB, hB := netnstest.New(t)
	netnstest.IP(t, "-n", nsA, "link", "add", "ul0", "type", "veth", "peer", "name", "ul0", "netns", nsB)
	netnstest.IP(t, "-n", nsA, "addr", "add", "10.254.0.1/24", "dev", "ul0")
	netnstest.IP(t, "-n", nsB, "addr", "add", "10.254.0.2/24", "dev", "ul0")
	netnstest.IP(t, "-n", nsA, "link", "set", "ul0", "up")
	netnstest.IP(t, "-n", nsB, "link", "set", "ul0", "up")
	netnstest.Bridge(t, hA, "lvbr0") // the hub's libvirt NAT bridge

	// Each host has its own copy of the lab file (and its own
	// NetworkManager directory), as on separate machines.
	const lab = "name: mhtest\nhosts:\n" +
		"- {name: alpha, libvirtURI: 'qemu:///system', underlay: 10.254.0.1}\n" +
		"- {name: beta, libvirtURI: 'qemu+tcp://10.254.0.2/system', underlay: 10.254.0.2}\n" +
		"network:\n  libvirtBridge: lvbr0\n  provisioningNetwork: Managed"
	cfgA, _ := labFile(t, lab)
	cfgB, _ := labFile(t, lab)
	net := func(sub, host, ns string, extra ...string) (string, error) {
		cfg := map[string]string{"alpha": cfgA, "beta": cfgB}[host]
		return run(t, append([]string{"net", sub, "--host", host, "--netns", ns, "--no-libvirt", "-f", cfg}, extra...)...)
	}
	if _, err := run(t, "net", "check", "--netns", nsA, "--no-libvirt", "-f", cfgA); err == nil || !strings.Contains(err.Error(), "name the one this runs on with --host") {
		t.Errorf("check without --host on a multi-host lab = %v", err)
	}
	for _, h := range []struct{ name, ns string }{{"alpha", nsA}, {"beta", nsB}} {
		if out, err := net("repair", h.name, h.ns); err != nil {
			t.Fatalf("repair --host %s: %v\n%s", h.name, err, out)
		}
		if out, err := net("check", h.name, h.ns); err != nil {
			t.Fatalf("check --host %s after repair: %v\n%s", h.name, err, out)
		}
	}

	// A "machine" on each host's baremetal bridge.
	cA := netnstest.Machine(t, nsA, "baremetal", "nodea", "10.255.0.1/24")
	netnstest.Machine(t, nsB, "baremetal", "nodeb", "10.255.0.2/24")
	pingB := func() error { return netnstest.Ping(t, cA, "10.255.0.2") }
	if err := pingB(); err != nil {
		t.Fatalf("a node on alpha's baremetal does not reach one on beta's: %v", err)
	}

	netnstest.IP(t, "-n", nsA, "link", "del", "vxb-beta")
	out, err := net("check", "alpha", nsA, "-o", "json")
	var rep checkJSON
	if jerr := json.Unmarshal([]byte(out), &rep); err == nil || jerr != nil || len(rep.Differences) != 1 ||
		rep.Differences[0].Object != "vxb-beta" || rep.Differences[0].Kind != "missing" {
		t.Fatalf("check after deleting vxb-beta = %v, %+v:\n%s", err, rep, out)
	}
	if err := pingB(); err == nil {
		t.Fatalf("the ping crossed with the VXLAN link deleted: something else joins the bridges")
	}
	if out, err := net("repair", "alpha", nsA); err != nil || !strings.Contains(out, "✓ create vxb-beta") {
		t.Fatalf("repair of the deleted VXLAN link = %v:\n%s", err, out)
	}
	if err := pingB(); err != nil {
		t.Fatalf("after the repair: %v", err)
	}

	netnstest.IP(t, "-n", nsA, "link", "del", "nodea")
	netnstest.IP(t, "-n", nsB, "link", "del", "nodeb")
	for _, h := range []struct{ name, ns string }{{"alpha", nsA}, {"beta", nsB}} {
		if out, err := net("down", h.name, h.ns); err != nil {
			t.Fatalf("down --host %s: %v\n%s", h.name, err, out)
		}
	}
	for name, h := range map[string]*netlink.Handle{"alpha": hA, "beta": hB} {
		left, err := netplumb.New(h, "mhtest", nil).Owned()
		if err != nil || len(left) > 0 {
			t.Errorf("after down, %s still has the lab's links %v (%v)", name, left, err)
		}
	}
}
