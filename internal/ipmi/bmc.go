package ipmi

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	mrand "math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/accounts"
	"github.com/bmlab/bmlab/internal/ipmi/session"
	"github.com/bmlab/bmlab/internal/ipmi/wire"
	"github.com/bmlab/bmlab/internal/lograte"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/personality"
)

// Privilege levels (IPMI v2.0 §6.8; encoding of §22.13, byte 2).
const (
	privCallback = 1
	privUser     = 2
	privOperator = 3
	privAdmin    = 4
	privOEM      = 5
)

// The LAN channel every BMC has (IPMI v2.0 §6.3: channel 1 is commonly the
// primary LAN channel; 0Eh means "this channel").
const (
	lanChannel     = 1
	currentChannel = 0x0e
)

type sessState int

const (
	stateOpened sessState = iota + 1 // Open Session answered
	stateRAKP2                       // RAKP Message 2 sent
	stateActive                      // RAKP Message 4 sent
)

// sess is one RMCP+ session of a BMC. Guarded by bmc.mu.
type sess struct {
	id        uint32 // the BMC's session ID
	consoleID uint32
	state     sessState
	suite     session.Suite
	ex        session.Exchange
	limit     uint8 // highest privilege the session may take
	priv      uint8 // present privilege
	user      string
	acct      string // the stored account's ID; "" for the daemon's or the machine's own user
	decoy     bool   // user unknown: RAKP 2 carries a decoy code, RAKP 3 fails
	keys      *session.Keys
	window    session.Window
	outSeq    uint32
	addr      net.Addr
	src       netip.Addr // the source address Open Session came from
	last      time.Time
	closing   bool // Close Session answered; drop once the answer is sealed
}

// bmc is the BMC of one machine: its faces (a LAN socket, the in-band
// system interface), sessions and in-memory state (boot option parameters
// that the model does not hold, the SEL, the watchdog). Both faces run the
// same command handlers on the same state.
type bmc struct {
	id  string // machine ID
	svc *machine.Service
	log *zap.Logger
	cfg *config
	ctx context.Context // lives as long as the Manager; slow power work uses it

	mu    sync.Mutex
	lan   *lanSock // nil: no LAN face
	kcs   *inband  // nil: no in-band face
	users []machine.Credential
	// ownUsers: users are the machine's own (Settings.Credentials, as
	// vbmcd ipmi set gives them), bound to this machine; else the
	// daemon's, which reach every machine.
	ownUsers bool
	// guesses: the in-band face's wrong password tests, less one per
	// inbandGuessEvery since guessed (users.go).
	guesses  float64
	guessed  time.Time
	sessions map[uint32]*sess
	drops    struct {
		logged, since time.Time      // the last line about dropped set-ups
		n             map[string]int // drops since, by why
		src           map[string]int // drops since, by the source that caused them
	}
	decoyKey [32]byte // keys the decoy codes of unknown users
	guid     [16]byte // the system GUID in IPMI byte order

	// Boot option parameters kept by the BMC (IPMI v2.0 §28.13, Table 28-14).
	setInProgress uint8
	validClearing uint8
	bootAck       uint8
	reservation   uint16

	// The system interface (sysif.go), the SEL (sel.go) and the watchdog
	// (watchdog.go).
	enables  byte
	msgFlags byte
	evBuf    [16]byte
	sel      selLog
	wd       watchdog

	powerOnByIPMI   bool
	resetAfterReply bool      // Cold/Warm Reset answered; reset once the answer is sealed
	powerFault      bool      // the last chassis control failed (§28.2 power control fault)
	identifyUntil   time.Time // zero: off or indefinite (see the machine's LED)
	identifyTimer   *time.Timer

	sol *solSession
}

type endpoint struct {
	addr string
	port int
}

// lanSock is the LAN face's socket, and the goroutine that serves it.
type lanSock struct {
	conn net.PacketConn
	ep   endpoint
	done chan struct{}
}

func newBMC(ctx context.Context, m *machine.Machine, svc *machine.Service, cfg *config, log *zap.Logger) *bmc {
	b := &bmc{
		id:       m.ID,
		svc:      svc,
		cfg:      cfg,
		log:      log,
		ctx:      ctx,
		sessions: map[uint32]*sess{},
		enables:  enablesAtReset,
	}
	if _, err := rand.Read(b.decoyKey[:]); err != nil {
		panic(err)
	}
	b.guid = guidBytes(m.ID)
	return b
}

