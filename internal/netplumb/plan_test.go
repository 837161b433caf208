package netplumb

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const testOwner = "bmlab:test"

func seed() Topology {
	return Topology{
		Bridges: []Bridge{{Name: "baremetal", MTU: 1500}},
		Veths:   []Veth{{Name: "veth0", Master: "baremetal", Peer: "veth1", PeerMaster: "virbr0", MTU: 1500}},
	}
}

// healthy is what the kernel shows once the seed topology is applied.
func healthy() map[string]ObservedLink {
	return map[string]ObservedLink{
		"lo":        {Index: 1, Name: "lo", MTU: 65536, Up: true},
		"virbr0":    {Index: 2, Name: "virbr0", Kind: KindBridge, MTU: 1500, Up: true},
		"baremetal": {Index: 3, Name: "baremetal", Kind: KindBridge, Alias: testOwner, MTU: 1500, Up: true},
		"veth0":     {Index: 4, Name: "veth0", Kind: KindVeth, Alias: testOwner, MTU: 1500, Up: true, Master: 3, Link: 5},
		"veth1":     {Index: 5, Name: "veth1", Kind: KindVeth, Alias: testOwner, MTU: 1500, Up: true, Master: 2, Link: 4},
	}
}

func observed(links map[string]ObservedLink) Observed {
	var ls []ObservedLink
	for _, l := range links {
		ls = append(ls, l)
	}
	return NewObserved(ls...)
}

