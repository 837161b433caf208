package virt

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sync"

	"github.com/digitalocean/go-libvirt"
	"github.com/digitalocean/go-libvirt/socket"

	"github.com/bmlab/bmlab/internal/machine"
)

// Consoles.
//
// go-libvirt's DomainOpenConsole cannot carry a console: it passes its stream
// helper no reader (requestStream(201, ..., nil, inStream)), so nothing typed
// ever reaches the guest, and it holds its caller until the stream ends with
// no way to abort it short of dropping the shared connection. OpenConsole
// therefore speaks the few calls a console needs itself, on a connection of
// its own, over go-libvirt's exported socket package: AUTH_LIST (and
// AUTH_POLKIT when asked), CONNECT_OPEN, DOMAIN_OPEN_CONSOLE; then input goes
// out as stream packets of that call, output comes in as the same, and Close
// aborts the stream and drops the connection, which makes libvirtd release
// the console. This works wherever the backend's URI reaches (a remote
// libvirtd too), unlike opening the domain's pty, and keeps libvirt's console
// ownership: VIR_DOMAIN_CONSOLE_FORCE takes a console over from whoever held
// it (a `virsh console`, or our own previous session).
//
// Wire format: libvirt's RPC protocol (https://libvirt.org/kbase/internals/rpc.html)
// and remote_protocol.x, in XDR (RFC 4506).

// Procedures and constants of remote_protocol.x.
const (
	remoteProgram         = 0x20008086 // REMOTE_PROGRAM
	procConnectOpen       = 1          // REMOTE_PROC_CONNECT_OPEN
	procAuthList          = 66         // REMOTE_PROC_AUTH_LIST
	procAuthPolkit        = 70         // REMOTE_PROC_AUTH_POLKIT
	procDomainOpenConsole = 201        // REMOTE_PROC_DOMAIN_OPEN_CONSOLE
	authPolkit            = 2          // REMOTE_AUTH_POLKIT
	// streamChunk keeps stream packets well under libvirt's payload limit
	// (VIR_NET_MESSAGE_LEGACY_PAYLOAD_MAX, 262120 bytes).
	streamChunk = 64 << 10
)

// ErrConsoleClosed is returned by a console's Read and Write after Close.
var ErrConsoleClosed = errors.New("console closed")

// errConsoleLost ends a console whose libvirt connection dropped.
var errConsoleLost = errors.New("libvirt connection of the console lost")

// OpenConsole connects to the first console of a running domain (its serial
// port) and returns it as a stream: reads return what the guest writes,
// writes are typed into it. The stream ends (io.EOF) when the domain stops.
// It takes the console over from any other holder. Close releases it and
// leaves the domain alone. An off domain is an ErrConflict.
func (b *Backend) OpenConsole(ctx context.Context, id string) (io.ReadWriteCloser, error) {
	e, err := b.running(id, "console")
	if err != nil {
		return nil, err
	}
	dialer, target, err := DialerFor(b.cfg.URI)
	if err != nil {
		return nil, err
	}
	c, err := dialConsole(ctx, dialer, target, e.dom, uint32(libvirt.DomainConsoleForce))
	if err != nil {
		return nil, b.wrap(err, "open the console of", e.m.Name)
	}
	return c, nil
}

// running returns the entry of a domain that runs (what is what is opened,
// for the error); an off one is an ErrConflict.
func (b *Backend) running(id, what string) (*entry, error) {
	b.mu.RLock()
	e, err := b.find(id)
	b.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	if e.m.Power == machine.PowerOff {
		return nil, fmt.Errorf("open the %s of %s: %w: the domain is off", what, e.m.Name, machine.ErrConflict)
	}
	return e, nil
}

// console is one console stream on a libvirt connection of its own.
type console struct {
	s  *socket.Socket
	pr *io.PipeReader
	pw *io.PipeWriter

	mu      sync.Mutex
	serial  int32 // of the last call; the console's stream uses its number
	pending map[int32]chan reply
	stream  int32 // serial of DOMAIN_OPEN_CONSOLE once it succeeded; 0 before
	ended   error // why the stream ended; nil while it runs

	closeOnce sync.Once
}

type reply struct {
	payload []byte
	err     error
}

