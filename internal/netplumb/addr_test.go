package netplumb_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/netplumb/netnstest"
)

// TestWaitAddress: an IPv6 address on a bridge without a port up stays
// tentative and WaitAddress says so (no carrier) when its time is up; once
// a veth gives the bridge a carrier, duplicate address detection runs and
// WaitAddress returns. A missing address is said to be missing.
func TestWaitAddress(t *testing.T) {
	_, h := netnstest.New(t)
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "wabr"}}
	if err := h.LinkAdd(br); err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetUp(br); err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParseAddr("fd00:5::1")
	a, _ := netlink.ParseAddr("fd00:5::1/64")
	if err := h.AddrAdd(br, a); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	err := netplumb.WaitAddress(ctx, h, "wabr", addr, 500*time.Millisecond)
	if !errors.Is(err, netplumb.ErrAddressNotReady) || !strings.Contains(err.Error(), "no carrier") {
		t.Fatalf("bridge without a port: %v, want tentative with no carrier", err)
	}
	if err := netplumb.WaitAddress(ctx, h, "wabr", netip.MustParseAddr("fd00:5::2"), 200*time.Millisecond); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("another address: %v, want missing", err)
	}
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "wav0", MasterIndex: br.Attrs().Index}, PeerName: "wav1"}
	if err := h.LinkAdd(veth); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"wav0", "wav1"} {
		l, err := h.LinkByName(name)
		if err == nil {
			err = h.LinkSetUp(l)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	if err := netplumb.WaitAddress(ctx, h, "wabr", addr, 30*time.Second); err != nil {
		t.Fatalf("bridge with a port up: %v", err)
	}
	t.Logf("usable %s after the port came up", time.Since(start).Round(10*time.Millisecond))
}
