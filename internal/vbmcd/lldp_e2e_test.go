package vbmcd

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/digitalocean/go-libvirt"
	"github.com/stmcginnis/gofish/schemas"
	"libvirt.org/go/libvirtxml"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virttest"
)

// TestE2ELLDP: a real VM whose NIC is on an isolated libvirt network (in
// libvirtd's namespace, no forward, no DNS, nothing sent): gofish reads its
// NetworkAdapters → Ports → LLDPReceive, which names the network's bridge
// as the switch (its MAC as chassis ID, its name, its address as the
// management address) and the NIC's tap as the port; off, the port
// announces nothing; when the NIC is recabled into another network the
// port shows that one's bridge from the next start on.
func TestE2ELLDP(t *testing.T) {
	lab := virttest.New(t, "e2e-lldp-")
	l := lab.Client
	type network struct{ name, bridge, mac, ip string }
	nets := []network{
		{"e2e-lldp-a", "bmllldpa", "52:54:00:26:00:0a", "10.226.10.1"},
		{"e2e-lldp-b", "bmllldpb", "52:54:00:26:00:0b", ""},
	}
	for _, n := range nets {
		def := libvirtxml.Network{
			Name:   n.name,
			Bridge: &libvirtxml.NetworkBridge{Name: n.bridge, STP: "off"},
			MAC:    &libvirtxml.NetworkMAC{Address: n.mac},
			DNS:    &libvirtxml.NetworkDNS{Enable: "no"},
		}
		if n.ip != "" {
			def.IPs = []libvirtxml.NetworkIP{{Address: n.ip, Prefix: 24}}
		}
		transientNetwork(t, l, def)
	}
	vm := lab.NewVM(t, "a", virttest.VMOptions{NoCD: true, DiskMarker: true})
	const mac = "52:54:00:26:01:01"
	nic := func(network string) string {
		x, err := (&libvirtxml.DomainInterface{
			MAC:    &libvirtxml.DomainInterfaceMAC{Address: mac},
			Source: &libvirtxml.DomainInterfaceSource{Network: &libvirtxml.DomainInterfaceSourceNetwork{Network: network}},
			Model:  &libvirtxml.DomainInterfaceModel{Type: "virtio"},
		}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	dom, err := l.DomainLookupByName(vm.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.DomainAttachDeviceFlags(dom, nic(nets[0].name), uint32(libvirt.DomainDeviceModifyConfig)); err != nil {
		t.Fatalf("attach a NIC on %s: %v", nets[0].name, err)
	}
	url := daemon(t, "e2e-lldp-")
	c := gofishClient(t, url, "admin", "e2e-pass", false)
	defer c.Logout()

	lldp := func() (schemas.LLDPReceive, bool) {
		t.Helper()
		ch, err := schemas.GetChassis(c, "/redfish/v1/Chassis/"+vm.ID)
		if err != nil {
			t.Fatalf("chassis: %v", err)
		}
		adapters, err := ch.NetworkAdapters()
		if err != nil {
			t.Fatalf("NetworkAdapters: %v", err)
		}
		for _, a := range adapters {
			ports, err := a.Ports()
			if err != nil {
				t.Fatalf("Ports: %v", err)
			}
			for _, p := range ports {
				if strings.Contains(p.Name, mac) {
					return p.Ethernet.LLDPReceive, p.Ethernet.LLDPReceive.PortID != ""
				}
			}
		}
		t.Fatalf("no port for NIC %s", mac)
		return schemas.LLDPReceive{}, false
	}
	if r, ok := lldp(); ok {
		t.Errorf("the VM is off, yet its port receives LLDP: %+v", r)
	}
	if _, err := send("POST", url+"/redfish/v1/Systems/"+vm.ID+"/Actions/ComputerSystem.Reset", "admin", "e2e-pass", `{"ResetType":"On"}`); err != nil {
		t.Fatal(err)
	}
	lab.WaitPower(t, vm.ID, machine.PowerOn, bootTimeout)
	tap := func() string {
		var d libvirtxml.Domain
		if err := d.Unmarshal(lab.LiveXML(t, vm.Name, 0)); err != nil {
			t.Fatal(err)
		}
		for _, in := range d.Devices.Interfaces {
			if in.MAC != nil && in.MAC.Address == mac && in.Target != nil {
				return in.Target.Dev
			}
		}
		t.Fatalf("no tap for %s in the live XML", mac)
		return ""
	}
	want := func(n network) string {
		return fmt.Sprintf("chassis %s (MacAddr), system %s, port %s (IfName), management %s", n.mac, n.bridge, tap(), n.ip)
	}
	got := func(r schemas.LLDPReceive) string {
		return fmt.Sprintf("chassis %s (%s), system %s, port %s (%s), management %s",
			r.ChassisID, r.ChassisIDSubtype, r.SystemName, r.PortID, r.PortIDSubtype, r.ManagementAddressIPv4)
	}
	var r schemas.LLDPReceive
	if !testenv.WaitFor(30*time.Second, func() bool { r, _ = lldp(); return got(r) == want(nets[0]) }) {
		t.Fatalf("LLDPReceive on %s: %s, want %s", nets[0].name, got(r), want(nets[0]))
	}

	// Recabled into the other network while off: from the next start the
	// port sees the other bridge, through another tap.
	reset := func(rt string) {
		t.Helper()
		if r, err := send("POST", url+"/redfish/v1/Systems/"+vm.ID+"/Actions/ComputerSystem.Reset", "admin", "e2e-pass", `{"ResetType":"`+rt+`"}`); err != nil || r.Code/100 != 2 {
			t.Fatalf("Reset %s: %d %v", rt, r.Code, err)
		}
	}
	reset("ForceOff")
	lab.WaitPower(t, vm.ID, machine.PowerOff, bootTimeout)
	if err := l.DomainUpdateDeviceFlags(dom, nic(nets[1].name), libvirt.DomainDeviceModifyConfig); err != nil {
		t.Fatalf("move the NIC to %s: %v", nets[1].name, err)
	}
	reset("On")
	lab.WaitPower(t, vm.ID, machine.PowerOn, bootTimeout)
	if !testenv.WaitFor(30*time.Second, func() bool { r, _ = lldp(); return got(r) == want(nets[1]) }) {
		t.Fatalf("LLDPReceive after the move to %s: %s, want %s", nets[1].name, got(r), want(nets[1]))
	}
}