// dialConsole opens a connection with d, says hello to libvirtd and opens
// the domain's console.
func dialConsole(ctx context.Context, d socket.Dialer, uri libvirt.ConnectURI, dom libvirt.Domain, flags uint32) (*console, error) {
	c := &console{pending: map[int32]chan reply{}}
	c.pr, c.pw = io.Pipe()
	c.s = socket.New(d, c)
	if err := c.s.Connect(); err != nil {
		return nil, fmt.Errorf("connect to libvirt: %w", err)
	}
	go func() {
		<-c.s.Disconnected()
		c.end(errConsoleLost)
	}()
	ok := false
	defer func() {
		if !ok {
			_ = c.s.Disconnect()
		}
	}()
	// libvirtd wants AUTH_LIST before CONNECT_OPEN, even when it asks for no
	// authentication (as go-libvirt's own handshake does).
	types, err := c.call(ctx, procAuthList, nil)
	if err != nil {
		return nil, fmt.Errorf("libvirt auth list: %w", err)
	}
	auths, err := decodeAuthList(types)
	if err != nil {
		return nil, err
	}
	for _, a := range auths {
		if a == authPolkit {
			if _, err := c.call(ctx, procAuthPolkit, nil); err != nil {
				return nil, fmt.Errorf("libvirt polkit authentication: %w", err)
			}
			break
		}
	}
	if _, err := c.call(ctx, procConnectOpen, encodeConnectOpen(string(uri))); err != nil {
		return nil, fmt.Errorf("libvirt connect open %s: %w", uri, err)
	}
	if _, err := c.call(ctx, procDomainOpenConsole, encodeOpenConsole(dom, flags)); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// call sends a request and waits for its reply (or ctx). The stream of
// DOMAIN_OPEN_CONSOLE is marked before the request goes out, so data that
// follows the reply at once is not lost.
func (c *console) call(ctx context.Context, proc uint32, args []byte) ([]byte, error) {
	ch := make(chan reply, 1)
	c.mu.Lock()
	c.serial++
	serial := c.serial
	c.pending[serial] = ch
	if proc == procDomainOpenConsole {
		c.stream = serial
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, serial)
		c.mu.Unlock()
	}()
	if err := c.s.SendPacket(serial, proc, remoteProgram, args, socket.Call, socket.StatusOK); err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		return r.payload, r.err
	case <-c.s.Disconnected():
		// A reply may have raced the disconnect.
		select {
		case r := <-ch:
			return r.payload, r.err
		default:
		}
		return nil, errConsoleLost
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Route implements socket.Router: replies go to their callers, stream
// packets of the console to the reader. Events and other programs are not
// ours (this connection registers for none).
func (c *console) Route(h *socket.Header, buf []byte) {
	if h.Program != remoteProgram {
		return
	}
	switch h.Type {
	case socket.Reply:
		c.mu.Lock()
		ch := c.pending[h.Serial]
		c.mu.Unlock()
		if ch == nil {
			return
		}
		r := reply{payload: buf}
		if h.Status == socket.StatusError {
			r.err = decodeError(buf)
		}
		select {
		case ch <- r:
		default: // a second reply to one call: not libvirt's protocol; drop it
		}
	case socket.Stream:
		c.mu.Lock()
		ours := h.Serial == c.stream
		c.mu.Unlock()
		if !ours {
			return
		}
		switch {
		case h.Status == socket.StatusError:
			c.end(decodeError(buf))
		case h.Status == socket.StatusOK || len(buf) == 0:
			// End of stream; libvirtd also ends some streams with an empty
			// "continue" packet (go-libvirt's processIncomingStream notes it).
			c.end(io.EOF)
		default:
			// Blocks until read; Close unblocks it.
			_, _ = c.pw.Write(buf)
		}
	}
}

// end records why the stream ended (the first reason wins) and lets the
// reader see it after the data before it.
func (c *console) end(why error) {
	c.mu.Lock()
	if c.ended == nil {
		c.ended = why
	}
	c.mu.Unlock()
	if why == io.EOF {
		_ = c.pw.Close()
		return
	}
	_ = c.pw.CloseWithError(why)
}

// Read returns console output.
func (c *console) Read(p []byte) (int, error) { return c.pr.Read(p) }

// Write types p into the console.
func (c *console) Write(p []byte) (int, error) {
	c.mu.Lock()
	serial, ended := c.stream, c.ended
	c.mu.Unlock()
	if ended != nil {
		if ended == io.EOF {
			ended = io.ErrClosedPipe
		}
		return 0, ended
	}
	n := 0
	for n < len(p) {
		k := min(len(p)-n, streamChunk)
		if err := c.s.SendPacket(serial, procDomainOpenConsole, remoteProgram, p[n:n+k], socket.Stream, socket.StatusContinue); err != nil {
			return n, fmt.Errorf("write to the console: %w", err)
		}
		n += k
	}
	return n, nil
}

// Close aborts the stream (virStreamAbort's packet) and drops the
// connection; libvirtd then releases the console. The domain is not
// touched. Safe to call more than once.
func (c *console) Close() error {
	c.closeOnce.Do(func() {
		c.end(ErrConsoleClosed)
		_ = c.pr.CloseWithError(ErrConsoleClosed) // unblocks a Route stuck in Write
		c.mu.Lock()
		serial := c.stream
		c.mu.Unlock()
		if serial != 0 {
			_ = c.s.SendPacket(serial, procDomainOpenConsole, remoteProgram, nil, socket.Stream, socket.StatusError)
		}
		_ = c.s.Disconnect()
	})
	return nil
}

// XDR (RFC 4506) for the few messages above.

func xdrUint32(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }

func xdrString(b []byte, s string) []byte {
	b = xdrUint32(b, uint32(len(s)))
	b = append(b, s...)
	for i := len(s); i%4 != 0; i++ {
		b = append(b, 0)
	}
	return b
}

// encodeConnectOpen: remote_connect_open_args { remote_string name; unsigned int flags; }.
func encodeConnectOpen(uri string) []byte {
	b := xdrUint32(nil, 1) // remote_string is optional: present
	b = xdrString(b, uri)
	return xdrUint32(b, 0)
}

// encodeOpenConsole: remote_domain_open_console_args { remote_nonnull_domain
// dom; remote_string dev_name; unsigned int flags; }, with no device name
// (the domain's first console).
func encodeOpenConsole(dom libvirt.Domain, flags uint32) []byte {
	b := xdrString(nil, dom.Name)
	b = append(b, dom.UUID[:]...)
	b = xdrUint32(b, uint32(dom.ID))
	b = xdrUint32(b, 0) // dev_name absent
	return xdrUint32(b, flags)
}

// decodeAuthList: remote_auth_list_ret { remote_auth_type types<>; }.
func decodeAuthList(b []byte) ([]uint32, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("libvirt auth list: want at least 4 bytes, got %d", len(b))
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(len(b)) != 4+4*uint64(n) {
		return nil, fmt.Errorf("libvirt auth list of %d types: want %d bytes, got %d", n, 4+4*uint64(n), len(b))
	}
	out := make([]uint32, n)
	for i := range out {
		out[i] = binary.BigEndian.Uint32(b[4+4*i:])
	}
	return out, nil
}

// decodeError reads the code and message of a remote_error { int code; int
// domain; remote_string message; ... } as a libvirt.Error, so that callers
// can tell "no domain" from "not running".
func decodeError(b []byte) error {
	if len(b) < 12 {
		return fmt.Errorf("libvirt error: want at least 12 bytes, got %d", len(b))
	}
	e := libvirt.Error{Code: binary.BigEndian.Uint32(b)}
	if binary.BigEndian.Uint32(b[8:]) != 0 && len(b) >= 16 {
		n := binary.BigEndian.Uint32(b[12:])
		if uint64(len(b)) >= 16+uint64(n) {
			e.Message = string(b[16 : 16+n])
		}
	}
	if e.Message == "" {
		e.Message = fmt.Sprintf("libvirt error %d", e.Code)
	}
	return e
}

// ConsoleLog implements machine.ConsoleLogger: the log file libvirt writes
// the domain's serial output to (<log file=...> on its first serial port),
// when this backend's libvirtd runs on this host (the file is libvirtd's,
// not reachable over a remote URI).
func (b *Backend) ConsoleLog(id string) (string, error) {
	if u, err := url.Parse(b.cfg.URI); b.cfg.URI != "" && (err != nil || u.Host != "") {
		return "", fmt.Errorf("%w: the serial log of a domain on %s is on that host", machine.ErrNotFound, b.cfg.URI)
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	e, err := b.find(id)
	if err != nil {
		return "", err
	}
	if e.serialLog == "" {
		return "", fmt.Errorf("%w: %s's serial port has no log file", machine.ErrNotFound, e.m.Name)
	}
	return e.serialLog, nil
}
