package ipmi

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"time"

	"github.com/bmlab/bmlab/internal/machine"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/ipmi/wire"
)

// ConsoleOpener is a serial console opener (machine.ConsoleOpener); SOL
// uses the model's shared one (machine.Service.Consoles), which a web
// console page on the same machine reads too.
type ConsoleOpener = machine.ConsoleOpener

// SOL payload limits and timing, as announced by Activate Payload and the
// SOL configuration parameters (IPMI v2.0 §24.1, §26.3).
const (
	solMaxPayload = 200
	solRetries    = 7
	solRetryEvery = 500 * time.Millisecond
	solQueueMax   = 64 << 10
)

const payloadTypeSOL = 0x01

// solSession is the one SOL payload instance of a BMC: console output is
// queued and sent one packet at a time until acknowledged (IPMI v2.0
// §15.10), console input is written through and acknowledged.
type solSession struct {
	b     *bmc
	owner uint32
	user  string // the owner session's user: its other sessions may end it
	open  func(ctx context.Context) (io.ReadWriteCloser, error)

	mu       sync.Mutex
	con      io.ReadWriteCloser
	queue    []byte
	inflight []byte
	inSeq    uint8 // sequence number of the packet in flight
	nextSeq  uint8
	tries    int
	sentAt   time.Time
	lastIn   uint8

	kick     chan struct{}
	quit     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

func newSOL(b *bmc, owner uint32, opener ConsoleOpener) *solSession {
	s := &solSession{
		b: b, owner: owner, nextSeq: 1,
		open: func(ctx context.Context) (io.ReadWriteCloser, error) { return opener.OpenConsole(ctx, b.id) },
		kick: make(chan struct{}, 1),
		quit: make(chan struct{}),
	}
	s.wg.Add(2)
	go s.reader()
	go s.sender()
	return s
}

// stop ends the payload; it is safe to call more than once.
func (s *solSession) stop() {
	s.stopOnce.Do(func() {
		close(s.quit)
		s.mu.Lock()
		if s.con != nil {
			_ = s.con.Close()
		}
		s.mu.Unlock()
	})
	s.wg.Wait()
}

func (s *solSession) stopped() bool {
	select {
	case <-s.quit:
		return true
	default:
		return false
	}
}

// reader copies console output into the queue, reopening the console when
// it ends (the machine stopped) until the payload is deactivated.
func (s *solSession) reader() {
	defer s.wg.Done()
	// A machine that is off has no console yet. Wake up when this machine
	// changes (it starts), not only on the retry timer: a fast boot prints
	// its first lines within a few hundred milliseconds of the start.
	events, cancel := s.b.svc.Backend().Subscribe()
	defer cancel()
	buf := make([]byte, 1024)
	for !s.stopped() {
		ctx, cancel := context.WithTimeout(s.b.ctx, 5*time.Second)
		con, err := s.open(ctx)
		cancel()
		if err != nil {
			if !s.waitChange(events) {
				return
			}
			continue
		}
		s.mu.Lock()
		if s.stopped() {
			s.mu.Unlock()
			_ = con.Close()
			return
		}
		s.con = con
		s.mu.Unlock()
		for {
			n, err := con.Read(buf)
			if n > 0 {
				s.mu.Lock()
				s.queue = append(s.queue, buf[:n]...)
				if over := len(s.queue) - solQueueMax; over > 0 {
					s.queue = s.queue[over:]
				}
				s.mu.Unlock()
				select {
				case s.kick <- struct{}{}:
				default:
				}
			}
			if err != nil {
				break
			}
		}
		s.mu.Lock()
		s.con = nil
		s.mu.Unlock()
		_ = con.Close()
	}
}

// waitChange waits until this machine changes or the retry interval
// passes; false when the payload is deactivated.
func (s *solSession) waitChange(events <-chan machine.Event) bool {
	return machine.WaitChange(context.Background(), s.quit, events, s.b.id, solRetryEvery)
}

// sender sends queued output, one unacknowledged packet at a time, and
// retransmits it until acknowledged or out of retries.
func (s *solSession) sender() {
	defer s.wg.Done()
	t := time.NewTicker(solRetryEvery / 2)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-s.kick:
		case <-t.C:
		}
		s.mu.Lock()
		now := time.Now()
		if s.inflight != nil && now.Sub(s.sentAt) >= solRetryEvery {
			if s.tries >= solRetries {
				s.inflight = nil // the console is gone or deaf; move on
			} else {
				s.tries++
				s.sentAt = now
				s.send(wire.SOL{Seq: s.inSeq, Data: s.inflight})
			}
		}
		if s.inflight == nil && len(s.queue) > 0 {
			n := min(len(s.queue), solMaxPayload)
			s.inflight = append([]byte(nil), s.queue[:n]...)
			s.queue = s.queue[n:]
			s.inSeq = s.nextSeq
			s.nextSeq = s.nextSeq%15 + 1
			s.tries = 0
			s.sentAt = now
			s.send(wire.SOL{Seq: s.inSeq, Data: s.inflight})
		}
		s.mu.Unlock()
	}
}

