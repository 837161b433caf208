package virt

import (
	"net/url"
	"path/filepath"
	"strings"

	"libvirt.org/go/libvirtxml"

	"github.com/bmlab/bmlab/internal/machine"
)

// The in-band IPMI interface: a KCS (what a server's OS reaches as
// /dev/ipmi0) wired to the domain's vbmcd BMC.
//
// qemu has the device (isa-ipmi-kcs) and an external BMC for it
// (ipmi-bmc-extern), which speaks OpenIPMI's VM protocol over a chardev;
// the chardev is a unix socket vbmcd listens on (internal/ipmi, the
// in-band face). libvirt 9.0 has no element for either (its <ipmi> came
// later, and <qemu:override> only changes properties of devices libvirt
// made), so they are qemu arguments in the domain's <qemu:commandline>:
//
//	-chardev socket,id=bmlab-kcs,path=SOCKET,reconnect=1
//	-device ipmi-bmc-extern,id=bmlab-bmc,chardev=bmlab-kcs
//	-device isa-ipmi-kcs,bmc=bmlab-bmc
//
// qemu connects to the socket as a client; with reconnect=1 a domain
// starts whether vbmcd listens or not, and qemu connects again a second
// after vbmcd went away (a restart). The KCS sits at its ISA default (I/O
// port 0xca2, IRQ 5), where qemu's ACPI and SMBIOS tables tell Linux's
// ipmi_si to look. libvirt marks such a domain "tainted: custom-argv".
//
// vbmcd reads the socket from the definition (KCSSocket), so it serves
// whatever path labctl, or anyone, wrote there. A domain without any IPMI
// device gets this one at its next start through vbmcd (Start), with the
// socket <Config.KCSDir>/<uuid>.sock, as a BMC's host interface is always
// there. Not added: with no KCSDir, on a domain on another host (its qemu
// cannot reach this host's socket), on a machine without an ISA bus (the
// aarch64 "virt" machine), or to a domain that has an IPMI device of its
// own (one for OpenIPMI's ipmi_sim, say), which vbmcd then leaves alone.

// DefaultKCSDir is where vbmcd keeps the in-band sockets of libvirt
// domains (its --ipmi-inband-dir) and where labctl points its nodes'.
const DefaultKCSDir = "/run/vbmcd/kcs"

// The ids of what KCSArgs adds.
const (
	kcsChardev = "bmlab-kcs"
	kcsBMC     = "bmlab-bmc"
)

// KCSArgs are the qemu arguments of a KCS interface whose BMC is at the
// unix socket socket.
func KCSArgs(socket string) []libvirtxml.DomainQEMUCommandlineArg {
	return []libvirtxml.DomainQEMUCommandlineArg{
		{Value: "-chardev"}, {Value: "socket,id=" + kcsChardev + ",path=" + strings.ReplaceAll(socket, ",", ",,") + ",reconnect=1"},
		{Value: "-device"}, {Value: "ipmi-bmc-extern,id=" + kcsBMC + ",chardev=" + kcsChardev},
		{Value: "-device"}, {Value: "isa-ipmi-kcs,bmc=" + kcsBMC},
	}
}

// KCSSocketPath is where vbmcd puts the socket of machine id's KCS:
// <dir>/<uuid>.sock, 52 bytes under /run/vbmcd/kcs (a unix socket's path
// holds 107).
func KCSSocketPath(dir, id string) string { return filepath.Join(dir, strings.ToLower(id)+".sock") }

// qemuOpt splits a qemu option string, driver,key=value,..., with ",,"
// standing for a comma.
func qemuOpt(s string) (driver string, props map[string]string) {
	props = map[string]string{}
	var parts []string
	var cur strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == ',' {
			if i+1 < len(s) && s[i+1] == ',' {
				cur.WriteByte(',')
				i++
				continue
			}
			parts = append(parts, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteByte(s[i])
	}
	parts = append(parts, cur.String())
	for i, p := range parts {
		k, v, ok := strings.Cut(p, "=")
		if i == 0 && !ok {
			driver = p
			continue
		}
		props[k] = v
	}
	return driver, props
}

// kcsOf reads a definition's qemu arguments: the socket its external IPMI
// BMC connects to ("" when none), and whether it has an IPMI device at all
// (this one, or one of its own).
func kcsOf(d *libvirtxml.Domain) (socket string, any bool) {
	if d.QEMUCommandline == nil {
		return "", false
	}
	args := d.QEMUCommandline.Args
	chardevs := map[string]string{} // id → socket path
	var extern []string             // chardev ids of ipmi-bmc-extern devices
	for i := 0; i+1 < len(args); i++ {
		opt, val := args[i].Value, args[i+1].Value
		switch opt {
		case "-chardev":
			drv, p := qemuOpt(val)
			if drv == "socket" && p["path"] != "" {
				chardevs[p["id"]] = p["path"]
			}
		case "-device":
			drv, p := qemuOpt(val)
			if strings.Contains(drv, "ipmi") {
				any = true
			}
			if drv == "ipmi-bmc-extern" {
				extern = append(extern, p["chardev"])
			}
		default:
			continue
		}
		i++
	}
	for _, id := range extern {
		if path := chardevs[id]; path != "" {
			return path, true
		}
	}
	return "", any
}

// kcsFits says whether a definition can take the KCS: an x86 machine
// (pc or q35, which have an ISA bus) without an IPMI device.
func kcsFits(d *libvirtxml.Domain) bool {
	if _, any := kcsOf(d); any {
		return false
	}
	inv := inventoryOf(d)
	return inv.Arch == machine.ArchX86_64 || inv.Arch == "i686"
}

// addKCS gives def the KCS at socket when it fits; it says whether it did.
func addKCS(def *libvirtxml.Domain, socket string) bool {
	if !kcsFits(def) {
		return false
	}
	if def.QEMUCommandline == nil {
		def.QEMUCommandline = &libvirtxml.DomainQEMUCommandline{}
	}
	def.QEMUCommandline.Args = append(def.QEMUCommandline.Args, KCSArgs(socket)...)
	return true
}

// wiresKCS says whether this backend adds the KCS to its domains: with a
// socket directory, on the local host.
func (b *Backend) wiresKCS() bool {
	if b.cfg.KCSDir == "" {
		return false
	}
	u, err := url.Parse(b.cfg.URI)
	return b.cfg.URI == "" || (err == nil && u.Host == "")
}

// socketOf is the in-band socket of a domain: the one its running (or, off,
// its persistent) definition names; for an off domain without one that
// its next start through vbmcd will wire, the socket it will get.
func (b *Backend) socketOf(id string, running *libvirtxml.Domain, off bool) string {
	if s, _ := kcsOf(running); s != "" || !off {
		return s
	}
	if b.wiresKCS() && kcsFits(running) {
		return KCSSocketPath(b.cfg.KCSDir, id)
	}
	return ""
}
