package webui

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/accounts"
	"github.com/bmlab/bmlab/internal/machine"
)

// The graphical console (KVM) over a websocket.
//
// /ui/display/<id> carries the machine's screen: the backend's display
// (machine.DisplayOpener: a libvirt domain's VNC socket) speaks RFB, and
// noVNC in the page speaks it too, so vbmcd only copies bytes between the
// two, after admitting the socket exactly as a serial console is admitted
// (accept: this listener's Origin, the session token as the first message,
// Operator or Administrator, a slot) and holding it to its session the
// same way (watch: it closes at once when the session ends or the role no
// longer allows it). Every message from the page (keys, pointer, update
// requests) is checked against the session as it is now and counts as
// using it. Each page has a display connection of its own (RFB's shared
// flag keeps the others on); nothing is queued in vbmcd: a slow page
// slows the VNC server's updates to it, which skips frames.
//
// The first text message is {"status":"connected"} once the display is
// open; after it, binary messages are RFB, and a text message is only ever
// the reason the socket is about to close.

// displayRead bounds one message of the display's output.
const displayRead = 64 << 10

func (u *UI) serveDisplay(w http.ResponseWriter, r *http.Request, id string) {
	opener, _ := u.svc.Backend().(machine.DisplayOpener)
	s, ok := u.accept(w, r, id, opener != nil, "graphical console", "The graphical console needs the Operator or Administrator role, as the serial console does.")
	if !ok {
		return
	}
	defer s.close()
	ws, user := s.ws, accounts.LogName(s.c.User)

	octx, ocancel := context.WithTimeout(r.Context(), 10*time.Second)
	vnc, err := opener.OpenDisplay(octx, s.m.ID)
	ocancel()
	if err != nil {
		detail := err.Error()
		if errors.Is(err, machine.ErrConflict) {
			detail = "The machine is off: connect again when it runs."
		}
		closeWith(ws, websocket.CloseNormalClosure, consoleMsg{Error: "no display", Detail: detail})
		return
	}
	defer vnc.Close()
	u.log.Info("graphical console opened", zap.String("system", s.m.ID), zap.String("user", user), zap.String("remote", r.RemoteAddr))
	defer u.log.Info("graphical console closed", zap.String("system", s.m.ID), zap.String("user", user))

	allowed := u.allowed(id)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	changes := u.watch(ctx, s.hello.Token, s.c, allowed)

	if s.send(websocket.TextMessage, []byte(`{"status":"connected"}`)) != nil {
		return
	}
	// The display's output to the page. It ends when the machine stops
	// (qemu closes the display).
	displayEnded := make(chan struct{})
	go func() {
		defer close(displayEnded)
		buf := make([]byte, displayRead)
		for {
			n, err := vnc.Read(buf)
			if n > 0 && s.send(websocket.BinaryMessage, buf[:n]) != nil {
				cancel()
				return
			}
			if err != nil {
				return
			}
		}
	}()
	// The page's input to the display.
	revoked := make(chan struct{})
	go u.input(r, s, allowed, cancel, revoked, func(kind int, b []byte) bool {
		if kind != websocket.BinaryMessage {
			return true
		}
		_, err := vnc.Write(b)
		return err == nil
	})
	u.hold(ctx, s, "graphical console", revoked, changes, displayEnded,
		consoleMsg{Error: "the display closed", Detail: "The machine stopped: connect again when it runs."})
}