// send seals and sends a SOL packet to the owner session's address.
// Callers hold s.mu (never b.mu).
func (s *solSession) send(p wire.SOL) {
	s.b.mu.Lock()
	ss := s.b.sessions[s.owner]
	var to net.Addr
	if ss != nil {
		to = ss.addr
	}
	s.b.mu.Unlock()
	if to == nil {
		return
	}
	if out := s.b.seal(s.owner, wire.PayloadSOL, p.Append(nil)); out != nil {
		if l := s.b.lanOf(); l != nil {
			_, _ = l.conn.WriteTo(out, to)
		}
	}
}

// inbound handles a SOL packet from the console and returns the ACK to send.
func (s *solSession) inbound(p wire.SOL) []byte {
	s.mu.Lock()
	if p.AckSeq != 0 && s.inflight != nil && p.AckSeq == s.inSeq {
		if p.Status&wire.SOLNack != 0 {
			s.sentAt = time.Time{} // resend at the next tick
		} else {
			acc := int(p.Accepted)
			if acc == 0 || acc >= len(s.inflight) {
				s.inflight = nil
			} else {
				// Partly accepted: the rest goes again, under a new number.
				s.queue = append(append([]byte(nil), s.inflight[acc:]...), s.queue...)
				s.inflight = nil
			}
			select {
			case s.kick <- struct{}{}:
			default:
			}
		}
	}
	if p.Seq == 0 {
		s.mu.Unlock()
		return nil
	}
	dup := p.Seq == s.lastIn
	con := s.con
	s.lastIn = p.Seq
	s.mu.Unlock()
	if !dup && len(p.Data) > 0 && con != nil {
		if _, err := con.Write(p.Data); err != nil {
			s.b.log.Debug("sol write", zap.Error(err))
		}
	}
	return wire.SOL{AckSeq: p.Seq, Accepted: byte(len(p.Data))}.Append(nil)
}

func (b *bmc) solInbound(id uint32, payload []byte) []byte {
	p, err := wire.DecodeSOL(payload)
	if err != nil {
		return nil
	}
	b.mu.Lock()
	sol := b.sol
	b.mu.Unlock()
	if sol == nil || sol.owner != id {
		return nil
	}
	if ack := sol.inbound(p); ack != nil {
		return b.seal(id, wire.PayloadSOL, ack)
	}
	return nil
}

func (b *bmc) localPort() uint16 {
	if l := b.lanOf(); l != nil {
		if a, ok := l.conn.LocalAddr().(*net.UDPAddr); ok {
			return uint16(a.Port)
		}
	}
	return 623
}

// checkSOLPayload checks the request data of Activate and Deactivate
// Payload (IPMI v2.0 §24.1, §24.2: payload type, instance and four bytes
// of auxiliary data) name SOL instance 1, from a session.
func checkSOLPayload(s *sessRef, d []byte) wire.CompletionCode {
	if d[0]&0x3f != payloadTypeSOL || d[1]&0x0f != 1 {
		return wire.CodeInvalidDataField
	}
	if s == nil {
		return wire.CodeInsufficientPriv
	}
	return wire.CodeOK
}

