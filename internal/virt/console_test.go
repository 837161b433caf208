package virt

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/digitalocean/go-libvirt"
	"github.com/digitalocean/go-libvirt/socket"
	"github.com/google/go-cmp/cmp"
)

// Byte tables for the console's XDR, per remote_protocol.x and RFC 4506.
func TestConsoleXDR(t *testing.T) {
	uuid := libvirt.UUID{0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x00}
	tests := []struct {
		name string
		got  []byte
		want []byte
	}{
		{"connect open", encodeConnectOpen("qemu:///system"), []byte{
			0, 0, 0, 1, // name present
			0, 0, 0, 14, 'q', 'e', 'm', 'u', ':', '/', '/', '/', 's', 'y', 's', 't', 'e', 'm', 0, 0, // padded to 4
			0, 0, 0, 0, // flags
		}},
		{"open console", encodeOpenConsole(libvirt.Domain{Name: "vm1", UUID: uuid, ID: -1}, uint32(libvirt.DomainConsoleForce)), append(append([]byte{
			0, 0, 0, 3, 'v', 'm', '1', 0,
		}, uuid[:]...),
			0xff, 0xff, 0xff, 0xff, // id -1
			0, 0, 0, 0, // dev_name absent
			0, 0, 0, 1, // VIR_DOMAIN_CONSOLE_FORCE
		)},
		{"string of 4", xdrString(nil, "abcd"), []byte{0, 0, 0, 4, 'a', 'b', 'c', 'd'}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, tt.got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}

	auths, err := decodeAuthList([]byte{0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 2})
	if err != nil || !cmp.Equal(auths, []uint32{0, 2}) {
		t.Errorf("auth list: %v %v", auths, err)
	}
	if _, err := decodeAuthList([]byte{0, 0, 0, 2, 0, 0, 0, 0}); err == nil {
		t.Error("short auth list accepted")
	}

	// remote_error: code 55 (operation invalid), domain 10, message present.
	raw := []byte{0, 0, 0, 55, 0, 0, 0, 10, 0, 0, 0, 1, 0, 0, 0, 5, 'o', 'f', 'f', '!', '!', 0, 0, 0, 0, 0, 0, 2}
	err = decodeError(raw)
	var lerr libvirt.Error
	if !errors.As(err, &lerr) || lerr.Code != uint32(libvirt.ErrOperationInvalid) || lerr.Message != "off!!" {
		t.Errorf("error: %#v", err)
	}
	if err := decodeError([]byte{0, 0, 0, 42, 0, 0, 0, 10, 0, 0, 0, 0}); err.Error() != "libvirt error 42" {
		t.Errorf("error without message: %v", err)
	}
	if err := decodeError([]byte{1, 2}); err == nil || errors.As(err, &lerr) {
		t.Errorf("short error: %v", err)
	}
}

// pipeDialer hands the console one end of an in-memory connection.
type pipeDialer struct{ c net.Conn }

func (d pipeDialer) Dial() (net.Conn, error) { return d.c, nil }

// fakeLibvirtd answers the console's handshake like libvirtd, then streams
// "hello" and echoes every stream packet back upper-cased; "bye" ends the
// stream as a stopping domain does. It records the packets it got.
func fakeLibvirtd(t *testing.T, c net.Conn, got chan<- string) {
	defer c.Close()
	send := func(h [6]uint32, payload []byte) {
		b := binary.BigEndian.AppendUint32(nil, uint32(28+len(payload)))
		for _, v := range h {
			b = binary.BigEndian.AppendUint32(b, v)
		}
		if _, err := c.Write(append(b, payload...)); err != nil {
			return
		}
	}
	for {
		var hdr [28]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[:])
		payload := make([]byte, n-28)
		if _, err := io.ReadFull(c, payload); err != nil {
			return
		}
		proc, typ, serial, status := binary.BigEndian.Uint32(hdr[12:]), binary.BigEndian.Uint32(hdr[16:]), binary.BigEndian.Uint32(hdr[20:]), binary.BigEndian.Uint32(hdr[24:])
		got <- fmt.Sprintf("proc %d type %d status %d %q", proc, typ, status, payload)
		reply := [6]uint32{remoteProgram, 1, proc, socket.Reply, serial, socket.StatusOK}
		stream := [6]uint32{remoteProgram, 1, procDomainOpenConsole, socket.Stream, serial, socket.StatusContinue}
		switch {
		case typ == socket.Call && proc == procAuthList:
			send(reply, []byte{0, 0, 0, 1, 0, 0, 0, 0})
		case typ == socket.Call && proc == procDomainOpenConsole:
			send(reply, nil)
			send(stream, []byte("hello"))
		case typ == socket.Call:
			send(reply, nil)
		case typ == socket.Stream && string(payload) == "bye":
			stream[5] = socket.StatusOK
			send(stream, nil)
		case typ == socket.Stream && status == socket.StatusContinue:
			send(stream, bytes.ToUpper(payload))
		}
	}
}

