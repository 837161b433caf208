package virt_test

import (
	"fmt"
	"testing"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/virt"
	"github.com/bmlab/bmlab/internal/virttest"
)

// The network's VLAN as libvirt keeps it: a network with VLAN tags
// (libvirt allows them on an Open vSwitch bridge network, defined here and
// never started: this machine's kernel has no 802.1Q and no Open vSwitch,
// so no VM can run on a VLAN) is read from the real libvirtd, and the NIC
// on it announces the network's untagged VLAN.
func TestLLDPVLANFromLibvirt(t *testing.T) {
	lab := virttest.New(t, "vt-lldpvlan-")
	name := "vt-lldpvlan-net"
	l := lab.Client
	if old, err := l.NetworkLookupByName(name); err == nil {
		_ = l.NetworkUndefine(old)
	}
	net, err := l.NetworkDefineXML(fmt.Sprintf(`<network><name>%s</name><forward mode='bridge'/><bridge name='bmlvlan0'/>`+
		`<virtualport type='openvswitch'/><vlan trunk='yes'><tag id='7'/><tag id='42' nativeMode='untagged'/></vlan></network>`, name))
	if err != nil {
		t.Fatalf("define a network with VLAN tags: %v", err)
	}
	t.Cleanup(func() { _ = l.NetworkUndefine(net) })
	nics := []machine.NIC{{Network: name, LLDP: &machine.LLDP{ChassisID: "bmlvlan0", ChassisIDSubtype: "IfName", SystemName: "bmlvlan0", PortID: "vnet9"}}}
	virt.FillSwitches(l, nics)
	t.Logf("the NIC on %s: %+v", name, *nics[0].LLDP)
	if got := nics[0].LLDP.VLAN; got != 42 {
		t.Errorf("VLAN %d from libvirt's network %s, want 42 (its untagged tag)", got, name)
	}
}
