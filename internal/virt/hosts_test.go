package virt_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virt"
	"github.com/bmlab/bmlab/internal/virttest"
)

// TestMultiHostUUIDClash: two libvirt hosts, one Hosts backend. Each host's
// own VM is listed with its host's name; a UUID defined on both hosts is
// served by neither (left out of List, ErrConflict on reads and
// operations), and a VM powered on through Hosts runs on its own host.
func TestMultiHostUUIDClash(t *testing.T) {
	ua := virttest.NewUnderlay(t, "alpha", 0)
	ub := virttest.NewUnderlay(t, "beta", 1)
	la := virttest.NewAt(t, ua.URI, "mhc-")
	lb := virttest.NewAt(t, ub.URI, "mhc-")
	a := la.NewVM(t, "a", virttest.VMOptions{})
	b := lb.NewVM(t, "b", virttest.VMOptions{})
	const dup = "6d0f6a8e-2b1c-4c3d-9e8f-0a1b2c3d4e5f"
	la.NewVM(t, "dup-on-alpha", virttest.VMOptions{UUID: dup})
	lb.NewVM(t, "dup-on-beta", virttest.VMOptions{UUID: dup})

	hosts, err := virt.NewHosts([]virt.Host{
		{Name: ua.Name, URI: ua.URI, Domains: []string{"mhc-*"}},
		{Name: ub.Name, URI: ub.URI, Domains: []string{"mhc-*"}},
	}, virt.Config{Keepalive: time.Second}, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := hosts.Connect(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, m := range hosts.List() {
		got[m.ID] = m.Host
	}
	if got[a.ID] != "alpha" || got[b.ID] != "beta" || len(got) != 2 {
		t.Errorf("List: %v, want only %s on alpha and %s on beta", got, a.ID, b.ID)
	}
	if _, err := hosts.Get(dup); !errors.Is(err, machine.ErrConflict) {
		t.Errorf("Get of a UUID on both hosts: %v, want ErrConflict", err)
	}
	if err := hosts.Start(ctx, dup); !errors.Is(err, machine.ErrConflict) {
		t.Errorf("Start of a UUID on both hosts: %v, want ErrConflict", err)
	}
	if _, err := hosts.Get("6d0f6a8e-0000-4c3d-9e8f-0a1b2c3d4e5f"); !errors.Is(err, machine.ErrNotFound) {
		t.Errorf("Get of an unknown UUID: %v, want ErrNotFound", err)
	}
	if err := hosts.Start(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if st := lb.DomainState(t, b.Name); st != 1 { // VIR_DOMAIN_RUNNING
		t.Errorf("beta's libvirt says %s is in state %d after Start through Hosts, want running", b.Name, st)
	}
	if st := la.DomainState(t, a.Name); st == 1 {
		t.Errorf("alpha's %s runs, but only beta's VM was started", a.Name)
	}
}
