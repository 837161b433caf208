package redfish

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/bmlab/bmlab/internal/machine"
)

// Inventory for out-of-band inspection beyond processors, memory and
// storage: the PCIe devices of the chassis with their functions, its network
// adapters with their ports, the system's boot progress and health roll-up.
// All of it derives from the machine's inventory; nothing is invented.

// pcieDeviceID names the PCIe device at domain:bus:slot of an address
// ("0000:01:00.0" → "0000-01-00"); functions are numbered under it.
func pcieDeviceID(addr string) (dev, fn string) {
	slot, fn, _ := strings.Cut(addr, ".")
	return strings.ReplaceAll(slot, ":", "-"), fn
}

// pcieDevices groups a machine's PCI functions by device, in address order.
func pcieDevices(m *machine.Machine) (ids []string, fns map[string][]machine.PCIDevice) {
	fns = map[string][]machine.PCIDevice{}
	for _, p := range m.PCI {
		d, _ := pcieDeviceID(p.Address)
		if _, seen := fns[d]; !seen {
			ids = append(ids, d)
		}
		fns[d] = append(fns[d], p)
	}
	return ids, fns
}

func pcieDeviceURI(m *machine.Machine, did string) string {
	return chassisOf(m.ID) + "/PCIeDevices/" + did
}

// pcieDeviceRefs links the system to its PCIe devices.
func pcieDeviceRefs(m *machine.Machine) []ref {
	ids, _ := pcieDevices(m)
	rs := make([]ref, len(ids))
	for i, id := range ids {
		rs[i] = ref{pcieDeviceURI(m, id)}
	}
	return rs
}

func pcieDevice(m *machine.Machine, did string) obj {
	_, fns := pcieDevices(m)
	fs, ok := fns[did]
	if !ok {
		return nil
	}
	u := pcieDeviceURI(m, did)
	typ := "SingleFunction"
	if len(fs) > 1 {
		typ = "MultiFunction"
	}
	return obj{
		"@odata.id":     u,
		"@odata.type":   "#PCIeDevice.v1_11_0.PCIeDevice",
		"Id":            did,
		"Name":          fs[0].Name,
		"Manufacturer":  fs[0].Vendor,
		"Model":         fs[0].Name,
		"DeviceType":    typ,
		"PCIeFunctions": ref{u + "/PCIeFunctions"},
		"Status":        status("Enabled"),
		"Links": obj{
			"Chassis": []ref{{chassisOf(m.ID)}},
		},
	}
}

func pcieFunctionIDs(m *machine.Machine, did string) ([]string, bool) {
	_, fns := pcieDevices(m)
	fs, ok := fns[did]
	ids := make([]string, len(fs))
	for i, f := range fs {
		_, ids[i] = pcieDeviceID(f.Address)
	}
	return ids, ok
}

func pcieFunction(m *machine.Machine, did, fid string) obj {
	_, fns := pcieDevices(m)
	for _, f := range fns[did] {
		if _, n := pcieDeviceID(f.Address); n != fid {
			continue
		}
		u := pcieDeviceURI(m, did)
		links := obj{"PCIeDevice": ref{u}}
		for _, n := range m.NICs {
			if n.PCI == f.Address {
				links["EthernetInterfaces"] = []ref{{systemURI(m.ID) + "/EthernetInterfaces/" + nicID(n)}}
			}
		}
		num, _ := strconv.ParseUint(fid, 16, 8)
		return obj{
			"@odata.id":    u + "/PCIeFunctions/" + fid,
			"@odata.type":  "#PCIeFunction.v1_5_0.PCIeFunction",
			"Id":           fid,
			"Name":         f.Name,
			"FunctionId":   num,
			"FunctionType": "Physical",
			"DeviceClass":  f.Class,
			"VendorId":     hex16(f.VendorID),
			"DeviceId":     hex16(f.DeviceID),
			"Status":       status("Enabled"),
			"Links":        links,
		}
	}
	return nil
}

func hex16(v uint16) string { return fmt.Sprintf("0x%04x", v) }

func networkAdaptersURI(m *machine.Machine) string { return chassisOf(m.ID) + "/NetworkAdapters" }

func findNIC(m *machine.Machine, nid string) (machine.NIC, bool) {
	for _, n := range m.NICs {
		if nicID(n) == nid {
			return n, true
		}
	}
	return machine.NIC{}, false
}

// pciOfNIC returns the PCI function a NIC is.
func pciOfNIC(m *machine.Machine, n machine.NIC) (machine.PCIDevice, bool) {
	for _, p := range m.PCI {
		if n.PCI != "" && p.Address == n.PCI {
			return p, true
		}
	}
	return machine.PCIDevice{}, false
}