// guidBytes encodes a UUID as IPMI's Get System GUID returns it: the SMBIOS
// layout, whose first three fields are little-endian (IPMI v2.0 §22.14,
// SMBIOS 2.6 §7.2.1), which is what ipmitool and dmidecode print back.
func guidBytes(id string) [16]byte {
	var raw [16]byte
	hexes := make([]byte, 0, 32)
	for i := 0; i < len(id); i++ {
		if id[i] != '-' {
			hexes = append(hexes, id[i])
		}
	}
	for i := 0; i < 16 && 2*i+1 < len(hexes); i++ {
		raw[i] = unhex(hexes[2*i])<<4 | unhex(hexes[2*i+1])
	}
	g := raw
	g[0], g[1], g[2], g[3] = raw[3], raw[2], raw[1], raw[0]
	g[4], g[5] = raw[5], raw[4]
	g[6], g[7] = raw[7], raw[6]
	return g
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10
	}
	return 0
}

func (b *bmc) setUsers(u []machine.Credential, own bool) {
	b.mu.Lock()
	b.users, b.ownUsers = u, own
	b.mu.Unlock()
}

// listen starts the LAN face on conn, bound at ep.
func (b *bmc) listen(conn net.PacketConn, ep endpoint) {
	l := &lanSock{conn: conn, ep: ep, done: make(chan struct{})}
	b.mu.Lock()
	b.lan = l
	b.mu.Unlock()
	go b.serve(l)
}

// lanOf returns the LAN face's socket; nil when there is none.
func (b *bmc) lanOf() *lanSock {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lan
}

// serve reads packets until the socket is closed. Packets of one BMC are
// handled in order, one at a time; work that may be slow (a VM start) is
// bounded by config.replyWithin and continues after the answer.
func (b *bmc) serve(l *lanSock) {
	defer close(l.done)
	buf := make([]byte, 2048)
	for {
		n, from, err := l.conn.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			b.log.Debug("read", zap.Error(err))
			continue
		}
		if out := b.handle(buf[:n], from); out != nil {
			if _, err := l.conn.WriteTo(out, from); err != nil {
				b.log.Debug("write", zap.Stringer("to", from), zap.Error(err))
			}
		}
	}
}

// unlisten stops the LAN face: its socket, any SOL, every session. The
// in-band face and the state both share stay.
func (b *bmc) unlisten() {
	b.mu.Lock()
	l := b.lan
	b.lan = nil
	b.mu.Unlock()
	if l == nil {
		return
	}
	_ = l.conn.Close()
	<-l.done
	b.mu.Lock()
	sol := b.sol
	b.sol = nil
	b.sessions = map[uint32]*sess{}
	b.mu.Unlock()
	if sol != nil {
		sol.stop()
	}
}

// close stops the BMC: both faces and its timers.
func (b *bmc) close() {
	b.unlisten()
	b.mu.Lock()
	k := b.kcs
	b.kcs = nil
	if b.identifyTimer != nil {
		b.identifyTimer.Stop()
	}
	b.stopWatchdogLocked()
	b.mu.Unlock()
	if k != nil {
		k.close()
	}
}

// handle answers one datagram; nil means no answer. It never panics on
// malformed input (the fuzz targets hold it to that).
func (b *bmc) handle(pkt []byte, from net.Addr) []byte {
	if in := b.svc.IPMIFault(b.id); in != (machine.Injected{}) {
		// Injected faults (vbmcd fault): a slow BMC, a lost packet, a
		// BMC rebooting.
		time.Sleep(in.Delay)
		if in.Down || in.Drop {
			return nil
		}
	}
	r, rest, err := wire.DecodeRMCP(pkt)
	if err != nil {
		return nil
	}
	switch r.Class {
	case wire.ClassASF:
		return b.handleASF(r, rest)
	case wire.ClassIPMI:
		if len(rest) == 0 {
			return nil
		}
		if wire.AuthType(rest[0]) == wire.AuthRMCPPlus {
			return b.handleV2(rest, from)
		}
		return b.handleV15(rest)
	}
	return nil
}

// handleASF answers a Presence Ping (IPMI v2.0 §13.2.3).
func (b *bmc) handleASF(r wire.RMCP, p []byte) []byte {
	m, err := wire.DecodeASF(p)
	if err != nil || m.Type != wire.ASFPresencePing {
		return nil
	}
	out := wire.RMCP{Sequence: r.Sequence, Class: wire.ClassASF}.Append(nil)
	return wire.ASF{Type: wire.ASFPresencePong, Tag: m.Tag, Data: wire.PongData()}.Append(out)
}

