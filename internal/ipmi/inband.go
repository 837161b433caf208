package ipmi

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/ipmi/wire"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/qemuaccess"
)

// The in-band face: a machine's system interface, the KCS its OS reaches
// as /dev/ipmi0. qemu's ipmi-bmc-extern device hands what the guest writes
// to its KCS (isa-ipmi-kcs) to a chardev; the machine's chardev is a unix
// socket this BMC listens on (machine.Inventory.IPMISocket), one per
// machine, so a guest reaches its own BMC and no other. The bytes are the
// VM protocol (wire/vm.go). A request runs through the same command
// handlers as a LAN session's, on the same BMC state, as the system
// interface: channel 0Fh, no session, no privilege check (every command at
// the ADMINISTRATOR level), bound to its own machine for accounts
// (users.go). The "Local" commands of the system interface (message flags,
// the event message buffer) are answered here only (sysif.go).
//
// qemu connects when the machine starts and again a second after the
// socket went away (its chardev's reconnect=1); a new connection replaces
// the old one. What qemu tells the BMC: its capabilities, and a reset of
// the machine (the system interface's state starts over, sysif.go). What
// the BMC tells qemu: the attention bit (with an interrupt when the OS
// enabled it), and the interface's interrupt on or off as the OS sets the
// BMC global enables. Power commands go to the machine model, as over
// LAN, not to qemu's power commands: one path for every face (the SEL,
// the Once override spent, Redfish's PowerState).
//
// Each machine's requests are answered at most kcsRate a second (a burst
// of kcsBurst at once): a guest that floods its interface waits for its
// answers, one at a time as KCS goes, and no other machine does.

// Defaults of WithInbandRate: well above what a client asks (ipmitool's
// `sdr list` is about 20 requests, `sel list` two a record), far below
// what one guest could make the BMC spend.
const (
	inbandRate  = 200
	inbandBurst = 100
)

// inbandWriteWithin bounds a write to qemu: a peer that reads nothing
// loses its connection.
const inbandWriteWithin = 2 * time.Second

type inband struct {
	b    *bmc
	path string
	ln   *net.UnixListener
	done chan struct{} // the accept loop ended
	wg   sync.WaitGroup

	mu     sync.Mutex
	conn   net.Conn
	caps   byte
	attn   int8 // the attention state last sent on conn: -1 none yet
	tokens float64
	last   time.Time

	wmu sync.Mutex // one frame at a time on conn
}

// listenInband listens on the unix socket at path, made 0600 and given to
// user owner (-1: kept). A socket file left by a daemon that died is
// replaced; one another process listens on is not, nor is any other file.
func listenInband(path string, owner int) (*net.UnixListener, error) {
	if _, err := qemuaccess.MkdirTraversable(filepath.Dir(path)); err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("%s exists and is not a socket: remove it, or give the machine another in-band socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("%s: another process serves it (a second vbmcd for the same machine?)", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove the stale socket %s: %w", path, err)
		}
	}
	// The socket is made 0600 from the start (umask), so nobody connects
	// before its owner is set.
	old := syscall.Umask(0o177)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	syscall.Umask(old)
	if err != nil {
		return nil, err
	}
	if owner >= 0 {
		if err := os.Lchown(path, owner, -1); err != nil {
			ln.Close()
			return nil, fmt.Errorf("give %s to uid %d (qemu's user): %w", path, owner, err)
		}
	}
	return ln, nil
}

func newInband(b *bmc, path string, ln *net.UnixListener) *inband {
	return &inband{b: b, path: path, ln: ln, done: make(chan struct{}), attn: -1, tokens: b.cfg.kcsBurst, last: time.Now()}
}

// run accepts qemu's connections until the listener closes.
func (k *inband) run() {
	defer close(k.done)
	for {
		c, err := k.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			k.b.log.Warn("in-band IPMI accept", zap.Error(err))
			time.Sleep(100 * time.Millisecond)
			continue
		}
		k.mu.Lock()
		old := k.conn
		k.conn, k.caps, k.attn = c, 0, -1
		k.mu.Unlock()
		if old != nil {
			old.Close()
		}
		k.b.log.Debug("in-band IPMI connected", zap.String("socket", k.path))
		k.wg.Add(1)
		go k.serve(c)
	}
}

// close stops listening, removes the socket and ends the connection.
func (k *inband) close() {
	_ = k.ln.Close()
	<-k.done
	k.hangUp()
	k.wg.Wait()
}

