package webui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/accounts"
	"github.com/bmlab/bmlab/internal/admission"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/redfish"
)

// The serial console over a websocket.
//
// A browser cannot put a header on a websocket's handshake, so the session
// token is the first message the page sends, not part of the URL (which
// logs and the browser's history keep). The handshake itself is refused
// unless it names an Origin and that Origin is this listener's, scheme,
// host and port (sameOrigin), and nothing is read from cookies. Until its
// token is valid a console holds no slot and counts among the requests not
// yet authenticated (internal/admission), with authWait to send it. The
// console needs the privilege IPMI's SOL needs (ConfigureComponents:
// Operator and Administrator), and loses it at once when its session ends
// or its account is deleted, disabled or lowered (slots.go's watch); input
// is checked against the session as it is now, message by message, and
// counts as using the session.
//
// Every browser viewing one machine shares one console stream (a tap),
// opened with the model's shared console (machine.Service.Consoles), the
// stream IPMI SOL sessions read too: a page and a SOL session see the same
// output and both type into it. The tap keeps the last scrollBack bytes of
// output, which a new viewer is sent first; it reopens the stream when the
// machine stops and starts again, and leaves it when its last viewer
// leaves. The backend's console takes the stream over from a holder
// outside vbmcd (libvirt's force flag, virsh console). So that such a
// holder and a browser do not take it from each other forever, a stream
// that ends while its machine still runs is taken, not reopened: the page
// says so and offers to take it back (a {"take":true} text message), which
// a viewer's click does once.

// ConsoleOpener is a serial console opener (machine.ConsoleOpener); the
// web console uses the model's shared one.
type ConsoleOpener = machine.ConsoleOpener

const (
	scrollBack   = 64 << 10 // bytes of output kept per machine
	tapsKept     = 64       // machines whose scroll-back is kept
	authWait     = 5 * time.Second
	maxInput     = 4096 // bytes of one input message
	wsPing       = 20 * time.Second
	reopenEvery  = time.Second
	viewerQueued = 64 // output chunks (4 KiB at most) queued for one viewer: 256 KiB; a slower one is dropped and reconnects
)

var upgrader = websocket.Upgrader{ReadBufferSize: 4096, WriteBufferSize: 16 << 10, CheckOrigin: sameOrigin}

// sameOrigin accepts a handshake whose Origin is this listener's: the
// scheme the request came over (https with TLS, http without), and the
// host and port it was sent to. A handshake without an Origin (not a
// browser's) is refused too: the page always sends one. gorilla's own
// check compared the host only, so an http:// page could open the HTTPS
// listener's console, and it let a handshake without Origin through.
func sameOrigin(r *http.Request) bool {
	o := r.Header["Origin"]
	if len(o) != 1 {
		return false
	}
	u, err := url.Parse(o[0])
	if err != nil || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return false
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return strings.EqualFold(u.Scheme, scheme) && strings.EqualFold(withPort(u.Host, scheme), withPort(r.Host, scheme))
}

// withPort adds the scheme's default port to a host that names none.
func withPort(host, scheme string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	port := "80"
	if scheme == "https" {
		port = "443"
	}
	return net.JoinHostPort(strings.Trim(host, "[]"), port)
}

// consoleMsg is a text message to the page: where the console stands.
type consoleMsg struct {
	Status string `json:"status,omitempty"` // connected, waiting
	Error  string `json:"error,omitempty"`
	Detail string `json:"detail,omitempty"`
}