// networkAdapter is one NIC of the machine as an adapter with one port.
func networkAdapter(m *machine.Machine, nid string, id identity) obj {
	n, ok := findNIC(m, nid)
	if !ok {
		return nil
	}
	u := networkAdaptersURI(m) + "/" + nid
	ctrl := obj{
		"FirmwarePackageVersion": firmwareVersion(m, machine.FirmwareNIC, id),
		"ControllerCapabilities": obj{"NetworkPortCount": 1},
		"Links":                  obj{"Ports": []ref{{u + "/Ports/1"}}},
	}
	o := obj{
		"@odata.id":   u,
		"@odata.type": "#NetworkAdapter.v1_9_0.NetworkAdapter",
		"Id":          nid,
		"Name":        "Network Adapter " + n.MAC,
		"Model":       n.Model,
		"Ports":       ref{u + "/Ports"},
		"Status":      status("Enabled"),
	}
	if p, ok := pciOfNIC(m, n); ok {
		o["Manufacturer"], o["Model"] = p.Vendor, p.Name
		did, _ := pcieDeviceID(p.Address)
		ctrl["Links"].(obj)["PCIeDevices"] = []ref{{pcieDeviceURI(m, did)}}
	}
	o["Controllers"] = []obj{ctrl}
	return o
}

func networkPort(m *machine.Machine, nid, pid string) obj {
	n, ok := findNIC(m, nid)
	if !ok || pid != "1" {
		return nil
	}

	o := obj{
		"@odata.id":             networkAdaptersURI(m) + "/" + nid + "/Ports/1",
		"@odata.type":           "#Port.v1_7_0.Port",
		"Id":                    "1",
		"Name":                  "Port 1 of " + n.MAC,
		"PortId":                "1",
		"PortProtocol":          "Ethernet",
		"LinkNetworkTechnology": "Ethernet",
		"LinkStatus":            linkStatus(n),
		"Ethernet":              obj{"AssociatedMACAddresses": []string{strings.ToLower(n.MAC)}},
		"Status":                status("Enabled"),
	}
	if n.LLDP != nil {
		// Port.Ethernet.LLDPReceive (Port v1_4_0).
		o["Ethernet"].(obj)["LLDPReceive"] = lldpReceive(n.LLDP)
	}
	return o
}

// bootProgress is what the BMC can tell of a boot: whether the machine is
// off or its firmware has begun. vbmcd does not watch the guest beyond
// that.
func bootProgress(m *machine.Machine) obj {
	if m.Power == machine.PowerOff {
		return obj{"LastState": "None"}
	}
	return obj{"LastState": "SystemHardwareInitializationComplete"}
}

// withRollup sets the HealthRollup of a system's or chassis' status. Its
// processors, memory, drives, PCIe devices and ports all report OK (a VM's
// parts do not fail on their own), so the roll-up is the resource's own
// health: Critical after a failed power action.
func withRollup(st obj) obj {
	st["HealthRollup"] = st["Health"]
	return st
}

func renderPCIeDevices(_ *Server, c *call) any {
	ids, _ := pcieDevices(c.m)
	return subCollection(c, "PCIeDeviceCollection", "PCIe Device Collection", ids)
}
func renderPCIeDevice(_ *Server, c *call) any { return pcieDevice(c.m, c.params[1]) }
func renderPCIeFunctions(_ *Server, c *call) any {
	ids, ok := pcieFunctionIDs(c.m, c.params[1])
	if !ok {
		return nil
	}
	return subCollection(c, "PCIeFunctionCollection", "PCIe Function Collection", ids)
}
func renderPCIeFunction(_ *Server, c *call) any {
	return pcieFunction(c.m, c.params[1], c.params[2])
}
func renderNetworkAdapters(_ *Server, c *call) any {
	return subCollection(c, "NetworkAdapterCollection", "Network Adapter Collection", nicIDs(c.m))
}
func renderNetworkAdapter(s *Server, c *call) any {
	return networkAdapter(c.m, c.params[1], s.idOf(c.m))
}
func renderPorts(_ *Server, c *call) any {
	if _, ok := findNIC(c.m, c.params[1]); !ok {
		return nil
	}
	return subCollection(c, "PortCollection", "Port Collection", []string{"1"})
}
func renderPort(_ *Server, c *call) any { return networkPort(c.m, c.params[1], c.params[2]) }

// linkStatus is a NIC's link as the guest sees it.
func linkStatus(n machine.NIC) string {
	if n.LinkDown {
		return "LinkDown"
	}
	return "LinkUp"
}