// handleV15 answers the session-less requests a v1.5-framed packet may carry
// (ipmitool sends Get Channel Authentication Capabilities that way). IPMI
// v1.5 sessions themselves are not offered: anything in a session, or with
// an auth type other than none, is dropped.
func (b *bmc) handleV15(p []byte) []byte {
	h, msg, err := wire.DecodeV15(p)
	if err != nil || h.AuthType != wire.AuthNone || h.SessionID != 0 {
		return nil
	}
	resp := b.sessionless(msg)
	if resp == nil {
		return nil
	}
	out := wire.RMCP{Sequence: wire.RMCPNoAck, Class: wire.ClassIPMI}.Append(nil)
	return wire.AppendV15(out, wire.V15Header{AuthType: wire.AuthNone}, resp)
}

// sessionless runs the commands allowed outside a session (IPMI v2.0 §6.12.2
// and Table G-1): authentication capabilities, cipher suites, system GUID.
// It returns the encoded response to the request msg, or nil for anything
// else (dropped).
func (b *bmc) sessionless(msg []byte) []byte {
	req, err := wire.DecodeRequest(msg)
	if err != nil || req.NetFn != wire.NetFnApp {
		return nil
	}
	switch req.Cmd {
	case cmdGetChannelAuthCaps, cmdGetChannelCipherSuites, cmdGetSystemGUID:
		code, data := b.command(nil, req)
		return wire.ResponseTo(req, code, data).Append(nil)
	}
	return nil
}

func (b *bmc) handleV2(p []byte, from net.Addr) []byte {
	pk, err := wire.DecodeV2(p)
	if err != nil {
		return nil
	}
	h := pk.Header
	if h.SessionID == 0 {
		if h.Encrypted || h.Authenticated {
			return nil
		}
		var out []byte
		switch h.PayloadType {
		case wire.PayloadIPMI:
			if resp := b.sessionless(pk.Payload); resp != nil {
				out = v2Plain(wire.PayloadIPMI, resp)
			}
		case wire.PayloadOpenSessionRequest:
			out = b.openSession(pk.Payload, from)
		case wire.PayloadRAKP1:
			out = b.rakp1(pk.Payload, from)
		case wire.PayloadRAKP3:
			out = b.rakp3(pk.Payload, from)
		}
		return out
	}
	return b.inSession(pk, from)
}

// v2Plain frames a session-less RMCP+ packet.
func v2Plain(t wire.PayloadType, payload []byte) []byte {
	out := wire.RMCP{Sequence: wire.RMCPNoAck, Class: wire.ClassIPMI}.Append(make([]byte, 0, 20+len(payload)))
	return wire.AppendV2(out, wire.V2Header{PayloadType: t}, payload)
}

func randomID() uint32 {
	var b [4]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			panic(err)
		}
		if v := binary.LittleEndian.Uint32(b[:]); v != 0 {
			return v
		}
	}
}

// sweep drops sessions idle beyond the timeout and half-open ones older than
// the set-up allowance. Callers hold b.mu.
func (b *bmc) sweepLocked(now time.Time) {
	for id, s := range b.sessions {
		limit := b.cfg.idle
		if s.state != stateActive {
			limit = b.cfg.halfOpen
		}
		if now.Sub(s.last) > limit {
			if s.state == stateRAKP2 {
				b.cfg.metrics.LoginFailed("ipmi")
				// Message 2 went out and no Message 3 came: ipmitool and
				// FreeIPMI stop there when the code does not match their
				// password, which is how most refused logins end.
				b.refused(s.user, s.addr, "no RAKP 3 came: a wrong password or an unknown user")
			}
			b.dropLocked(id)
		}
	}
}