func (u *UI) serveConsole(w http.ResponseWriter, r *http.Request, id string) {
	opener := u.svc.Consoles() // shared with IPMI SOL
	s, ok := u.accept(w, r, id, opener != nil, "serial console", "The serial console needs the Operator or Administrator role, as IPMI's SOL does.")
	if !ok {
		return
	}
	defer s.close()
	ws, hello, c, m := s.ws, s.hello, s.c, s.m
	u.log.Info("web console opened", zap.String("system", m.ID), zap.String("user", accounts.LogName(c.User)), zap.String("remote", r.RemoteAddr))
	defer u.log.Info("web console closed", zap.String("system", m.ID), zap.String("user", accounts.LogName(c.User)))

	allowed := u.allowed(id)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	changes := u.watch(ctx, hello.Token, c, allowed)

	t := u.taps.join(u, opener, m.ID)
	v := t.add()
	defer u.taps.leave(t, v)

	ws.SetPongHandler(func(string) error { return nil })
	// Input: binary messages go to the console as typed; a text message is
	// a request ({"take":true}: take the console back).
	revoked := make(chan struct{})
	go u.input(r, s, allowed, cancel, revoked, func(kind int, b []byte) bool {
		if kind == websocket.TextMessage {
			var req struct{ Take bool }
			if json.Unmarshal(b, &req) == nil && req.Take {
				t.takeBack()
			}
			return true
		}
		t.write(b)
		return true
	})
	// Output, and where the console stands.
	go func() {
		defer cancel()
		for {
			select {
			case <-ctx.Done():
				return
			case out, ok := <-v.out:
				if !ok {
					return // the viewer fell too far behind
				}
				kind := websocket.BinaryMessage
				if out.status != nil {
					kind = websocket.TextMessage
					out.data, _ = json.Marshal(out.status)
				}
				if s.send(kind, out.data) != nil {
					return
				}
			}
		}
	}()
	u.hold(ctx, s, "serial console", revoked, changes, nil, consoleMsg{})
}

// input reads the page's messages until the socket ends (then cancel),
// each checked against the session as it is now, and counted as using it:
// handle gets those still allowed (and returns false to stop); the first
// one after the session ended or lost the right closes revoked instead.
func (u *UI) input(r *http.Request, s *wsSession, allowed func(redfish.Caller) bool, cancel func(), revoked chan struct{}, handle func(kind int, b []byte) bool) {
	defer cancel()
	for {
		kind, b, err := s.ws.ReadMessage()
		if err != nil {
			return
		}
		now, ok := u.rf.SessionCaller(r.Context(), s.hello.Token)
		if !ok || !allowed(now) {
			close(revoked)
			return
		}
		if !handle(kind, b) {
			return
		}
	}
}

// hold keeps an admitted socket open until it ends: its session ends or
// loses the right to it (revoked, changes: it closes saying so), ctx ends
// (the page left, output failed), gone closes (it closes with goneMsg),
// or vbmcd shuts down; it pings the page meanwhile.
func (u *UI) hold(ctx context.Context, s *wsSession, what string, revoked <-chan struct{}, changes <-chan redfish.Caller, gone <-chan struct{}, goneMsg consoleMsg) {
	ping := time.NewTicker(wsPing)
	defer ping.Stop()
	for {
		select {
		case <-revoked:
			u.ended(s, what)
			return
		case _, ok := <-changes:
			if !ok {
				if u.beforeEnd != nil {
					<-u.beforeEnd
				}
				if ctx.Err() == nil || isClosed(revoked) {
					u.ended(s, what)
				}
				return
			}
		case <-gone:
			s.wmu.Lock()
			closeWith(s.ws, websocket.CloseNormalClosure, goneMsg)
			s.wmu.Unlock()
			return
		case <-ctx.Done():
			select {
			case <-revoked:
				u.ended(s, what)
			default:
			}
			return
		case <-u.done:
			s.wmu.Lock()
			closeWith(s.ws, websocket.CloseGoingAway, consoleMsg{Error: "vbmcd is shutting down"})
			s.wmu.Unlock()
			return
		case <-ping.C:
			s.wmu.Lock()
			err := s.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(10*time.Second))
			s.wmu.Unlock()
			if err != nil {
				return
			}
		}
	}
}

// wsSession is an accepted websocket of the console's (a serial console,
// a graphical one): same origin, its session token valid, its caller
// allowed to use machine m's consoles, holding a slot.
type wsSession struct {
	ws      *websocket.Conn
	nc      net.Conn
	hello   struct{ Token string }
	c       redfish.Caller
	m       *machine.Machine
	release func()
	wmu     sync.Mutex // guards writes
}

// send writes one message, in at most 10 s.
func (s *wsSession) send(kind int, b []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_ = s.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return s.ws.WriteMessage(kind, b)
}

func (s *wsSession) close() {
	s.release()
	_ = s.ws.Close()
}

