package labvirt

import (
	"strings"
	"testing"

	"libvirt.org/go/libvirtxml"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/plan"
	"github.com/bmlab/bmlab/internal/virt"
	"github.com/bmlab/bmlab/internal/virt/domain"
)

// TestDomainXMLKCS: a node whose in-band IPMI the plan wires has the KCS
// in its <qemu:commandline>, at the socket vbmcd serves (read back as vbmcd
// reads it); an aarch64 node cannot have one; a spec without a socket has
// no qemu arguments at all.
func TestDomainXMLKCS(t *testing.T) {
	n := plan.Node{Name: "m", UUID: "5c4b6e1c-3f4e-4b7a-8c1e-9a2b3c4d5e6f", Arch: "x86_64", BMC: plan.Endpoint{SystemURL: "https://h/redfish/v1/Systems/x", Inband: true}}
	spec := domainSpec(lab.Machine{Lab: "l", Node: n, Network: "net"})
	want := "/run/vbmcd/kcs/5c4b6e1c-3f4e-4b7a-8c1e-9a2b3c4d5e6f.sock"
	if spec.KCSSocket != want {
		t.Fatalf("socket %q, want %q", spec.KCSSocket, want)
	}
	x, err := spec.XML(virt.Firmware{UEFI: virt.UEFI{Code: "/c", Vars: "/v"}})
	if err != nil {
		t.Fatal(err)
	}
	var d libvirtxml.Domain
	if err := d.Unmarshal(x); err != nil {
		t.Fatal(err)
	}
	if d.QEMUCommandline == nil || !strings.Contains(x, "ipmi-bmc-extern") || !strings.Contains(x, "path="+want+",reconnect=1") {
		t.Errorf("no KCS at %s in\n%s", want, x)
	}
	n.BMC.Inband = false
	x, err = domainSpec(lab.Machine{Lab: "l", Node: n, Network: "net"}).XML(virt.Firmware{UEFI: virt.UEFI{Code: "/c", Vars: "/v"}})
	if err != nil || strings.Contains(x, "commandline") {
		t.Errorf("without in-band IPMI: %v\n%s", err, x)
	}
	if _, err := (domain.Spec{Name: "arm", Arch: "aarch64", UEFI: true, KCSSocket: want}).XML(virt.Firmware{AArch64: virt.UEFI{Code: "/a", Vars: "/av"}}); err == nil || !strings.Contains(err.Error(), "ISA") {
		t.Errorf("aarch64 with a KCS: %v", err)
	}
}

// TestDomainNICsAsThePlanWiresThem: a node of a lab with a provisioning
// network is defined with its provisioning NIC first (on the libvirt
// network named like the provisioning bridge), its baremetal NIC second,
// and os/boot's order disk then network, which libvirt turns into the
// first NIC's bootindex: the node network-boots from its provisioning
// NIC. A node with one NIC keeps it on the node network.
func TestDomainNICsAsThePlanWiresThem(t *testing.T) {
	fw := virt.Firmware{UEFI: virt.UEFI{Code: "/fw/CODE.fd", Vars: "/fw/VARS.fd"}}
	for _, tt := range []struct {
		name string
		nics []plan.NIC
		want []string
	}{
		{"managed", []plan.NIC{{Name: "enp1s0", MAC: "52:54:00:00:00:01", Network: "provisioning", Provisioning: true}, {Name: "enp2s0", MAC: "52:54:00:00:00:02", Network: "baremetal"}},
			[]string{"52:54:00:00:00:01 network provisioning", "52:54:00:00:00:02 network baremetal"}},
		{"bridge without a libvirt network", []plan.NIC{{Name: "enp1s0", MAC: "52:54:00:00:00:01", Bridge: "prov2", Provisioning: true}, {Name: "enp2s0", MAC: "52:54:00:00:00:02", Network: "baremetal"}},
			[]string{"52:54:00:00:00:01 bridge prov2", "52:54:00:00:00:02 network baremetal"}},
		{"one NIC", nil, []string{"52:54:00:00:00:09 network baremetal"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := plan.Node{Name: "n0", MAC: "52:54:00:00:00:09", NICs: tt.nics, Disks: []plan.Disk{{Path: "/d/n0.qcow2"}}}
			x, err := domainSpec(lab.Machine{Lab: "l", Node: n, Network: "baremetal"}).XML(fw)
			if err != nil {
				t.Fatal(err)
			}
			var d libvirtxml.Domain
			if err := d.Unmarshal(x); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, in := range d.Devices.Interfaces {
				s := in.MAC.Address
				switch src := in.Source; {
				case src.Network != nil:
					s += " network " + src.Network.Network
				case src.Bridge != nil:
					s += " bridge " + src.Bridge.Bridge
				}
				got = append(got, s)
			}
			if strings.Join(got, "; ") != strings.Join(tt.want, "; ") {
				t.Errorf("NICs %q, want %q", got, tt.want)
			}
			var boot []string
			for _, b := range d.OS.BootDevices {
				boot = append(boot, b.Dev)
			}
			if strings.Join(boot, ",") != "hd,network" {
				t.Errorf("os/boot %v, want hd,network", boot)
			}
		})
	}
}
