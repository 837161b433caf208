package kubevirt

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"

	gwebsocket "github.com/gorilla/websocket"
	"k8s.io/client-go/transport/websocket"

	"github.com/bmlab/bmlab/internal/machine"
)

// consoleProtocol is the WebSocket subprotocol of KubeVirt's console
// subresource: raw bytes both ways in binary messages.
const consoleProtocol = "plain.kubevirt.io"

// OpenConsole implements ipmi.ConsoleOpener: the instance's serial console
// through KubeVirt's console subresource (a WebSocket). Reads return what
// the guest writes, writes are typed into it; the stream ends when the
// instance goes. A machine that is not on is an ErrConflict.
func (b *Backend) OpenConsole(ctx context.Context, id string) (io.ReadWriteCloser, error) {
	vm, _, m, err := b.current(id)
	if err != nil {
		return nil, err
	}
	if m.Power != machine.PowerOn {
		return nil, fmt.Errorf("open the console of %s: %w: it is not on", m.Name, machine.ErrConflict)
	}
	rt, holder, err := websocket.RoundTripperFor(b.cfg.Rest)
	if err != nil {
		return nil, err
	}
	u := b.sub.Get().Namespace(vm.Namespace).Resource("virtualmachineinstances").Name(vm.Name).SubResource("console").URL()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	conn, err := websocket.Negotiate(rt, holder, req, consoleProtocol)
	if err != nil {
		return nil, apiError("open the console of "+m.Name, err)
	}
	return &wsConsole{conn: conn}, nil
}

// wsConsole is a console WebSocket as a byte stream.
type wsConsole struct {
	conn *gwebsocket.Conn
	rmu  sync.Mutex
	buf  bytes.Buffer // the rest of the last message read
	wmu  sync.Mutex
}

func (c *wsConsole) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	for c.buf.Len() == 0 {
		_, msg, err := c.conn.ReadMessage()
		if err != nil {
			if gwebsocket.IsCloseError(err, gwebsocket.CloseNormalClosure) {
				return 0, io.EOF
			}
			return 0, err
		}
		c.buf.Write(msg)
	}
	return c.buf.Read(p)
}

func (c *wsConsole) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.conn.WriteMessage(gwebsocket.BinaryMessage, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (c *wsConsole) Close() error { return c.conn.Close() }
