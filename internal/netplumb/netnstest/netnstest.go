// Package netnstest makes throwaway network namespaces for integration
// tests. It creates them with `ip netns add`, so no goroutine of the test
// binary ever switches namespace, and deletes them on cleanup.
package netnstest

import (
	"crypto/rand"
	"encoding/hex"
	"os/exec"
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