// controllerReset starts this BMC over, as a reset controller does: no
// sessions, no SOL, the boot option parameters it holds as at power-up, the
// watchdog stopped, the system interface as at power-up and its connection
// to qemu dropped (qemu answers the guest "BMC initialization in progress"
// until it is back, a second later). What the machine model keeps (power,
// the boot override, media) stays, and so does the SEL.
func (b *bmc) controllerReset() {
	b.mu.Lock()
	for id := range b.sessions {
		b.dropLocked(id)
	}
	b.setInProgress, b.validClearing, b.bootAck, b.reservation = 0, 0, 0, 0
	b.powerFault = false
	b.stopWatchdogLocked()
	b.wd = watchdog{expired: b.wd.expired, gen: b.wd.gen}
	b.enables, b.msgFlags = enablesAtReset, 0
	k := b.kcs
	b.mu.Unlock()
	if k != nil {
		k.hangUp()
	}
	b.log.Info("BMC reset: sessions ended")
}

// personaOf is the personality machine m's BMC has: its own when its
// settings name a known one, else the daemon's.
func (b *bmc) personaOf(m *machine.Machine) *personality.Personality {
	if name := m.Settings.Personality; name != "" {
		if p, err := personality.Lookup(name); err == nil {
			return p
		}
	}
	return b.cfg.persona
}

// afterReply runs what a command asked for once its answer is out: a BMC
// reset (Cold/Warm Reset), which ends the session that asked too. Not on
// the calling goroutine: the reset reaches this BMC through the Manager,
// whose lock a shutdown holds while it waits for the serving goroutines.
func (b *bmc) afterReply() {
	b.mu.Lock()
	reset := b.resetAfterReply
	b.resetAfterReply = false
	b.mu.Unlock()
	if reset {
		go func() {
			if err := b.svc.ResetBMC(b.id); err != nil {
				b.log.Warn("BMC reset", zap.Error(err))
			}
		}()
	}
}

// dropLocked ends a session and the SOL it owns. Callers hold b.mu.
func (b *bmc) dropLocked(id uint32) {
	delete(b.sessions, id)
	if b.sol != nil && b.sol.owner == id {
		sol := b.sol
		b.sol = nil
		go sol.stop()
	}
}

func (b *bmc) sweep(now time.Time) {
	b.mu.Lock()
	b.sweepLocked(now)
	b.mu.Unlock()
}

// openSession answers an Open Session Request (IPMI v2.0 §13.17, §13.18).
func (b *bmc) openSession(p []byte, from net.Addr) []byte {
	if len(p) < 8 {
		return nil
	}
	req, err := wire.DecodeOpenSessionRequest(p)
	resp := wire.OpenSessionResponse{Tag: p[0], ConsoleID: binary.LittleEndian.Uint32(p[4:8]), MaxPrivilege: p[1] & 0x0f}
	reply := func() []byte { return v2Plain(wire.PayloadOpenSessionResponse, resp.Append(nil)) }
	if err != nil {
		resp.Status = wire.StatusIllegalParameter
		return reply()
	}
	suites := b.cfg.suites()
	suite, ok := session.Lookup(suites, req.Algorithms)
	if !ok {
		resp.Status = algStatus(suites, req.Algorithms)
		return reply()
	}
	if req.MaxPrivilege > privAdmin {
		resp.Status = wire.StatusInvalidRole
		return reply()
	}
	// A requested level is echoed (FreeIPMI's Intel workaround checks that);
	// 0 asks for the highest level the algorithms allow, administrator for
	// every suite offered (IPMI v2.0 §13.18); FreeIPMI accepts any level at
	// or above the one it wants.
	if req.MaxPrivilege == 0 {
		resp.MaxPrivilege = privAdmin
	}
	now := time.Now()
	src := sourceOf(from)
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.roomLocked(now, src) {
		resp.Status = wire.StatusNoResources
		return reply()
	}
	id := randomID()
	for b.sessions[id] != nil {
		id = randomID()
	}
	b.sessions[id] = &sess{
		id: id, consoleID: req.ConsoleID, state: stateOpened, suite: suite,
		addr: from, src: src, last: now,
	}
	resp.BMCID = id
	resp.Algorithms = suite.Algorithms
	return reply()
}