func TestConsoleStream(t *testing.T) {
	ours, theirs := net.Pipe()
	got := make(chan string, 100)
	go fakeLibvirtd(t, theirs, got)
	dom := libvirt.Domain{Name: "vm1", ID: 3}
	c, err := dialConsole(context.Background(), pipeDialer{ours}, "qemu:///system", dom, uint32(libvirt.DomainConsoleForce))
	if err != nil {
		t.Fatal(err)
	}
	read := func(want string) {
		t.Helper()
		buf := make([]byte, len(want))
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != want {
			t.Fatalf("read %q, %v; want %q", buf, err, want)
		}
	}
	read("hello")
	if _, err := c.Write([]byte("typed")); err != nil {
		t.Fatal(err)
	}
	read("TYPED")
	if _, err := c.Write([]byte("bye")); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Read(make([]byte, 8)); n != 0 || err != io.EOF {
		t.Fatalf("after the stream ended: %d %v, want EOF", n, err)
	}
	if _, err := c.Write([]byte("late")); err == nil {
		t.Error("write after the stream ended succeeded")
	}
	c.Close()
	c.Close()
	var log []string
	for len(got) > 0 {
		log = append(log, <-got)
	}
	want := []string{
		`proc 66 type 0 status 0 ""`,
		`proc 1 type 0 status 0 "\x00\x00\x00\x01\x00\x00\x00\x0eqemu:///system\x00\x00\x00\x00\x00\x00"`,
		fmt.Sprintf("proc 201 type 0 status 0 %q", encodeOpenConsole(dom, uint32(libvirt.DomainConsoleForce))),
		`proc 201 type 3 status 2 "typed"`,
		`proc 201 type 3 status 2 "bye"`,
	}
	// Close's abort (type 3, status 1) may or may not reach a peer that has
	// already hung up; everything before it must be exactly this.
	if len(log) > len(want) {
		if log[len(want)] != `proc 201 type 3 status 1 ""` {
			t.Errorf("close sent %s, want a stream abort", log[len(want)])
		}
		log = log[:len(want)]
	}
	if diff := cmp.Diff(want, log); diff != "" {
		t.Errorf("packets (-want +got):\n%s", diff)
	}
}

func TestConsoleOpenRefused(t *testing.T) {
	ours, theirs := net.Pipe()
	go func() {
		defer theirs.Close()
		var hdr [28]byte
		for {
			if _, err := io.ReadFull(theirs, hdr[:]); err != nil {
				return
			}
			n := binary.BigEndian.Uint32(hdr[:])
			if _, err := io.ReadFull(theirs, make([]byte, n-28)); err != nil {
				return
			}
			proc, serial := binary.BigEndian.Uint32(hdr[12:]), binary.BigEndian.Uint32(hdr[20:])
			status, payload := uint32(socket.StatusOK), []byte{0, 0, 0, 0}
			if proc == procDomainOpenConsole {
				status = socket.StatusError
				payload = []byte{0, 0, 0, 55, 0, 0, 0, 10, 0, 0, 0, 1, 0, 0, 0, 3, 'o', 'f', 'f', 0}
			}
			b := binary.BigEndian.AppendUint32(nil, uint32(28+len(payload)))
			for _, v := range []uint32{remoteProgram, 1, proc, socket.Reply, serial, status} {
				b = binary.BigEndian.AppendUint32(b, v)
			}
			if _, err := theirs.Write(append(b, payload...)); err != nil {
				return
			}
		}
	}()
	_, err := dialConsole(context.Background(), pipeDialer{ours}, "qemu:///system", libvirt.Domain{Name: "vm1"}, 0)
	var lerr libvirt.Error
	if !errors.As(err, &lerr) || lerr.Code != uint32(libvirt.ErrOperationInvalid) {
		t.Fatalf("refused open: %v, want libvirt's error", err)
	}
}
