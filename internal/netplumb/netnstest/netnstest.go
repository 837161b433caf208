// Package netnstest makes throwaway network namespaces for integration
// tests. It creates them with `ip netns add`, so no goroutine of the test
// binary ever switches namespace, and deletes them on cleanup.
package netnstest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/testenv"
)

// New creates a namespace named np-<random>, with lo up, and returns its
// name and a netlink handle in it. Both go away when the test ends.
// It needs root (testenv.Root).
func New(t testing.TB) (string, *netlink.Handle) {
	t.Helper()
	testenv.Root(t)
	ip := testenv.Command(t, "ip")
	name := "np-" + Rand(4)
	if out, err := exec.Command(ip, "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(ip, "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	h, err := netplumb.OpenNamespace(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	lo, err := h.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		t.Fatal(err)
	}
	return name, h
}

// Rand returns n random bytes in hex, for unique names.
func Rand(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Bridge adds an up bridge the lab does not own (as libvirt would make
// virbr0) and returns it.
func Bridge(t testing.TB, h *netlink.Handle, name string) netlink.Link {
	t.Helper()
	if err := h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}); err != nil {
		t.Fatalf("add bridge %s: %v", name, err)
	}
	l, err := h.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
	return l
}

// IP runs ip(8) with args and fails the test when it fails.
func IP(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command(testenv.Command(t, "ip"), args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// Machine makes a "machine" on a bridge of the namespace hostNS: a
// namespace of its own whose eth0 has addr (CIDR) and whose other end,
// port, is a port of bridge. It returns the machine's namespace.
func Machine(t testing.TB, hostNS, bridge, port, addr string) string {
	t.Helper()
	ns, _ := New(t)
	IP(t, "-n", hostNS, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
	IP(t, "-n", hostNS, "link", "set", port, "master", bridge, "up")
	IP(t, "-n", ns, "addr", "add", addr, "dev", "eth0")
	IP(t, "-n", ns, "link", "set", "eth0", "up")
	return ns
}

// Ping sends one ping from the namespace ns to addr, waiting 3 s at most.
func Ping(t testing.TB, ns, addr string) error {
	t.Helper()
	out, err := exec.Command(testenv.Command(t, "ip"), "netns", "exec", ns, testenv.Command(t, "ping"), "-c", "1", "-W", "3", addr).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ping %s from %s: %v\n%s", addr, ns, err, out)
	}
	return nil
}