// activatePayload (IPMI v2.0 §24.1) starts SOL, instance 1, for the calling
// session. An interactive console needs Operator or above (the command
// table says so; a User session gets 0xD4, insufficient privilege), as SOL
// configuration parameter 2 announces.
func (b *bmc) activatePayload(s *sessRef, d []byte) (wire.CompletionCode, []byte) {
	if cc := checkSOLPayload(s, d); cc != wire.CodeOK {
		return cc, nil
	}
	// The machine's shared console: a web console page on it keeps
	// running beside this session.
	opener := b.svc.Consoles()
	if opener == nil {
		return 0x81, nil // payload type disabled: the backend has no consoles
	}
	b.mu.Lock()
	if b.sol != nil {
		b.mu.Unlock()
		return 0x80, nil // payload already active on another session
	}
	b.sol = newSOL(b, s.id, opener)
	if ss := b.sessions[s.id]; ss != nil {
		b.sol.user = ss.user
	}
	b.mu.Unlock()
	out := make([]byte, 0, 12)
	out = append(out, 0, 0, 0, 0) // auxiliary data
	out = binary.LittleEndian.AppendUint16(out, solMaxPayload)
	out = binary.LittleEndian.AppendUint16(out, solMaxPayload)
	out = binary.LittleEndian.AppendUint16(out, b.localPort())
	out = append(out, 0xff, 0xff) // no VLAN
	return wire.CodeOK, out
}

// deactivatePayload (IPMI v2.0 §24.2) from a session of the user that holds
// the payload (so `sol deactivate` frees one left by a dead console) or of
// an Administrator; anyone else gets 0xD4, insufficient privilege.
func (b *bmc) deactivatePayload(s *sessRef, d []byte) (wire.CompletionCode, []byte) {
	if cc := checkSOLPayload(s, d); cc != wire.CodeOK {
		return cc, nil
	}
	b.mu.Lock()
	sol, ss := b.sol, b.sessions[s.id]
	if sol != nil && (ss == nil || (ss.priv < privAdmin && ss.user != sol.user)) {
		b.mu.Unlock()
		return wire.CodeInsufficientPriv, nil
	}
	b.sol = nil
	b.mu.Unlock()
	if sol == nil {
		return 0x80, nil // payload already deactivated
	}
	// Tell the console that held it (IPMI v2.0 §15.9, "SOL deactivating").
	sol.mu.Lock()
	sol.send(wire.SOL{Status: wire.SOLDeactivating})
	sol.mu.Unlock()
	go sol.stop()
	return wire.CodeOK, nil
}

// getPayloadStatus (IPMI v2.0 §24.4).
func (b *bmc) getPayloadStatus(_ *sessRef, d []byte) (wire.CompletionCode, []byte) {
	if d[0]&0x3f != payloadTypeSOL {
		return wire.CodeInvalidDataField, nil
	}
	b.mu.Lock()
	active := b.sol != nil
	b.mu.Unlock()
	out := []byte{0x01, 0x00, 0x00}
	if active {
		out[1] = 0x01
	}
	return wire.CodeOK, out
}

// SOL configuration parameters (IPMI v2.0 §26.3, Table 26-5).
func (b *bmc) getSOLConfig(_ *sessRef, d []byte) (wire.CompletionCode, []byte) {
	if !validChannel(d[0]) {
		return wire.CodeInvalidDataField, nil
	}
	out := []byte{0x11} // parameter revision 1.1
	if d[0]&0x80 != 0 {
		return wire.CodeOK, out
	}
	_, canSOL := b.svc.Backend().(ConsoleOpener)
	switch d[1] {
	case 0: // set in progress
		out = append(out, 0x00)
	case 1: // SOL enable
		if canSOL {
			out = append(out, 0x01)
		} else {
			out = append(out, 0x00)
		}
	case 2: // authentication: operator privilege, encryption and integrity as the session has them
		out = append(out, privOperator)
	case 3: // character accumulate interval (5 ms units) and send threshold
		out = append(out, 0x0c, 0x60)
	case 4: // retry count and interval (10 ms units)
		out = append(out, solRetries, byte(solRetryEvery/(10*time.Millisecond)))
	case 5, 6: // bit rate: 115.2 kbps
		out = append(out, 0x0a)
	case 7: // payload channel
		out = append(out, lanChannel)
	case 8: // payload port
		out = binary.LittleEndian.AppendUint16(out, b.localPort())
	default:
		return 0x80, nil // parameter not supported
	}
	return wire.CodeOK, out
}

func (b *bmc) setSOLConfig(_ *sessRef, d []byte) (wire.CompletionCode, []byte) {
	switch d[1] {
	case 0:
		return wire.CodeOK, nil
	case 1, 2, 3, 4, 5, 6, 7, 8:
		return 0x82, nil // attempt to write a read-only parameter
	}
	return 0x80, nil
}
