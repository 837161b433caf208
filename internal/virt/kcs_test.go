package virt

import (
	"strings"
	"testing"

	"libvirt.org/go/libvirtxml"
)

// The KCS goes into a domain's <qemu:commandline> once, survives libvirt's
// XML both ways, and its socket is read back, a comma in the path
// included; a domain with an IPMI device of its own, or an aarch64 one,
// gets none.
func TestKCSArgs(t *testing.T) {
	const sock = "/run/vbmcd/kcs/a,b.sock"
	var def libvirtxml.Domain
	if err := def.Unmarshal(`<domain type='qemu'><name>a</name><os><type arch='x86_64' machine='pc-q35-7.2'>hvm</type></os><devices/></domain>`); err != nil {
		t.Fatal(err)
	}
	if !addKCS(&def, sock) {
		t.Fatal("an x86 domain got no KCS")
	}
	x, err := def.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(x, `xmlns:qemu="http://libvirt.org/schemas/domain/qemu/1.0"`) && !strings.Contains(x, `http://libvirt.org/schemas/domain/qemu/1.0`) {
		t.Errorf("no qemu namespace in\n%s", x)
	}
	var back libvirtxml.Domain
	if err := back.Unmarshal(x); err != nil {
		t.Fatal(err)
	}
	if got, any := kcsOf(&back); got != sock || !any {
		t.Errorf("socket read back %q (%v), want %q, in\n%s", got, any, sock, x)
	}
	if addKCS(&back, sock) {
		t.Error("a domain with the KCS got a second one")
	}

	for _, tc := range []struct{ name, xml string }{
		{"ipmi_sim's own BMC", `<domain type='qemu' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'><name>b</name><qemu:commandline>
			<qemu:arg value='-chardev'/><qemu:arg value='socket,id=ipmi0,host=localhost,port=9002,reconnect=10'/>
			<qemu:arg value='-device'/><qemu:arg value='ipmi-bmc-extern,id=bmc0,chardev=ipmi0'/>
			<qemu:arg value='-device'/><qemu:arg value='isa-ipmi-kcs,bmc=bmc0'/></qemu:commandline></domain>`},
		{"qemu's internal BMC", `<domain type='qemu' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'><name>c</name><qemu:commandline>
			<qemu:arg value='-device'/><qemu:arg value='ipmi-bmc-sim,id=bmc0'/></qemu:commandline></domain>`},
		{"aarch64", `<domain type='qemu'><name>d</name><os><type arch='aarch64' machine='virt'>hvm</type></os></domain>`},
	} {
		var d libvirtxml.Domain
		if err := d.Unmarshal(tc.xml); err != nil {
			t.Fatal(err)
		}
		if addKCS(&d, sock) {
			t.Errorf("%s: got the KCS", tc.name)
		}
		if got, _ := kcsOf(&d); got != "" {
			t.Errorf("%s: socket %q, want none (a TCP chardev is not vbmcd's)", tc.name, got)
		}
	}
}

// The socket a domain reports: its own; for an off domain without one that
// vbmcd wires, the one its next start gets; none when the backend does not
// wire (no directory, or a remote host).
func TestKCSSocketOf(t *testing.T) {
	const id = "0A1B2C3D-0000-4000-8000-000000000001"
	var bare, wired libvirtxml.Domain
	_ = bare.Unmarshal(`<domain type='qemu'><name>a</name></domain>`)
	_ = wired.Unmarshal(`<domain type='qemu'><name>a</name></domain>`)
	addKCS(&wired, "/labs/x/kcs.sock")
	for _, tc := range []struct {
		name string
		cfg  Config
		d    *libvirtxml.Domain
		off  bool
		want string
	}{
		{"off, to wire", Config{KCSDir: "/run/vbmcd/kcs"}, &bare, true, "/run/vbmcd/kcs/0a1b2c3d-0000-4000-8000-000000000001.sock"},
		{"running without one", Config{KCSDir: "/run/vbmcd/kcs"}, &bare, false, ""},
		{"its own", Config{KCSDir: "/run/vbmcd/kcs"}, &wired, false, "/labs/x/kcs.sock"},
		{"no directory", Config{}, &bare, true, ""},
		{"remote host", Config{KCSDir: "/run/vbmcd/kcs", URI: "qemu+tcp://10.0.0.2/system"}, &bare, true, ""},
		{"local socket URI", Config{KCSDir: "/run/vbmcd/kcs", URI: "qemu+unix:///system?socket=/run/l.sock"}, &bare, true, "/run/vbmcd/kcs/0a1b2c3d-0000-4000-8000-000000000001.sock"},
	} {
		b := &Backend{cfg: tc.cfg}
		if got := b.socketOf(id, tc.d, tc.off); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