// roomLocked makes room for a session that src is opening. Open Session
// needs no credentials and its source address can be forged, so sessions
// not yet authenticated (IPMI v2.0 §13.17-§13.20: before RAKP Message 3 is
// checked) never push out an established one: a source keeps at most
// pendingPerSource of them (its oldest goes), and when the table is full
// one pending session chosen at random goes, so a flood of forged requests
// cannot predict which to push out and an honest console, whose handshake
// takes a few round trips, gets through. false: every slot holds an
// established session. Callers hold b.mu.
func (b *bmc) roomLocked(now time.Time, src netip.Addr) bool {
	var pending []*sess
	var oldest *sess
	own := 0
	for _, s := range b.sessions {
		if s.state == stateActive {
			continue
		}
		pending = append(pending, s)
		if s.src == src {
			own++
			if oldest == nil || s.last.Before(oldest.last) {
				oldest = s
			}
		}
	}
	if own >= pendingPerSource {
		b.droppedLocked(now, "source", src)
		b.dropLocked(oldest.id)
		return true
	}
	if len(b.sessions) < b.cfg.maxSessions {
		return true
	}
	b.sweepLocked(now)
	if len(b.sessions) < b.cfg.maxSessions {
		return true
	}
	pending = slices.DeleteFunc(pending, func(s *sess) bool { return b.sessions[s.id] != s })
	if len(pending) == 0 {
		b.droppedLocked(now, "refused", src)
		return false
	}
	b.droppedLocked(now, "evicted", src)
	b.dropLocked(pending[mrand.IntN(len(pending))].id)
	return true
}

// dropLogEvery bounds the log lines about dropped session set-ups: one per
// BMC in this interval at most, with the counts since the last one.
const dropLogEvery = 10 * time.Second

// droppedLocked counts a session set-up pushed out or refused for room
// (metric vbmcd_ipmi_session_setups_dropped_total) and logs the counts at
// most once per dropLogEvery, with the sources that caused most of them,
// so a flood costs a line, not a line a packet. src is the source whose
// request caused the drop. Callers hold b.mu.
func (b *bmc) droppedLocked(now time.Time, why string, src netip.Addr) {
	b.cfg.metrics.SetupDropped(why)
	d := &b.drops
	if d.n == nil {
		d.n, d.src, d.since = map[string]int{}, map[string]int{}, now
	}
	d.n[why]++
	if k := src.String(); d.src[k] > 0 || len(d.src) < 256 {
		d.src[k]++
	}
	if !d.logged.IsZero() && now.Sub(d.logged) < dropLogEvery {
		return
	}
	b.log.Warn("IPMI session set-ups dropped for room (an open-session flood, or more consoles than sessions)",
		zap.Int("source", d.n["source"]), zap.Int("evicted", d.n["evicted"]), zap.Int("refused", d.n["refused"]),
		zap.Int("reserved", d.n["reserved"]), zap.Strings("most from (source: count)", lograte.Top(d.src, 5)),
		zap.Duration("within", now.Sub(d.since)), zap.Int("sessions", len(b.sessions)))
	d.logged, d.since, d.n, d.src = now, now, map[string]int{}, map[string]int{}
}

// recheck holds session id to its stored account as the account is now
// (IPMI v2.0 §6.12: a session may not exceed its user's privilege limit):
// a deleted or disabled account's session ends (false); a lowered role
// lowers the session's privilege, and ends its serial console below
// Operator. A session of the daemon's or the machine's own user is left
// alone.
func (b *bmc) recheck(id uint32) bool {
	b.mu.Lock()
	s := b.sessions[id]
	if s == nil {
		b.mu.Unlock()
		return false
	}
	acct := s.acct
	b.mu.Unlock()
	if acct == "" || b.cfg.accounts == nil {
		return true
	}
	limit, ok := b.accountLimit(acct)
	b.mu.Lock()
	defer b.mu.Unlock()
	s = b.sessions[id]
	if s == nil {
		return false
	}
	if !ok {
		b.log.Info("IPMI session ended: its account was deleted or disabled", zap.String("user", accounts.LogName(s.user)),
			zap.Stringer("remote", s.addr))
		b.dropLocked(id)
		return false
	}
	if limit < s.priv {
		b.log.Info("IPMI session lowered to its account's new role", zap.String("user", accounts.LogName(s.user)),
			zap.Stringer("remote", s.addr), zap.Uint8("privilege", limit))
	}
	s.limit = min(s.limit, limit)
	s.priv = min(s.priv, limit)
	if s.priv < privOperator && b.sol != nil && b.sol.owner == id {
		sol := b.sol
		b.sol = nil
		go sol.stop()
	}
	return true
}

// recheckAll rechecks every session of a stored account (the account store
// changed).
func (b *bmc) recheckAll() {
	b.mu.Lock()
	var ids []uint32
	for id, s := range b.sessions {
		if s.acct != "" {
			ids = append(ids, id)
		}
	}
	b.mu.Unlock()
	for _, id := range ids {
		b.recheck(id)
	}
}