func TestDiff(t *testing.T) {
	withAddr := seed()
	withAddr.Bridges[0].Addresses = []netip.Prefix{netip.MustParsePrefix("10.77.0.1/24")}
	withVLAN := seed()
	withVLAN.VLANs = []VLAN{{Name: "bm.10", Parent: "baremetal", ID: 10}}

	tests := []struct {
		name  string
		top   Topology
		edit  func(map[string]ObservedLink)
		diffs []string
		steps []string
	}{{
		name: "healthy",
		top:  seed(),
		edit: func(map[string]ObservedLink) {},
	}, {
		name: "nothing there",
		top:  seed(),
		edit: func(m map[string]ObservedLink) { delete(m, "baremetal"); delete(m, "veth0"); delete(m, "veth1") },
		diffs: []string{"baremetal: missing (want bridge, got none)", "veth0: missing (want veth, got none)",
			"veth1: missing (want veth, got none)"},
		steps: []string{"create baremetal", "set-up baremetal", "create veth0 veth1", "set-master veth0 baremetal",
			"set-up veth0", "set-master veth1 virbr0", "set-up veth1"},
	}, {
		name:  "veth pair deleted",
		top:   seed(),
		edit:  func(m map[string]ObservedLink) { delete(m, "veth0"); delete(m, "veth1") },
		diffs: []string{"veth0: missing (want veth, got none)", "veth1: missing (want veth, got none)"},
		steps: []string{"create veth0 veth1", "set-master veth0 baremetal", "set-up veth0",
			"set-master veth1 virbr0", "set-up veth1"},
	}, {
		name:  "bridge down",
		top:   seed(),
		edit:  func(m map[string]ObservedLink) { set(m, "baremetal", func(l *ObservedLink) { l.Up = false }) },
		diffs: []string{"baremetal: down (want up, got down)"},
		steps: []string{"set-up baremetal"},
	}, {
		name:  "port on another master",
		top:   seed(),
		edit:  func(m map[string]ObservedLink) { set(m, "veth0", func(l *ObservedLink) { l.Master = 2 }) },
		diffs: []string{"veth0: wrong-master (want baremetal, got virbr0)"},
		steps: []string{"set-master veth0 baremetal"},
	}, {
		name:  "port released",
		top:   seed(),
		edit:  func(m map[string]ObservedLink) { set(m, "veth1", func(l *ObservedLink) { l.Master = 0 }) },
		diffs: []string{"veth1: wrong-master (want virbr0, got none)"},
		steps: []string{"set-master veth1 virbr0"},
	}, {
		name:  "wrong MTU",
		top:   seed(),
		edit:  func(m map[string]ObservedLink) { set(m, "veth1", func(l *ObservedLink) { l.MTU = 1400 }) },
		diffs: []string{"veth1: wrong-mtu (want 1500, got 1400)"},
		steps: []string{"set-mtu veth1 1500"},
	}, {
		name: "foreign link with a lab name",
		top:  seed(),
		edit: func(m map[string]ObservedLink) {
			set(m, "baremetal", func(l *ObservedLink) { l.Alias = ""; l.Up = false })
		},
		diffs: []string{"baremetal: foreign (want alias bmlab:test, got no alias)"},
	}, {
		name: "another lab's link",
		top:  seed(),
		edit: func(m map[string]ObservedLink) {
			set(m, "veth1", func(l *ObservedLink) { l.Alias = "bmlab:other" })
		},
		diffs: []string{"veth1: foreign (want alias bmlab:test, got alias bmlab:other)"},
	}, {
		name: "libvirt's bridge missing",
		top:  seed(),
		edit: func(m map[string]ObservedLink) {
			delete(m, "virbr0")
			set(m, "veth1", func(l *ObservedLink) { l.Master = 0 })
		},
		diffs: []string{"virbr0: external-missing (want present, got none)", "veth1: wrong-master (want virbr0, got none)"},
		steps: []string{"set-master veth1 virbr0"},
	}, {
		name: "owned link of the wrong type",
		top:  seed(),
		edit: func(m map[string]ObservedLink) {
			set(m, "baremetal", func(l *ObservedLink) { l.Kind = "dummy" })
		},
		diffs: []string{"baremetal: wrong-type (want bridge, got dummy)"},
		steps: []string{"delete baremetal", "create baremetal", "set-up baremetal"},
	}, {
		name: "peer moved to another namespace",
		top:  seed(),
		edit: func(m map[string]ObservedLink) {
			delete(m, "veth1")
			set(m, "veth0", func(l *ObservedLink) { l.LinkElsewhere = true; l.Link = 9 })
		},
		diffs: []string{"veth0: peer-missing (want veth1, got a link in another namespace)"},
		steps: []string{"delete veth0", "create veth0 veth1", "set-master veth0 baremetal", "set-up veth0",
			"set-master veth1 virbr0", "set-up veth1"},
	}, {
		name: "ends paired with other links",
		top:  seed(),
		edit: func(m map[string]ObservedLink) {
			set(m, "veth0", func(l *ObservedLink) { l.Link = 1 })
			set(m, "veth1", func(l *ObservedLink) { l.Link = 1 })
		},
		diffs: []string{"veth0: peer-missing (want veth1, got lo)", "veth1: peer-missing (want veth0, got lo)",
			"lo: foreign (want alias bmlab:test, got no alias)"},
		steps: []string{"delete veth0", "delete veth1", "create veth0 veth1", "set-master veth0 baremetal",
			"set-up veth0", "set-master veth1 virbr0", "set-up veth1"},
	}, {
		name: "owned veth end with an owned stray peer",
		top:  seed(),
		edit: func(m map[string]ObservedLink) {
			m["stray"] = ObservedLink{Index: 7, Name: "stray", Kind: KindVeth, Alias: testOwner, Link: 5}
			set(m, "veth1", func(l *ObservedLink) { l.Link = 7 })
			delete(m, "veth0")
		},
		diffs: []string{"veth1: peer-missing (want veth0, got stray)"},
		steps: []string{"delete veth1", "create veth0 veth1", "set-master veth0 baremetal",
			"set-up veth0", "set-master veth1 virbr0", "set-up veth1"},
	}, {
		name:  "address missing",
		top:   withAddr,
		edit:  func(map[string]ObservedLink) {},
		diffs: []string{"baremetal: address-missing (want 10.77.0.1/24, got none)"},
		steps: []string{"add-address baremetal 10.77.0.1/24"},
	}, {
		name: "address present among others",
		top:  withAddr,
		edit: func(m map[string]ObservedLink) {
			set(m, "baremetal", func(l *ObservedLink) {
				l.Addresses = []netip.Prefix{netip.MustParsePrefix("fe80::1/64"), netip.MustParsePrefix("10.77.0.1/24")}
			})
		},
	}, {
		name: "VLAN with another id",
		top:  withVLAN,
		edit: func(m map[string]ObservedLink) {
			m["bm.10"] = ObservedLink{Index: 6, Name: "bm.10", Kind: KindVLAN, Alias: testOwner, MTU: 1500, Up: true, Link: 3, VLANID: 11}
		},
		diffs: []string{"bm.10: wrong-type (want vlan 10 on baremetal, got vlan 11 on baremetal)"},
		steps: []string{"delete bm.10", "create bm.10", "set-up bm.10"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := healthy()
			tt.edit(m)
			p := Diff(tt.top, testOwner, observed(m))
			var diffs, steps []string
			for _, d := range p.Differences {
				diffs = append(diffs, d.String())
				if d.Fix == "" {
					t.Errorf("%s: no fix given", d)
				}
			}
			for _, s := range p.Steps {
				steps = append(steps, s.String())
			}
			if d := cmp.Diff(tt.diffs, diffs); d != "" {
				t.Errorf("differences (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tt.steps, steps); d != "" {
				t.Errorf("steps (-want +got):\n%s", d)
			}
		})
	}
}

func TestDiffBlocking(t *testing.T) {
	m := healthy()
	set(m, "baremetal", func(l *ObservedLink) { l.Alias = "" })
	delete(m, "virbr0")
	p := Diff(seed(), testOwner, observed(m))
	var kinds []DiffKind
	for _, d := range p.Blocking() {
		kinds = append(kinds, d.Kind)
	}
	if d := cmp.Diff([]DiffKind{Foreign, ExternalMissing}, kinds); d != "" {
		t.Errorf("blocking kinds (-want +got):\n%s", d)
	}
	for _, s := range p.Steps {
		if s.Link == "baremetal" {
			t.Errorf("plan has step %q on a foreign link", s)
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		top  Topology
		ok   bool
	}{
		{"seed", seed(), true},
		{"duplicate", Topology{Bridges: []Bridge{{Name: "a"}, {Name: "a"}}}, false},
		{"veth as master", Topology{Veths: []Veth{{Name: "a", Peer: "b", PeerMaster: "a"}}}, false},
		{"own peer", Topology{Veths: []Veth{{Name: "a", Peer: "a"}}}, false},
		{"long name", Topology{Bridges: []Bridge{{Name: "abcdefghijklmnop"}}}, false},
		{"vlan id", Topology{VLANs: []VLAN{{Name: "v", Parent: "eth0", ID: 0}}}, false},
		{"stacked vlan", Topology{VLANs: []VLAN{{Name: "v", Parent: "eth0", ID: 1}, {Name: "w", Parent: "v", ID: 2}}}, false},
		{"mtu", Topology{Bridges: []Bridge{{Name: "a", MTU: 20}}}, false},
	}
	for _, tt := range tests {
		if err := tt.top.Validate(); (err == nil) != tt.ok {
			t.Errorf("%s: Validate() = %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}

func set(m map[string]ObservedLink, name string, f func(*ObservedLink)) {
	l := m[name]
	f(&l)
	m[name] = l
}

// TestDiffVXLAN: a VXLAN link is missing, healthy, or has another remote
// (then it is deleted and created again).
func TestDiffVXLAN(t *testing.T) {
	top := seed()
	x := VXLAN{Name: "bmvx-beta", ID: 4242, Local: netip.MustParseAddr("10.254.0.1"), Remote: netip.MustParseAddr("10.254.0.2"), Master: "baremetal", MTU: 1500}
	top.VXLANs = []VXLAN{x}
	good := x
	good.Port = VXLANPort
	tests := []struct {
		name  string
		edit  func(map[string]ObservedLink)
		diffs []string
		steps []string
	}{{
		name:  "missing",
		edit:  func(map[string]ObservedLink) {},
		diffs: []string{"bmvx-beta: missing (want vxlan, got none)"},
		steps: []string{"create bmvx-beta", "set-master bmvx-beta baremetal", "set-up bmvx-beta"},
	}, {
		name: "healthy",
		edit: func(m map[string]ObservedLink) {
			m["bmvx-beta"] = ObservedLink{Index: 9, Name: "bmvx-beta", Kind: KindVXLAN, Alias: testOwner, MTU: 1500, Up: true, Master: 3, VXLAN: &good}
		},
	}, {
		name: "other remote",
		edit: func(m map[string]ObservedLink) {
			bad := good
			bad.Remote = netip.MustParseAddr("10.254.0.9")
			m["bmvx-beta"] = ObservedLink{Index: 9, Name: "bmvx-beta", Kind: KindVXLAN, Alias: testOwner, MTU: 1500, Up: true, Master: 3, VXLAN: &bad}
		},
		diffs: []string{"bmvx-beta: wrong-type (want vxlan 4242 10.254.0.1 -> 10.254.0.2:4789, got vxlan 4242 10.254.0.1 -> 10.254.0.9:4789)"},
		steps: []string{"delete bmvx-beta", "create bmvx-beta", "set-master bmvx-beta baremetal", "set-up bmvx-beta"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			links := healthy()
			tt.edit(links)
			p := Diff(top, testOwner, observed(links))
			var diffs, steps []string
			for _, d := range p.Differences {
				diffs = append(diffs, d.String())
			}
			for _, s := range p.Steps {
				steps = append(steps, s.String())
			}
			if d := cmp.Diff(tt.diffs, diffs); d != "" {
				t.Errorf("differences (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tt.steps, steps); d != "" {
				t.Errorf("steps (-want +got):\n%s", d)
			}
		})
	}
}