// hangUp ends the connection; qemu connects again.
func (k *inband) hangUp() {
	k.mu.Lock()
	c := k.conn
	k.conn = nil
	k.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// serve answers one connection's requests, in order.
func (k *inband) serve(c net.Conn) {
	defer k.wg.Done()
	defer func() {
		k.mu.Lock()
		if k.conn == c {
			k.conn = nil
		}
		k.mu.Unlock()
		c.Close()
	}()
	// As OpenIPMI's BMC does on a connection: the protocol version.
	if !k.send(c, wire.AppendVMCommand(nil, wire.VMCmdVersion, wire.VMProtocolVersion)) {
		return
	}
	r := wire.NewVMReader(bufio.NewReaderSize(c, 512))
	for {
		f, err := r.Next()
		if errors.Is(err, wire.ErrMalformed) {
			k.b.log.Debug("in-band IPMI frame dropped", zap.Error(err))
			continue
		}
		if err != nil {
			return
		}
		if f.Command {
			k.vmCommand(c, f.Data)
			continue
		}
		req, err := wire.DecodeVMRequest(f.Data)
		if err != nil {
			// qemu fails the guest's request with a timeout (C3h) after 4 s.
			k.b.log.Debug("in-band IPMI request dropped", zap.Error(err))
			continue
		}
		if in := k.b.svc.InbandFault(k.b.id); in != (machine.Injected{}) {
			time.Sleep(in.Delay)
			if in.Down {
				continue
			}
		}
		k.pace()
		code, data := k.b.command(&sessRef{system: true}, wire.Request{
			RsAddr: wire.BMCSlaveAddr, NetFn: req.NetFn, RsLUN: req.LUN, RqAddr: genSystem, Cmd: req.Cmd, Data: req.Data,
		})
		k.b.cfg.metrics.IPMI(uint8(req.NetFn), req.Cmd, uint8(code))
		if !k.send(c, req.AppendResponse(nil, code, data)) {
			return
		}
		k.b.afterReply()
	}
}

// vmCommand takes a command qemu sends.
func (k *inband) vmCommand(c net.Conn, d []byte) {
	switch wire.VMCommand(d[0]) {
	case wire.VMCmdVersion:
		if len(d) < 2 || d[1] != wire.VMProtocolVersion {
			k.b.log.Warn("in-band IPMI: qemu speaks another VM protocol version", zap.Binary("command", d))
		}
	case wire.VMCmdCapabilities:
		if len(d) < 2 {
			return
		}
		k.mu.Lock()
		if k.conn == c {
			k.caps = d[1]
		}
		k.mu.Unlock()
		// The new connection learns what the old one knew.
		k.b.mu.Lock()
		on := k.b.enables&enableRecvIRQ != 0
		k.b.mu.Unlock()
		if on {
			k.irq(true)
		}
		k.b.attention()
	case wire.VMCmdReset:
		k.b.systemReset()
	default:
		k.b.log.Debug("in-band IPMI: unknown command from qemu", zap.Binary("command", d))
	}
}

// pace takes a token for one request, waiting for it when the machine's
// requests come faster than their rate.
func (k *inband) pace() {
	cfg := k.b.cfg
	now := time.Now()
	k.mu.Lock()
	k.tokens = min(cfg.kcsBurst, k.tokens+now.Sub(k.last).Seconds()*cfg.kcsRate) - 1
	k.last = now
	wait := time.Duration(0)
	if k.tokens < 0 {
		wait = time.Duration(-k.tokens / cfg.kcsRate * float64(time.Second))
	}
	k.mu.Unlock()
	if wait > 0 {
		if cfg.throttled != nil {
			cfg.throttled.Refused(k.b.id, "in-band IPMI request slowed", zap.String("socket", k.path), zap.Duration("wait", wait))
		}
		time.Sleep(wait)
	}
}

// send writes one frame; false when the connection is gone.
func (k *inband) send(c net.Conn, frame []byte) bool {
	k.wmu.Lock()
	defer k.wmu.Unlock()
	_ = c.SetWriteDeadline(time.Now().Add(inbandWriteWithin))
	if _, err := c.Write(frame); err != nil {
		k.b.log.Debug("in-band IPMI write", zap.Error(err))
		c.Close()
		return false
	}
	return true
}

// attention sets the KCS attention bit (with the interrupt, when irq) or
// clears it, when qemu can and the bit is not already so.
func (k *inband) attention(on, irq bool) {
	k.mu.Lock()
	c, caps := k.conn, k.caps
	want := int8(0)
	if on {
		want = 1
	}
	if c == nil || caps&wire.VMCapAttn == 0 || (k.attn == want && !(on && irq)) {
		k.mu.Unlock()
		return
	}
	k.attn = want
	k.mu.Unlock()
	cmd := wire.VMCmdNoAttn
	switch {
	case on && irq && caps&wire.VMCapIRQ != 0:
		cmd = wire.VMCmdAttnIRQ
	case on:
		cmd = wire.VMCmdAttn
	}
	k.send(c, wire.AppendVMCommand(nil, cmd))
}

// irq turns the KCS interface's interrupt on or off, when qemu can.
func (k *inband) irq(on bool) {
	k.mu.Lock()
	c, caps := k.conn, k.caps
	k.mu.Unlock()
	if c == nil || caps&wire.VMCapIRQ == 0 {
		return
	}
	cmd := wire.VMCmdDisableIRQ
	if on {
		cmd = wire.VMCmdEnableIRQ
	}
	k.send(c, wire.AppendVMCommand(nil, cmd))
}

// kcsOf returns the in-band face; nil when there is none.
func (b *bmc) kcsOf() *inband {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.kcs
}

// socketOf is where machine mc's in-band face listens; "" for none.
func (m *Manager) socketOf(mc *machine.Machine) string {
	if m.cfg.kcsOff {
		return ""
	}
	return mc.IPMISocket
}

// ensureInband starts, moves or stops b's in-band face.
func (m *Manager) ensureInband(b *bmc, mc *machine.Machine, path string) {
	if cur := b.kcsOf(); cur != nil {
		if cur.path == path {
			return
		}
		b.mu.Lock()
		b.kcs = nil
		b.mu.Unlock()
		cur.close()
		m.log.Info("in-band IPMI stopped", zap.String("machine", mc.Name), zap.String("socket", cur.path))
	}
	if path == "" {
		return
	}
	ln, err := listenInband(path, m.cfg.kcsOwner)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		if m.failedKCS[mc.ID] != path {
			m.log.Error("in-band IPMI cannot listen", zap.String("machine", mc.Name), zap.String("socket", path), zap.Error(err))
		}
		m.failedKCS[mc.ID] = path
		return
	}
	delete(m.failedKCS, mc.ID)
	if !m.running || m.bmcs[mc.ID] != b {
		ln.Close()
		return
	}
	k := newInband(b, path, ln)
	b.mu.Lock()
	b.kcs = k
	b.mu.Unlock()
	go k.run()
	m.log.Info("in-band IPMI listening", zap.String("machine", mc.Name), zap.String("socket", path))
}
