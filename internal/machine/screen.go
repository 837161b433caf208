package machine

import (
	"context"
	"errors"
	"fmt"
	"image"
	"io"
	"os"
	"sync"
	"time"

	"github.com/bmlab/bmlab/internal/rfb"
)

// A machine's screen, without a browser: a screenshot, and keys typed on
// its keyboard, for the faces' hands-free console (Redfish's screenshot
// and keystroke actions). The screen is the one the web console's
// graphical console shows: the backend's display (DisplayOpener: a libvirt
// domain's VNC socket), read and typed on with an RFB client
// (internal/rfb), or, for a backend that draws its machines' screens
// itself (the sim), its Screener.
//
// Why the display and not libvirt's virDomainScreenshot and
// virDomainSendKey: one path to the pixels the web console shows and the
// keys it types (an RFB KeyEvent, as noVNC sends), for any backend whose
// display speaks RFB (KubeVirt's VNC subresource does too), and no second
// libvirt call for the model to carry; the cost is that a domain without
// vbmcd's VNC socket, or on a remote libvirt host, has no screen here
// either, as in the web console.

// Keystroke is one key pressed while modifiers are held (rfb.Stroke):
// "Enter", "Ctrl-Alt-Delete", "a".
type Keystroke = rfb.Stroke

// ParseKey reads a key's name with its modifiers (rfb.ParseKey).
func ParseKey(s string) (Keystroke, error) { return rfb.ParseKey(s) }

// TextKeys are the keystrokes that type s (rfb.TextStrokes).
func TextKeys(s string) ([]Keystroke, error) { return rfb.TextStrokes(s) }

// KeyNames lists the keys a sequence may name (rfb.KeyNames).
func KeyNames() []string { return rfb.KeyNames() }

// Screener is what a backend implements when it draws its machines'
// screens itself rather than opening a display (the sim). An off machine
// is an ErrConflict.
type Screener interface {
	Screenshot(ctx context.Context, id string) (image.Image, error)
	// TypeKeys types keys, in order, calling still before each; it stops
	// with still's error and returns how many it typed.
	TypeKeys(ctx context.Context, id string, keys []Keystroke, still func() error) (int, error)
}

// KeyGap is how long the model waits after each key event it sends to a
// display: a guest drains its keyboard's buffer in its own time, and
// QEMU's PS/2 keyboard queue holds 16 bytes (hw/input/ps2.c,
// PS2_QUEUE_SIZE) and drops what comes while it is full; a firmware that
// polls it under TCG empties it slowly. At 15 ms a 200-character line
// reached a Linux guest whole (BenchmarkScreen); no shorter gap was tried.
var KeyGap = 15 * time.Millisecond

// HasScreen reports whether the backend's machines have a screen the model
// can read and type on.
func (s *Service) HasScreen() bool {
	switch s.be.(type) {
	case Screener, DisplayOpener:
		return true
	}
	return false
}

// Screenshot returns what machine id's screen shows now. An off machine is
// an ErrConflict; a backend without screens an ErrUnsupported.
func (s *Service) Screenshot(ctx context.Context, id string) (image.Image, error) {
	m, err := s.Get(id)
	if err != nil {
		return nil, err
	}
	if sc, ok := s.be.(Screener); ok {
		return sc.Screenshot(ctx, m.ID)
	}
	cl, err := s.display(ctx, m)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	img, err := cl.Capture(ctx)
	if err != nil {
		return nil, fmt.Errorf("the screen of %s: %w", m.Name, err)
	}
	return img, nil
}

// display opens machine m's display and runs the RFB handshake on it.
func (s *Service) display(ctx context.Context, m *Machine) (*rfb.Client, error) {
	d, ok := s.be.(DisplayOpener)
	if !ok {
		return nil, fmt.Errorf("%w: this backend's machines have no screen", ErrUnsupported)
	}
	c, err := d.OpenDisplay(ctx, m.ID)
	if err != nil {
		return nil, err
	}
	cl, err := rfb.Handshake(ctx, c)
	if err != nil {
		return nil, fmt.Errorf("the display of %s: %w", m.Name, err)
	}
	return cl, nil
}

// SendKeys types keys on machine id's keyboard, in order, one typist per
// machine at a time (a second waits for the first). still is called before
// each key: its error (the caller's session ended, its privilege was
// lowered) stops the typing and is returned, with how many keys were
// typed. An off machine is an ErrConflict.
func (s *Service) SendKeys(ctx context.Context, id string, keys []Keystroke, still func() error) (int, error) {
	m, err := s.Get(id)
	if err != nil {
		return 0, err
	}
	for _, k := range keys {
		if _, err := k.Events(); err != nil {
			return 0, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	unlock, err := s.typists.lock(ctx, m.ID)
	if err != nil {
		return 0, err
	}
	defer unlock()
	if sc, ok := s.be.(Screener); ok {
		return sc.TypeKeys(ctx, m.ID, keys, still)
	}
	cl, err := s.display(ctx, m)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	for i, k := range keys {
		if err := still(); err != nil {
			return i, err
		}
		evs, _ := k.Events()
		for _, ev := range evs {
			if err := cl.Key(ev.Sym, ev.Down); err != nil {
				return i, fmt.Errorf("type on the screen of %s: %w", m.Name, err)
			}
			select {
			case <-ctx.Done():
				return i, ctx.Err()
			case <-time.After(KeyGap):
			}
		}
	}
	return len(keys), nil
}

// typists holds one lock per machine that keys are being typed on.
type typists struct {
	mu    sync.Mutex
	locks map[string]chan struct{}
}

// lock waits until no one else types on machine id (or ctx ends).
func (t *typists) lock(ctx context.Context, id string) (unlock func(), err error) {
	t.mu.Lock()
	if t.locks == nil {
		t.locks = map[string]chan struct{}{}
	}
	ch := t.locks[id]
	if ch == nil {
		ch = make(chan struct{}, 1)
		t.locks[id] = ch
	}
	t.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// SerialTail bounds what SerialLog returns: the last 64 KiB.
const SerialTail = 64 << 10

// SerialLog returns the end of what machine id printed on its serial port
// since it started (at most SerialTail bytes), from the serial log file
// the backend writes (ConsoleLogger: libvirt's serial log on this host,
// which libvirt starts anew at each start). A backend, or a machine,
// without one is an ErrUnsupported.
func (s *Service) SerialLog(id string) ([]byte, error) {
	m, err := s.Get(id)
	if err != nil {
		return nil, err
	}
	cl, ok := s.be.(ConsoleLogger)
	if !ok {
		return nil, fmt.Errorf("%w: this backend's machines keep no serial log", ErrUnsupported)
	}
	path, err := cl.ConsoleLog(m.ID)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w: %w", ErrUnsupported, err) // the machine is there; its log is not
	}
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("the serial log of %s: %w", m.Name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: the serial log of %s, %s, is not a regular file", ErrUnsupported, m.Name, path)
	}
	from := max(0, fi.Size()-SerialTail)
	out := make([]byte, fi.Size()-from)
	n, err := f.ReadAt(out, from)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read the serial log of %s: %w", m.Name, err)
	}
	return out[:n], nil
}