// accountLimit is stored account id's privilege limit on this BMC; false
// when it can no longer log in here (deleted, disabled, no password).
func (b *bmc) accountLimit(id string) (uint8, bool) {
	a, err := b.cfg.accounts.Get(id)
	if err != nil || !a.Enabled || !a.HasPassword || !a.Reaches(b.id) {
		return 0, false
	}
	return a.Role.IPMILimit(), true
}

// pendingPerSource bounds the sessions one source address may have in set-up.
const pendingPerSource = 4

// sourceOf is the IP address of a UDP peer.
func sourceOf(a net.Addr) netip.Addr {
	if u, ok := a.(*net.UDPAddr); ok {
		return u.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// algStatus says which proposed algorithm no offered suite has (IPMI v2.0
// §13.18, Table 13-15).
func algStatus(ids []uint8, a wire.Algorithms) wire.Status {
	var auth, integ, conf bool
	for _, id := range ids {
		s := session.Suites[id]
		auth = auth || s.Auth == a.Auth
		integ = integ || s.Integrity == a.Integrity
		conf = conf || s.Conf == a.Conf
	}
	switch {
	case !auth:
		return wire.StatusInvalidAuthAlg
	case !integ:
		return wire.StatusInvalidIntegrityAlg
	case !conf:
		return wire.StatusInvalidConfAlg
	}
	return wire.StatusNoCipherSuiteMatch
}

// rakp1 answers RAKP Message 1 with Message 2 (IPMI v2.0 §13.20, §13.21).
//
// An unknown user is answered as a known one whose password is wrong: RAKP
// Message 2 carries a code keyed by a secret of this BMC, and Message 3 then
// fails its integrity check. So the answers do not tell which user names
// exist. (What IPMI 2.0 cannot hide: Message 2 of a known user is an HMAC
// of its password that anyone who sends Message 1 may try to crack
// offline; hence the per-source throttle and strong passwords.)
//
// Each Message 1 is charged to its source's login budget (it yields a code
// to crack, whatever follows) and refunded when the session becomes
// active; a source over budget gets no answer until it may try again.
// Message 1 carries the BMC's random session ID, so its source has seen
// the Open Session answer: a spoofed address cannot spend another host's
// budget.
func (b *bmc) rakp1(p []byte, from net.Addr) []byte {
	m, err := wire.DecodeRAKP1(p)
	if err != nil {
		if len(p) >= 8 {
			return b.rakp2ErrLocked(p[0], 0, wire.StatusIllegalParameter)
		}
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.sessions[m.BMCID]
	if s == nil || s.state == stateActive {
		return b.rakp2ErrLocked(m.Tag, 0, wire.StatusInvalidSessionID)
	}
	if d := b.cfg.throttle.Wait(from.String()); d > 0 {
		b.refused(string(m.Username), from, "RAKP 1 unanswered: too many failed logins from this address")
		return nil
	}
	b.cfg.throttle.Failed(from.String())
	priv := m.Role & 0x0f
	switch {
	case priv == 0 || priv > privOEM:
		b.dropLocked(s.id)
		return b.rakp2ErrLocked(m.Tag, s.consoleID, wire.StatusInvalidRole)
	case priv > privAdmin:
		b.dropLocked(s.id)
		return b.rakp2ErrLocked(m.Tag, s.consoleID, wire.StatusUnauthorizedRole)
	}
	pass, limit, acct, ok := b.lookupLocked(string(m.Username), from.String())
	s.decoy = !ok
	if !ok {
		pass, limit = b.decoyPass(m.Username), privAdmin
	}
	if priv > limit {
		// Above the user's privilege limit (its role's, IPMI v2.0 §13.20).
		b.dropLocked(s.id)
		return b.rakp2ErrLocked(m.Tag, s.consoleID, wire.StatusUnauthorizedRole)
	}
	if ok && !b.roomForLocked(priv, s.id) {
		// The last session is kept for an administrator.
		b.droppedLocked(time.Now(), "reserved", s.src)
		b.dropLocked(s.id)
		return b.rakp2ErrLocked(m.Tag, s.consoleID, wire.StatusNoResources)
	}
	s.acct = acct
	s.ex = session.Exchange{
		Auth: s.suite.Auth, ConsoleID: s.consoleID, BMCID: s.id,
		ConsoleRandom: m.ConsoleRandom, GUID: b.guid, Role: m.Role,
		Username: append([]byte(nil), m.Username...),
	}
	if _, err := rand.Read(s.ex.BMCRandom[:]); err != nil {
		panic(err)
	}
	s.user = string(m.Username)
	s.limit = priv
	s.state = stateRAKP2
	s.last = time.Now()
	out := wire.RAKP2{Tag: m.Tag, ConsoleID: s.consoleID, BMCRandom: s.ex.BMCRandom, BMCGUID: b.guid, AuthCode: s.ex.RAKP2Code([]byte(pass))}
	return v2Plain(wire.PayloadRAKP2, out.Append(nil))
}

// decoyPass is the key of an unknown user's RAKP codes: fixed per name, so a
// repeated Message 1 looks like a known user's, and unknowable outside.
func (b *bmc) decoyPass(user []byte) string {
	mac := hmac.New(sha256.New, b.decoyKey[:])
	mac.Write(user)
	return string(mac.Sum(nil)[:20])
}

func (b *bmc) rakp2ErrLocked(tag uint8, consoleID uint32, st wire.Status) []byte {
	return v2Plain(wire.PayloadRAKP2, wire.RAKP2{Tag: tag, Status: st, ConsoleID: consoleID}.Append(nil))
}

// lookupLocked finds a user's password (its RAKP key), privilege limit and
// stored account ID, for a console at source: the daemon's or the
// machine's own users are administrators; stored accounts have their
// role's limit and must be enabled and not locked for source.
func (b *bmc) lookupLocked(name, source string) (pass string, limit uint8, acct string, ok bool) {
	for _, u := range b.users {
		if u.Username == name {
			return u.Password, privAdmin, "", true
		}
	}
	if st := b.cfg.accounts; st != nil {
		if key, a, _, err := st.Key(b.id, name, source); err == nil {
			return string(key), a.Role.IPMILimit(), a.ID, true
		}
	}
	return "", 0, "", false
}

// refused logs a refused login, rate-limited (config.refusals), with its
// source and user.
func (b *bmc) refused(user string, from net.Addr, why string) {
	fs := []zap.Field{zap.String("face", "ipmi"), zap.String("user", accounts.LogName(user)), zap.Stringer("remote", from), zap.String("why", why)}
	if b.cfg.refusals == nil {
		b.log.Info("login refused", fs...)
		return
	}
	host := ""
	if u, ok := from.(*net.UDPAddr); ok {
		host = u.IP.String()
	}
	b.cfg.refusals.Refused(host+" "+accounts.LogName(user), "login refused", fs...)
}

// authFailed counts a failed login towards the name's lock for source.
func (b *bmc) authFailed(name, source string) {
	if b.cfg.accounts != nil {
		b.cfg.accounts.Failed(b.id, name, source)
	}
}

// roomForLocked reports whether a session asking for privilege level priv
// may become active: the last place of the table is kept for a session at
// the administrator level, so consoles of lower roles that fill the rest
// cannot shut an administrator out (issue 32: a ReadOnly user holding all
// 16 sessions kept the Administrator out). self, a session in set-up, is
// not counted. Callers hold b.mu.
func (b *bmc) roomForLocked(priv uint8, self uint32) bool {
	if priv >= privAdmin || b.cfg.maxSessions < 2 {
		return true
	}
	active := 0
	for id, s := range b.sessions {
		if id != self && s.state == stateActive && s.limit < privAdmin {
			active++
		}
	}
	return active < b.cfg.maxSessions-1
}

// rakp3 checks RAKP Message 3 and answers with Message 4 (IPMI v2.0 §13.22,
// §13.23); a wrong password, or an unknown user, is answered with "invalid
// integrity check value", logged and counted against the source.
func (b *bmc) rakp3(p []byte, from net.Addr) []byte {
	m, err := wire.DecodeRAKP3(p)
	if err != nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.sessions[m.BMCID]
	if s == nil || s.state != stateRAKP2 {
		return v2Plain(wire.PayloadRAKP4, wire.RAKP4{Tag: m.Tag, Status: wire.StatusInvalidSessionID}.Append(nil))
	}
	fail := func(st wire.Status) []byte {
		b.dropLocked(s.id)
		return v2Plain(wire.PayloadRAKP4, wire.RAKP4{Tag: m.Tag, Status: st, ConsoleID: s.consoleID}.Append(nil))
	}
	refused := func(why string, st wire.Status) []byte {
		b.authFailed(s.user, from.String())
		b.cfg.metrics.LoginFailed("ipmi")
		b.refused(s.user, from, why)
		return fail(st)
	}
	if m.Status != wire.StatusOK {
		// The console refused our RAKP 2 (most often: its password differs).
		return refused("the console refused RAKP 2: "+m.Status.String(), m.Status)
	}
	pass, _, acct, ok := b.lookupLocked(s.user, from.String())
	if !ok {
		pass = b.decoyPass([]byte(s.user)) // same work as a known user
	}
	if !session.Equal(s.ex.RAKP3Code([]byte(pass)), m.AuthCode) || s.decoy || !ok || acct != s.acct {
		return refused("wrong password or unknown user", wire.StatusInvalidIntegrityValue)
	}
	if !b.roomForLocked(s.limit, s.id) {
		b.droppedLocked(time.Now(), "reserved", s.src)
		return fail(wire.StatusNoResources)
	}
	sik := s.ex.SIK([]byte(pass)) // no BMC key: Kg is Kuid (IPMI v2.0 §13.31)
	keys, err := session.NewKeys(s.suite, sik)
	if err != nil {
		return fail(wire.StatusIllegalParameter)
	}
	s.keys = keys
	s.state = stateActive
	b.cfg.throttle.Refund(from.String())
	if b.cfg.accounts != nil && s.acct != "" {
		b.cfg.accounts.Succeeded(b.id, s.user, from.String())
	}
	s.priv = s.limit
	s.last = time.Now()
	return v2Plain(wire.PayloadRAKP4, wire.RAKP4{Tag: m.Tag, ConsoleID: s.consoleID, IntegrityCheck: s.ex.RAKP4Code(sik)}.Append(nil))
}

// inSession handles a packet of an established session: integrity, window,
// then the payload.
func (b *bmc) inSession(pk wire.V2Packet, from net.Addr) []byte {
	b.mu.Lock()
	s := b.sessions[pk.Header.SessionID]
	if s == nil || s.state != stateActive {
		b.mu.Unlock()
		return nil
	}
	payload, err := s.keys.Open(pk)
	if err != nil {
		b.mu.Unlock()
		b.log.Debug("dropped a session packet", zap.Uint32("session", pk.Header.SessionID), zap.Error(err))
		return nil
	}
	if !s.window.Accept(pk.Header.Sequence) {
		b.mu.Unlock()
		b.log.Debug("dropped a session packet outside the sequence window", zap.Uint32("session", pk.Header.SessionID), zap.Uint32("seq", pk.Header.Sequence))
		return nil
	}
	s.last = time.Now()
	s.addr = from
	id, acct := s.id, s.acct
	b.mu.Unlock()
	if acct != "" && !b.recheck(id) {
		return nil // its account is gone: so is the session
	}

	switch pk.Header.PayloadType {
	case wire.PayloadIPMI:
		req, err := wire.DecodeRequest(payload)
		if err != nil {
			return nil
		}
		code, data := b.command(&sessRef{id: id}, req)
		b.cfg.metrics.IPMI(uint8(req.NetFn), req.Cmd, uint8(code))
		out := b.seal(id, wire.PayloadIPMI, wire.ResponseTo(req, code, data).Append(nil))
		b.mu.Lock()
		if s := b.sessions[id]; s != nil && s.closing {
			b.dropLocked(id)
		}
		b.mu.Unlock()
		b.afterReply()
		return out
	case wire.PayloadSOL:
		return b.solInbound(id, payload)
	}
	return nil
}

// seal frames payload for session id with the next outbound sequence
// number; nil when the session is gone.
func (b *bmc) seal(id uint32, t wire.PayloadType, payload []byte) []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.sessions[id]
	if s == nil {
		return nil
	}
	s.outSeq++
	if s.outSeq == 0 {
		s.outSeq = 1
	}
	out := wire.RMCP{Sequence: wire.RMCPNoAck, Class: wire.ClassIPMI}.Append(make([]byte, 0, 64+len(payload)))
	return s.keys.Seal(out, wire.V2Header{PayloadType: t, SessionID: s.consoleID, Sequence: s.outSeq}, payload)
}

// sessRef names the session a command runs in; nil outside a session.
// system marks the in-band face's system interface, which has no session
// and no privilege check: it runs every command at the ADMINISTRATOR
// level, bound to its own machine (users.go).
type sessRef struct {
	id     uint32
	system bool
}
