package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/bmlab/bmlab/internal/ipmi/wire"
)

// KCS plays qemu's ipmi-bmc-extern on a BMC's in-band socket: it connects
// as qemu does, announces the capabilities qemu 7.2 announces, sends the
// requests a guest would write to its KCS interface, one at a time, and
// keeps the commands the BMC sends back (attention, interrupt on or off).
// Tests and load tools use it where no guest runs.
type KCS struct {
	conn net.Conn
	r    *wire.VMReader
	seq  uint8

	mu   sync.Mutex
	cmds []wire.VMCommand // commands the BMC sent, oldest first
	resp chan wire.VMResponse
	err  error
	done chan struct{}
}

// QEMUCapabilities is what qemu 7.2 announces (wire.VMCap*).
const QEMUCapabilities = 0x3f

// DialKCS connects to the in-band socket at path and says hello as qemu
// does: protocol version, then capabilities.
func DialKCS(ctx context.Context, path string, caps byte) (*KCS, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	k := &KCS{conn: c, r: wire.NewVMReader(bufio.NewReaderSize(c, 512)), resp: make(chan wire.VMResponse, 1), done: make(chan struct{})}
	hello := wire.AppendVMCommand(nil, wire.VMCmdVersion, wire.VMProtocolVersion)
	hello = wire.AppendVMCommand(hello, wire.VMCmdCapabilities, caps)
	if _, err := c.Write(hello); err != nil {
		c.Close()
		return nil, err
	}
	go k.read()
	return k, nil
}

func (k *KCS) read() {
	defer close(k.done)
	for {
		f, err := k.r.Next()
		if errors.Is(err, wire.ErrMalformed) {
			continue
		}
		if err != nil {
			k.mu.Lock()
			k.err = err
			k.mu.Unlock()
			return
		}
		if f.Command {
			k.mu.Lock()
			k.cmds = append(k.cmds, wire.VMCommand(f.Data[0]))
			k.mu.Unlock()
			continue
		}
		r, err := wire.DecodeVMResponse(f.Data)
		if err != nil {
			continue
		}
		r.Data = append([]byte(nil), r.Data...)
		select {
		case k.resp <- r:
		default: // an answer nobody waits for
		}
	}
}

// Do sends one request and waits for its answer, at most 4 s as qemu does.
func (k *KCS) Do(netFn wire.NetFn, cmd uint8, data ...byte) (wire.CompletionCode, []byte, error) {
	k.seq++
	req := wire.VMRequest{VMHeader: wire.VMHeader{Seq: k.seq, NetFn: netFn, Cmd: cmd}, Data: data}
	if _, err := k.conn.Write(req.AppendRequest(nil)); err != nil {
		return 0, nil, err
	}
	t := time.NewTimer(4 * time.Second)
	defer t.Stop()
	for {
		select {
		case r := <-k.resp:
			if r.Seq != req.Seq || r.Cmd != cmd || r.NetFn != netFn|1 {
				continue // a late answer to an earlier request
			}
			return r.Code, r.Data, nil
		case <-k.done:
			return 0, nil, fmt.Errorf("in-band connection ended: %w", k.Err())
		case <-t.C:
			return wire.CodeTimeout, nil, nil // what qemu answers the guest
		}
	}
}

// Send writes a command to the BMC (qemu's reset, say).
func (k *KCS) Send(c wire.VMCommand, args ...byte) error {
	_, err := k.conn.Write(wire.AppendVMCommand(nil, c, args...))
	return err
}

// Commands returns the commands the BMC sent so far.
func (k *KCS) Commands() []wire.VMCommand {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]wire.VMCommand(nil), k.cmds...)
}

// Err is why the connection ended; nil while it lasts.
func (k *KCS) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.err
}

// Done is closed when the BMC ends the connection.
func (k *KCS) Done() <-chan struct{} { return k.done }

// Conn is the connection, for writing what qemu never would.
func (k *KCS) Conn() net.Conn { return k.conn }

// Close ends the connection.
func (k *KCS) Close() error { return k.conn.Close() }
