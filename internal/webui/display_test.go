package webui

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/bmlab/bmlab/internal/accounts"
	"github.com/bmlab/bmlab/internal/machine"
)

// The graphical console copies bytes both ways, unchanged, between the
// page and the display (the test plays the VNC server on the display's
// far end); a text message from the page is not the display's.
func TestDisplayCopiesBothWays(t *testing.T) {
	s := newConsoleServer(t)
	s.account(t, "operator", accounts.Operator)
	tok := s.login(t, "operator", "operator-pass1")
	ws, end := s.open(t, "display", tok, s.svc.List()[0].ID)

	hello := []byte("RFB 003.008\n")
	go func() { _, _ = end.Write(hello) }()
	_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	kind, b, err := ws.ReadMessage()
	if err != nil || kind != websocket.BinaryMessage || string(b) != string(hello) {
		t.Fatalf("the display's first bytes reached the page as %d %q (%v), want binary %q", kind, b, err, hello)
	}
	if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"Take":true}`)); err != nil {
		t.Fatal(err)
	}
	key := []byte{4, 1, 0, 0, 0, 0, 0, 'c'} // RFB KeyEvent: down, 'c'
	if !typed(ws, end, string(key), 5*time.Second) {
		t.Fatal("a key event from the page did not reach the display unchanged (or the text message did)")
	}
}

// A ReadOnly user, a bad token and a machine that is off get no display,
// each told why; a machine that stops closes its display. (A socket that
// sends no token is closed after authWait by the same accept as the serial
// console's: TestSlotsBehindTheToken.)
func TestDisplayRefused(t *testing.T) {
	s := newConsoleServer(t)
	s.account(t, "viewer", accounts.ReadOnly)
	s.account(t, "operator", accounts.Operator)
	ro := s.login(t, "viewer", "viewer-pass1")
	op := s.login(t, "operator", "operator-pass1")
	ms := s.svc.List()

	refused := func(t *testing.T, tok, id string, code int, want string) {
		t.Helper()
		ws, resp, err := dialer("127.0.0.1").Dial(s.wsURLOf("display", id), http.Header{"Origin": {s.srv.URL}})
		if err != nil {
			t.Fatalf("handshake: %v (%v)", err, resp)
		}
		defer ws.Close()
		if tok != "" {
			if err := ws.WriteJSON(map[string]string{"Token": tok}); err != nil {
				t.Fatal(err)
			}
		}
		_, last := closedWithin(t, ws, code, authWait+5*time.Second)
		if last.Error != want {
			t.Errorf("closed with %+v, want %q", last, want)
		}
	}
	t.Run("ReadOnly", func(t *testing.T) {
		refused(t, ro, ms[0].ID, websocket.ClosePolicyViolation, "insufficient privilege")
		select {
		case <-s.be.displays:
			t.Error("a ReadOnly user's socket opened the display")
		default:
		}
	})
	t.Run("bad token", func(t *testing.T) {
		refused(t, "not-a-token", ms[0].ID, websocket.ClosePolicyViolation, "no valid session: log in again")
	})
	t.Run("off", func(t *testing.T) {
		if err := s.svc.Reset(context.Background(), ms[1].ID, machine.ResetForceOff); err != nil {
			t.Fatal(err)
		}
		refused(t, op, ms[1].ID, websocket.CloseNormalClosure, "no display")
	})
	t.Run("stops", func(t *testing.T) {
		ws, end := s.open(t, "display", op, ms[0].ID)
		_ = end.Close() // qemu closes the display when the machine stops
		_, last := closedWithin(t, ws, websocket.CloseNormalClosure, 5*time.Second)
		if last.Error != "the display closed" {
			t.Errorf("closed with %+v, want the display closed", last)
		}
	})
}

// whoami says whether the machines have a screen.
func TestWhoamiDisplay(t *testing.T) {
	s := newConsoleServer(t)
	tok := s.login(t, user, pass)
	req, _ := http.NewRequest("GET", s.srv.URL+"/ui/api/whoami", nil)
	req.Header.Set("X-Auth-Token", tok)
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var w whoami
	if err := json.Unmarshal(b, &w); err != nil || !w.Display || w.NoVNCVersion != NoVNCVersion {
		t.Errorf("whoami %s (%v), want Display and noVNC %s", b, err, NoVNCVersion)
	}
}
