package virt

import (
	"testing"

	"libvirt.org/go/libvirtxml"

	"github.com/bmlab/bmlab/internal/machine"
)

// The VLAN a NIC's port announces (Port.LLDPReceive ManagementVlanId):
// the interface's own <vlan> (its untagged tag on a trunk, else its only
// or first one), else its network's. Written as libvirt writes them.
func TestLLDPVLAN(t *testing.T) {
	iface := func(vlan string) string {
		return `<interface type='network'><mac address='52:54:00:26:02:01'/><source network='lab' bridge='virbr9'/>` +
			vlan + `<target dev='vnet7'/><model type='virtio'/></interface>`
	}
	for _, tc := range []struct {
		name, xml string
		want      uint
	}{
		{"no vlan", iface(""), 0},
		{"one tag", iface(`<vlan><tag id='42'/></vlan>`), 42},
		{"trunk, native untagged", iface(`<vlan trunk='yes'><tag id='7'/><tag id='42' nativeMode='untagged'/></vlan>`), 42},
		{"trunk, native tagged", iface(`<vlan trunk='yes'><tag id='7' nativeMode='tagged'/><tag id='42'/></vlan>`), 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var in libvirtxml.DomainInterface
			if err := in.Unmarshal(tc.xml); err != nil {
				t.Fatal(err)
			}
			l := lldpOf(in)
			if l == nil || l.PortID != "vnet7" || l.SystemName != "virbr9" {
				t.Fatalf("lldpOf: %+v", l)
			}
			if l.VLAN != tc.want {
				t.Errorf("VLAN %d, want %d", l.VLAN, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name, vlan string
		own, want  uint
	}{
		{"the network's", `<vlan><tag id='99'/></vlan>`, 0, 99},
		{"the network's untagged", `<vlan trunk='yes'><tag id='5'/><tag id='99' nativeMode='untagged'/></vlan>`, 0, 99},
		{"the interface's own first", `<vlan><tag id='99'/></vlan>`, 42, 42},
		{"none", ``, 0, 0},
	} {
		t.Run("network/"+tc.name, func(t *testing.T) {
			var def libvirtxml.Network
			if err := def.Unmarshal(`<network><name>lab</name><mac address='52:54:00:AA:00:01'/>` + tc.vlan + `</network>`); err != nil {
				t.Fatal(err)
			}
			l := &machine.LLDP{ChassisID: "virbr9", ChassisIDSubtype: "IfName", VLAN: tc.own}
			fillSwitch(l, &def)
			if l.VLAN != tc.want || l.ChassisID != "52:54:00:aa:00:01" || l.ChassisIDSubtype != "MacAddr" {
				t.Errorf("after the network: %+v, want VLAN %d and the bridge's MAC", l, tc.want)
			}
		})
	}
}