// accept upgrades a console's websocket and admits it: the handshake's
// Origin is this listener's, the first message (within authWait) is a
// valid session token whose caller may use machine id's consoles
// (ConfigureComponents; need says so when it may not), and a slot is free.
// A socket that is not admitted is closed with the reason as a text message
// and a 1008 (1013 when no slot is free); false then. A backend whose
// machines lack the console (has false) gets a 501 naming it (what) before
// any upgrade.
func (u *UI) accept(w http.ResponseWriter, r *http.Request, id string, has bool, what, need string) (*wsSession, bool) {
	if !has {
		apiError(w, http.StatusNotImplemented, "this backend's machines have no "+what)
		return nil, false
	}
	if !sameOrigin(r) {
		u.refused(r, "websocket handshake from another origin, or without one")
	}
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return nil, false // the upgrader answered
	}
	s := &wsSession{ws: ws, nc: ws.NetConn()}
	ok := false
	defer func() {
		if !ok {
			_ = ws.Close()
		}
	}()
	_ = s.nc.SetDeadline(time.Time{})
	ws.SetReadLimit(maxInput)

	// The first message is the session token.
	_ = ws.SetReadDeadline(time.Now().Add(authWait))
	if err := ws.ReadJSON(&s.hello); err != nil {
		u.refused(r, "no session token within "+authWait.String())
		closeWith(ws, websocket.ClosePolicyViolation, consoleMsg{Error: "no session token"})
		return nil, false
	}
	c, valid := u.rf.SessionCaller(r.Context(), s.hello.Token)
	if !valid {
		u.refused(r, "no valid session token")
		closeWith(ws, websocket.ClosePolicyViolation, consoleMsg{Error: "no valid session: log in again"})
		return nil, false
	}
	m, err := u.svc.Get(id)
	if err != nil || !c.CanAccess(m) {
		closeWith(ws, websocket.ClosePolicyViolation, consoleMsg{Error: "no such system"})
		return nil, false
	}
	if !c.Can(accounts.ConfigureComponents) {
		closeWith(ws, websocket.ClosePolicyViolation, consoleMsg{Error: "insufficient privilege", Detail: need})
		return nil, false
	}
	admission.AuthenticatedConn(r)
	release, why := u.slots.take(c.Key(), r.RemoteAddr)
	if why != "" {
		closeWith(ws, websocket.CloseTryAgainLater, consoleMsg{Error: why})
		return nil, false
	}
	_ = ws.SetReadDeadline(time.Time{})
	s.c, s.m, s.release = c, m, release
	ok = true
	return s, true
}

// allowed is whether a caller now may still use machine id's consoles.
func (u *UI) allowed(id string) func(redfish.Caller) bool {
	return func(now redfish.Caller) bool {
		m, err := u.svc.Get(id)
		return err == nil && now.CanAccess(m) && now.Can(accounts.ConfigureComponents)
	}
}

// ended closes an admitted socket whose session ended or whose role no
// longer allows what (a console), saying which.
func (u *UI) ended(s *wsSession, what string) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	msg := consoleMsg{Error: "your session ended", Detail: "Logged out, deleted or expired, or its account was deleted or disabled: log in again."}
	if now, ok := u.rf.SessionState(context.Background(), s.hello.Token); ok && !u.allowed(s.m.ID)(now) {
		msg = consoleMsg{Error: "insufficient privilege", Detail: "The account's role no longer allows the " + what + "."}
	}
	u.log.Info(what+" closed: "+msg.Error, zap.String("system", s.m.ID), zap.String("user", accounts.LogName(s.c.User)))
	closeWith(s.ws, websocket.ClosePolicyViolation, msg)
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func closeWith(ws *websocket.Conn, code int, msg consoleMsg) {
	b, _ := json.Marshal(msg)
	_ = ws.WriteMessage(websocket.TextMessage, b)
	reason := msg.Error
	if len(reason) > 120 {
		reason = reason[:120]
	}
	_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
}

// chunk is console output, or a status change when status is set.
type chunk struct {
	data   []byte
	status *consoleMsg
}

type consoleViewer struct {
	out  chan chunk
	gone bool
}

// tap is one machine's shared console stream.
type tap struct {
	id     string
	opener ConsoleOpener
	svc    *machine.Service

	mu      sync.Mutex
	buf     []byte // the last scrollBack bytes of output
	viewers map[*consoleViewer]struct{}
	con     io.ReadWriteCloser
	status  consoleMsg
	stop    context.CancelFunc // nil when the reader is not running
	used    time.Time
	take    chan struct{} // a viewer asks to take the console back
	// logOff is how far the machine's serial log was shown when the last
	// stream ended (-1: never connected); overlap is the end of the log
	// shown at the last connect, which the stream's first output may
	// repeat.
	logOff  int64
	overlap []byte
}

func (t *tap) takeBack() {
	select {
	case t.take <- struct{}{}:
	default:
	}
}

