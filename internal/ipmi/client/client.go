// Package client is a small RMCP+ (IPMI v2.0 lanplus) client: enough to test
// and load the lab's BMCs from Go (Open Session, RAKP, commands, Close
// Session). It is not a general IPMI library.
package client

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/bmlab/bmlab/internal/ipmi/session"
	"github.com/bmlab/bmlab/internal/ipmi/wire"
)

// StatusError is a refusal during session set-up.
type StatusError struct {
	Step   string
	Status wire.Status
}

func (e *StatusError) Error() string { return fmt.Sprintf("%s: status %s", e.Step, e.Status) }

// Config is how to log in.
type Config struct {
	Username, Password string
	Suite              int   // 3 or 17 (default 17), or Suite0
	Privilege          uint8 // default 4 (administrator)
	Timeout            time.Duration
}

// Suite0 asks for cipher suite 0 (no authentication, integrity or
// encryption), which the BMC refuses unless enabled.
const Suite0 = -1

// Client is one session.
type Client struct {
	conn  net.Conn
	cfg   Config
	keys  *session.Keys
	bmcID uint32
	seq   uint32
	rqSeq uint8
	buf   []byte
}

// Dial opens a session with the BMC at addr (host:port).
func Dial(ctx context.Context, addr string, cfg Config) (*Client, error) {
	if cfg.Suite == 0 {
		cfg.Suite = 17
	}
	if cfg.Privilege == 0 {
		cfg.Privilege = 4
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = time.Second
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "udp", addr)
	if err != nil {
		return nil, err
	}
	c := &Client{conn: conn, cfg: cfg, buf: make([]byte, 2048)}
	if err := c.handshake(); err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

func (c *Client) roundTrip(pkt []byte, want func(wire.V2Packet) bool) (wire.V2Packet, error) {
	for try := 0; try < 3; try++ {
		if _, err := c.conn.Write(pkt); err != nil {
			return wire.V2Packet{}, err
		}
		deadline := time.Now().Add(c.cfg.Timeout)
		for {
			_ = c.conn.SetReadDeadline(deadline)
			n, err := c.conn.Read(c.buf)
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					break
				}
				return wire.V2Packet{}, err
			}
			_, rest, err := wire.DecodeRMCP(c.buf[:n])
			if err != nil {
				continue
			}
			p, err := wire.DecodeV2(rest)
			if err != nil || !want(p) {
				continue
			}
			return p, nil
		}
	}
	return wire.V2Packet{}, errors.New("no answer")
}

func plain(t wire.PayloadType, payload []byte) []byte {
	out := wire.RMCP{Sequence: wire.RMCPNoAck, Class: wire.ClassIPMI}.Append(nil)
	return wire.AppendV2(out, wire.V2Header{PayloadType: t}, payload)
}

func typ(t wire.PayloadType) func(wire.V2Packet) bool {
	return func(p wire.V2Packet) bool { return p.Header.PayloadType == t }
}

// exchange is one step of opening a session (IPMI v2.0 §13.17 to §13.23):
// it sends msg, a payload of type send, waits for the answer of type want
// and decodes it. An answer that does not come is an error named after what
// was sent; a status other than OK in the answer is a StatusError named
// after the answer.
func exchange[R any](c *Client, sent string, send wire.PayloadType, msg []byte, answer string, want wire.PayloadType, decode func([]byte) (R, error), status func(R) wire.Status) (R, error) {
	var zero R
	p, err := c.roundTrip(plain(send, msg), typ(want))
	if err != nil {
		return zero, fmt.Errorf("%s: %w", sent, err)
	}
	r, err := decode(p.Payload)
	if err != nil {
		return zero, err
	}
	if st := status(r); st != wire.StatusOK {
		return zero, &StatusError{answer, st}
	}
	return r, nil
}

