package virt

import (
	"testing"

	"libvirt.org/go/libvirtxml"
)

// A domain without graphics gets the VNC display on a unix socket; one with
// any display keeps its own. The socket is read from the live XML, in
// either of libvirt's spellings.
func TestDisplay(t *testing.T) {
	var def libvirtxml.Domain
	if err := def.Unmarshal(`<domain type='qemu'><name>a</name><devices><serial type='pty'/></devices></domain>`); err != nil {
		t.Fatal(err)
	}
	if !addDisplay(&def) {
		t.Fatal("a domain without graphics got no display")
	}
	x, err := def.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var back libvirtxml.Domain
	if err := back.Unmarshal(x); err != nil {
		t.Fatal(err)
	}
	g := back.Devices.Graphics
	if len(g) != 1 || g[0].VNC == nil || len(g[0].VNC.Listeners) != 1 || g[0].VNC.Listeners[0].Socket == nil {
		t.Fatalf("display added as %s", x)
	}
	if addDisplay(&back) {
		t.Error("a domain with a display got a second one")
	}
	var spice libvirtxml.Domain
	_ = spice.Unmarshal(`<domain type='qemu'><name>s</name><devices><graphics type='spice' autoport='yes'/></devices></domain>`)
	if addDisplay(&spice) {
		t.Error("a domain with a SPICE display got a VNC one too")
	}
	if got := displaySocket(&spice); got != "" {
		t.Errorf("SPICE display's socket %q, want none", got)
	}

	for _, live := range []string{
		`<domain type='qemu'><name>a</name><devices><graphics type='vnc' socket='/run/a/vnc.sock'><listen type='socket' socket='/run/a/vnc.sock'/></graphics></devices></domain>`,
		`<domain type='qemu'><name>a</name><devices><graphics type='vnc'><listen type='socket' socket='/run/a/vnc.sock'/></graphics></devices></domain>`,
	} {
		var d libvirtxml.Domain
		if err := d.Unmarshal(live); err != nil {
			t.Fatal(err)
		}
		if got := displaySocket(&d); got != "/run/a/vnc.sock" {
			t.Errorf("socket of %s: %q", live, got)
		}
	}
	var tcp libvirtxml.Domain
	_ = tcp.Unmarshal(`<domain type='qemu'><name>a</name><devices><graphics type='vnc' port='5900'><listen type='address' address='127.0.0.1'/></graphics></devices></domain>`)
	if got := displaySocket(&tcp); got != "" {
		t.Errorf("a VNC display on TCP has socket %q, want none (vbmcd reads unix sockets only)", got)
	}
}