type taps struct {
	mu sync.Mutex
	m  map[string]*tap
}

// join returns the tap of machine id, starting its reader when it has none.
func (ts *taps) join(u *UI, opener ConsoleOpener, id string) *tap {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.m == nil {
		ts.m = map[string]*tap{}
	}
	t := ts.m[id]
	if t == nil {
		if len(ts.m) >= tapsKept {
			ts.evict()
		}
		t = &tap{id: id, opener: opener, svc: u.svc, viewers: map[*consoleViewer]struct{}{}, take: make(chan struct{}, 1), logOff: -1}
		ts.m[id] = t
	}
	t.mu.Lock()
	t.used = time.Now()
	if t.stop == nil {
		ctx, cancel := context.WithCancel(context.Background())
		t.stop = cancel
		go t.read(ctx, u.done)
	}
	t.mu.Unlock()
	return t
}

// evict drops the scroll-back of the least recently used machine that no
// one views; ts.mu is held.
func (ts *taps) evict() {
	var old *tap
	for _, t := range ts.m {
		t.mu.Lock()
		idle := len(t.viewers) == 0
		used := t.used
		t.mu.Unlock()
		if idle && (old == nil || used.Before(old.used)) {
			old = t
		}
	}
	if old != nil {
		delete(ts.m, old.id)
	}
}

// leave removes v; the last viewer to leave stops the reader.
func (ts *taps) leave(t *tap, v *consoleViewer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.viewers, v)
	if len(t.viewers) == 0 && t.stop != nil {
		t.stop()
		t.stop = nil
		if t.con != nil {
			_ = t.con.Close()
			t.con = nil
		}
	}
}

// add makes a viewer, queued the scroll-back and the current status first.
func (t *tap) add() *consoleViewer {
	v := &consoleViewer{out: make(chan chunk, viewerQueued)}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.buf) > 0 {
		v.out <- chunk{data: append([]byte(nil), t.buf...)}
	}
	if t.status != (consoleMsg{}) {
		st := t.status
		v.out <- chunk{status: &st}
	}
	t.viewers[v] = struct{}{}
	return v
}

// publish sends c to every viewer; t.mu is held. A viewer whose queue is
// full is dropped (its page reconnects and gets the scroll-back).
func (t *tap) publish(c chunk) {
	for v := range t.viewers {
		select {
		case v.out <- c:
		default:
			if !v.gone {
				v.gone = true
				close(v.out)
			}
			delete(t.viewers, v)
		}
	}
}

func (t *tap) setStatus(st consoleMsg) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.status == st {
		return
	}
	t.status = st
	t.publish(chunk{status: &st})
}

func (t *tap) write(b []byte) {
	t.mu.Lock()
	con := t.con
	t.mu.Unlock()
	if con != nil {
		_, _ = con.Write(b)
	}
}

// read copies console output to the viewers and the scroll-back, opening
// the console again when it ends (the machine stopped), until ctx ends.
func (t *tap) read(ctx context.Context, done <-chan struct{}) {
	events, cancel := t.svc.Backend().Subscribe()
	defer cancel()
	buf := make([]byte, 4096)
	t.mu.Lock()
	taken := t.status.Status == "taken"
	t.mu.Unlock()
	if m, err := t.svc.Get(t.id); taken && err == nil && m.Power == machine.PowerOn {
		// Taken before the last viewer left (a page reloaded, a dropped
		// connection): still theirs until a viewer asks.
		if !t.waitTakeBack(ctx, done, events) {
			return
		}
	}
	for ctx.Err() == nil {
		octx, ocancel := context.WithTimeout(ctx, 10*time.Second)
		con, err := t.opener.OpenConsole(octx, t.id)
		ocancel()
		if err != nil {
			detail := err.Error()
			if errors.Is(err, machine.ErrConflict) {
				detail = "The machine is off; the console connects when it starts."
			}
			t.setStatus(consoleMsg{Status: "waiting", Detail: detail})
			if !machine.WaitChange(ctx, done, events, t.id, reopenEvery) {
				return
			}
			continue
		}
		t.mu.Lock()
		if ctx.Err() != nil {
			t.mu.Unlock()
			_ = con.Close()
			return
		}
		t.con = con
		t.mu.Unlock()
		t.setStatus(consoleMsg{Status: "connected"})
		t.catchUp()
		for first := true; ; first = false {
			n, err := con.Read(buf)
			var out []byte
			if n > 0 {
				out = append([]byte(nil), buf[:n]...)
				if first {
					out = t.trimOverlap(out)
				}
			}
			if len(out) > 0 {
				t.mu.Lock()
				t.buf = append(t.buf, out...)
				if over := len(t.buf) - scrollBack; over > 0 {
					t.buf = append(t.buf[:0:0], t.buf[over:]...)
				}
				t.publish(chunk{data: out})
				t.mu.Unlock()
			}
			if err != nil {
				break
			}
		}
		t.mu.Lock()
		if t.con == con {
			t.con = nil
		}
		t.mu.Unlock()
		_ = con.Close()
		t.logEnd()
		if ctx.Err() != nil {
			return
		}
		if m, err := t.svc.Get(t.id); err == nil && m.Power == machine.PowerOn {
			// The machine runs: someone else (an IPMI SOL session,
			// virsh console) took the stream.
			t.setStatus(consoleMsg{Status: "taken", Detail: "A console outside vbmcd (virsh console) took the serial console."})
			if !t.waitTakeBack(ctx, done, events) {
				return
			}
			continue
		}
		t.setStatus(consoleMsg{Status: "waiting", Detail: "The console stream ended: the machine stopped."})
		if !machine.WaitChange(ctx, done, events, t.id, reopenEvery) {
			return
		}
	}
}

