package virt_test

import (
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virt"
	"github.com/bmlab/bmlab/internal/virttest"
)

// cutProxy forwards a unix socket to libvirtd's and can cut every
// connection, as a libvirtd restart or a broken socket would.
type cutProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	down  bool // refuse new connections
}

func newCutProxy(t *testing.T, target string) (*cutProxy, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "libvirt-proxy.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			down := p.down
			p.mu.Unlock()
			if down {
				c.Close()
				continue
			}
			u, err := net.Dial("unix", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(u, c); u.Close() }()
			go func() { _, _ = io.Copy(c, u); c.Close() }()
		}
	}()
	t.Cleanup(func() { ln.Close(); p.cut() })
	return p, path
}

func (p *cutProxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestReconnectAndResync: when the connection drops, the backend
// reconnects by itself, and what changed meanwhile is in its view after.
func TestReconnectAndResync(t *testing.T) {
	lab := virttest.New(t, "vt-recon-")
	vm := lab.NewVM(t, "a", virttest.VMOptions{NoCD: true, DiskMarker: true})
	proxy, sock := newCutProxy(t, testenv.LibvirtSocket)

	be, err := virt.New(virt.Config{URI: "qemu+unix:///system?socket=" + sock, Domains: []string{"vt-recon-*"}, Keepalive: 500 * time.Millisecond}, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := be.Connect(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if m, err := be.Get(vm.ID); err != nil || m.Power != machine.PowerOff {
		t.Fatalf("before the cut: %v %v", m, err)
	}

	connects := be.Conn().Connects()
	proxy.setDown(true)
	proxy.cut()
	if !testenv.WaitFor(5*time.Second, func() bool { return !be.Conn().Connected() }) {
		t.Fatal("the backend did not notice the dropped connection")
	}
	// While it is down: reads get the last view marked unavailable,
	// operations fail as unavailable, and the VM is started behind its
	// back.
	if m, err := be.Get(vm.ID); err != nil || m.Unavailable == "" || m.Power != machine.PowerOff {
		t.Errorf("read while disconnected: %+v %v, want the last view (Off) marked unavailable", m, err)
	}
	if err := be.Start(ctx, vm.ID); !errors.Is(err, machine.ErrUnavailable) {
		t.Errorf("an operation while disconnected: %v, want ErrUnavailable", err)
	}
	if err := lab.Service.Reset(ctx, vm.ID, machine.ResetOn); err != nil {
		t.Fatal(err)
	}

	proxy.setDown(false)
	if !testenv.WaitFor(10*time.Second, func() bool { return be.Conn().Connected() && be.Conn().Connects() > connects }) {
		t.Fatal("the backend did not reconnect")
	}
	if !testenv.WaitFor(10*time.Second, func() bool { m, err := be.Get(vm.ID); return err == nil && m.Power == machine.PowerOn }) {
		t.Fatal("after reconnecting the backend does not see the VM that was started meanwhile")
	}
}