func (c *Client) handshake() error {
	id := uint8(c.cfg.Suite)
	if c.cfg.Suite == Suite0 {
		id = 0
	}
	suite, ok := session.Suites[id]
	if !ok {
		return fmt.Errorf("cipher suite %d unknown", c.cfg.Suite)
	}
	var r [4]byte
	_, _ = rand.Read(r[:])
	consoleID := binary.LittleEndian.Uint32(r[:]) | 1
	osr := wire.OpenSessionRequest{Tag: 1, MaxPrivilege: c.cfg.Privilege, ConsoleID: consoleID, Algorithms: suite.Algorithms}
	os, err := exchange(c, "open session", wire.PayloadOpenSessionRequest, osr.Append(nil),
		"open session", wire.PayloadOpenSessionResponse, wire.DecodeOpenSessionResponse,
		func(r wire.OpenSessionResponse) wire.Status { return r.Status })
	if err != nil {
		return err
	}
	if os.MaxPrivilege != c.cfg.Privilege {
		return fmt.Errorf("open session: privilege %d echoed as %d", c.cfg.Privilege, os.MaxPrivilege)
	}
	ex := session.Exchange{Auth: suite.Auth, ConsoleID: consoleID, BMCID: os.BMCID, Role: 0x10 | c.cfg.Privilege, Username: []byte(c.cfg.Username)}
	_, _ = rand.Read(ex.ConsoleRandom[:])
	r1 := wire.RAKP1{Tag: 2, BMCID: os.BMCID, ConsoleRandom: ex.ConsoleRandom, Role: ex.Role, Username: ex.Username}
	r2, err := exchange(c, "rakp 1", wire.PayloadRAKP1, r1.Append(nil),
		"rakp 2", wire.PayloadRAKP2, wire.DecodeRAKP2,
		func(r wire.RAKP2) wire.Status { return r.Status })
	if err != nil {
		return err
	}
	ex.BMCRandom, ex.GUID = r2.BMCRandom, r2.BMCGUID
	kuid := []byte(c.cfg.Password)
	if !session.Equal(ex.RAKP2Code(kuid), r2.AuthCode) {
		// Tell the BMC, as ipmitool does (IPMI v2.0 §13.22: RAKP 3 with an
		// error status), so it can end the session and count the failure.
		r3 := wire.RAKP3{Tag: 3, Status: wire.StatusInvalidIntegrityValue, BMCID: os.BMCID}
		_, _ = c.conn.Write(plain(wire.PayloadRAKP3, r3.Append(nil)))
		return &StatusError{"rakp 2 (wrong password)", wire.StatusInvalidIntegrityValue}
	}
	r3 := wire.RAKP3{Tag: 3, BMCID: os.BMCID, AuthCode: ex.RAKP3Code(kuid)}
	r4, err := exchange(c, "rakp 3", wire.PayloadRAKP3, r3.Append(nil),
		"rakp 4", wire.PayloadRAKP4, wire.DecodeRAKP4,
		func(r wire.RAKP4) wire.Status { return r.Status })
	if err != nil {
		return err
	}
	sik := ex.SIK(kuid)
	if !session.Equal(ex.RAKP4Code(sik), r4.IntegrityCheck) {
		return errors.New("rakp 4: integrity check value does not match")
	}
	c.keys, err = session.NewKeys(suite, sik)
	if err != nil {
		return err
	}
	c.bmcID = os.BMCID
	return nil
}

// Do sends a request in the session and returns the completion code and data.
func (c *Client) Do(netFn wire.NetFn, cmd uint8, data ...byte) (wire.CompletionCode, []byte, error) {
	c.rqSeq = (c.rqSeq + 1) & 0x3f
	req := wire.Request{RsAddr: wire.BMCSlaveAddr, NetFn: netFn, RqAddr: wire.RemoteConsoleAddr, RqSeq: c.rqSeq, Cmd: cmd, Data: data}
	rqSeq := c.rqSeq
	var resp wire.Response
	c.seq++
	pkt := wire.RMCP{Sequence: wire.RMCPNoAck, Class: wire.ClassIPMI}.Append(nil)
	pkt = c.keys.Seal(pkt, wire.V2Header{PayloadType: wire.PayloadIPMI, SessionID: c.bmcID, Sequence: c.seq}, req.Append(nil))
	_, err := c.roundTrip(pkt, func(p wire.V2Packet) bool {
		if p.Header.PayloadType != wire.PayloadIPMI {
			return false
		}
		pl, err := c.keys.Open(p)
		if err != nil {
			return false
		}
		r, err := wire.DecodeResponse(pl)
		if err != nil || r.RqSeq != rqSeq || r.Cmd != cmd {
			return false
		}
		resp = r
		return true
	})
	if err != nil {
		return 0, nil, fmt.Errorf("netfn %#02x cmd %#02x: %w", netFn, cmd, err)
	}
	return resp.Code, append([]byte(nil), resp.Data...), nil
}

// Close closes the session (IPMI v2.0 §22.19) and the socket.
func (c *Client) Close() error {
	_, _, err := c.Do(wire.NetFnApp, 0x3c, binary.LittleEndian.AppendUint32(nil, c.bmcID)...)
	c.conn.Close()
	return err
}

// Sessionless sends a request outside any session, framed as RMCP+.
func Sessionless(ctx context.Context, addr string, netFn wire.NetFn, cmd uint8, data ...byte) (wire.CompletionCode, []byte, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "udp", addr)
	if err != nil {
		return 0, nil, err
	}
	c := &Client{conn: conn, cfg: Config{Timeout: time.Second}, buf: make([]byte, 2048)}
	defer conn.Close()
	req := wire.Request{RsAddr: wire.BMCSlaveAddr, NetFn: netFn, RqAddr: wire.RemoteConsoleAddr, RqSeq: 1, Cmd: cmd, Data: data}
	p, err := c.roundTrip(plain(wire.PayloadIPMI, req.Append(nil)), typ(wire.PayloadIPMI))
	if err != nil {
		return 0, nil, err
	}
	r, err := wire.DecodeResponse(p.Payload)
	if err != nil {
		return 0, nil, err
	}
	return r.Code, r.Data, nil
}