// waitTakeBack waits until a viewer asks for the console back or the
// machine stops running (its next start's console is anyone's); false when
// ctx or done ends first.
func (t *tap) waitTakeBack(ctx context.Context, done <-chan struct{}, events <-chan machine.Event) bool {
	select {
	case <-t.take: // a request made before the stream ended is stale
	default:
	}
	return machine.WaitEvent(ctx, done, events, t.take, func(ev machine.Event) bool {
		return ev.ID == t.id && ev.Machine != nil && ev.Machine.Power != machine.PowerOn
	})
}

// The serial log's scroll-back. libvirt gives a console that connects
// after a start nothing of what the machine printed before it (the first
// second of a boot or more on a loaded host); when the backend also writes
// the serial output to a log file this process can read
// (machine.ConsoleLogger), each connect first shows what the log holds
// beyond what was shown: the last scrollBack bytes at the first connect,
// then what was printed while no stream was open.

// logSize returns the machine's serial log file and its size.
func (t *tap) logSize() (string, int64, bool) {
	cl, ok := t.svc.Backend().(machine.ConsoleLogger)
	if !ok {
		return "", 0, false
	}
	path, err := cl.ConsoleLog(t.id)
	if err != nil {
		return "", 0, false
	}
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return "", 0, false
	}
	return path, fi.Size(), true
}

// catchUp publishes what the serial log holds that was not shown yet.
func (t *tap) catchUp() {
	path, size, ok := t.logSize()
	if !ok {
		return
	}
	t.mu.Lock()
	from := t.logOff
	t.mu.Unlock()
	if from < 0 || from > size { // first connect, or a new log
		from = max(0, size-scrollBack)
	}
	from = max(from, size-scrollBack)
	if from == size {
		return
	}
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	out := make([]byte, size-from)
	n, _ := f.ReadAt(out, from)
	out = out[:n]
	if n == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, out...)
	if over := len(t.buf) - scrollBack; over > 0 {
		t.buf = append(t.buf[:0:0], t.buf[over:]...)
	}
	t.overlap = append([]byte(nil), out[max(0, len(out)-overlapMax):]...)
	t.publish(chunk{data: out})
}

// overlapMax bounds the repeat looked for between the log shown at a
// connect and the stream's first output (both hold what was printed
// between the connect and the log's read).
const overlapMax = 4096

// trimOverlap cuts from a stream's first output what the log shown at the
// connect already ended with (at least 4 bytes, so that a lone repeated
// newline is not mistaken for one).
func (t *tap) trimOverlap(out []byte) []byte {
	t.mu.Lock()
	tail := t.overlap
	t.overlap = nil
	t.mu.Unlock()
	for k := min(len(tail), len(out)); k >= 4; k-- {
		if bytes.Equal(tail[len(tail)-k:], out[:k]) {
			return out[k:]
		}
	}
	return out
}

// logEnd records how far the log goes when a stream ends: the next
// connect shows what comes after.
func (t *tap) logEnd() {
	if _, size, ok := t.logSize(); ok {
		t.mu.Lock()
		t.logOff = size
		t.mu.Unlock()
	}
}
