package machine_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/rfb"
	"github.com/bmlab/bmlab/internal/sim"
)

// rfbDisplays is a backend whose machines' displays are a small RFB
// server in the test (a 2×1 screen, red and blue), which records the key
// events it gets. The sim is held as a machine.Backend, so that its own
// screen (a Screener) is not what the model uses.
type rfbDisplays struct {
	machine.Backend
	mu   sync.Mutex
	keys []rfb.KeyEvent
}

func (d *rfbDisplays) OpenDisplay(_ context.Context, _ string) (io.ReadWriteCloser, error) {
	ours, theirs := net.Pipe()
	go d.serve(theirs)
	return ours, nil
}

func (d *rfbDisplays) serve(c net.Conn) {
	defer c.Close()
	buf := make([]byte, 64)
	c.Write([]byte("RFB 003.008\n"))
	io.ReadFull(c, buf[:12])
	c.Write([]byte{1, 1})
	io.ReadFull(c, buf[:1])
	c.Write([]byte{0, 0, 0, 0})
	io.ReadFull(c, buf[:1])
	c.Write(append([]byte{0, 2, 0, 1}, make([]byte, 20)...)) // 2×1, no name
	io.ReadFull(c, buf[:32])                                 // pixel format, encodings
	for {
		if _, err := io.ReadFull(c, buf[:1]); err != nil {
			return
		}
		switch buf[0] {
		case 3:
			io.ReadFull(c, buf[:9])
			c.Write([]byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 2, 0, 1, 0, 0, 0, 0, 0, 0, 0xff, 0, 0xff, 0, 0, 0})
		case 4:
			io.ReadFull(c, buf[:7])
			d.mu.Lock()
			d.keys = append(d.keys, rfb.KeyEvent{Sym: binary.BigEndian.Uint32(buf[3:7]), Down: buf[0] == 1})
			d.mu.Unlock()
		default:
			return
		}
	}
}

// Through a display, the model reads the screen and types keys as RFB
// key events, Shift held for a capital, stopping when still says so.
func TestScreenThroughDisplay(t *testing.T) {
	be := &rfbDisplays{Backend: sim.New(1)}
	svc := machine.NewService(be, nil)
	id := be.List()[0].ID
	if !svc.HasScreen() {
		t.Fatal("a backend with displays has no screen")
	}
	img, err := svc.Screenshot(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if r, _, _, _ := img.At(0, 0).RGBA(); r>>8 != 0xff || img.Bounds().Dx() != 2 {
		t.Errorf("the screen: %v, first pixel %v", img.Bounds(), img.At(0, 0))
	}
	keys, _ := machine.TextKeys("aB")
	enter, _ := machine.ParseKey("Enter")
	n, err := svc.SendKeys(context.Background(), id, append(keys, enter), func() error { return nil })
	if err != nil || n != 3 {
		t.Fatalf("SendKeys: %d, %v", n, err)
	}
	want := []rfb.KeyEvent{{Sym: 'a', Down: true}, {Sym: 'a', Down: false}, {Sym: 0xffe1, Down: true}, {Sym: 'B', Down: true}, {Sym: 'B', Down: false}, {Sym: 0xffe1, Down: false}, {Sym: 0xff0d, Down: true}, {Sym: 0xff0d, Down: false}}
	be.mu.Lock()
	got := be.keys
	be.keys = nil
	be.mu.Unlock()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("key events (-want +got):\n%s", diff)
	}
	stop := errors.New("revoked")
	calls := 0
	n, err = svc.SendKeys(context.Background(), id, keys, func() error {
		if calls++; calls > 1 {
			return stop
		}
		return nil
	})
	if n != 1 || !errors.Is(err, stop) {
		t.Errorf("revoked after the first key: %d, %v", n, err)
	}
	if _, err := svc.SendKeys(context.Background(), id, []machine.Keystroke{{Key: "Nope"}}, func() error { return nil }); !errors.Is(err, machine.ErrInvalid) {
		t.Errorf("an unknown key: %v", err)
	}
}

// A backend with neither a display nor a screen of its own: the model
// says so.
func TestNoScreen(t *testing.T) {
	svc := machine.NewService(struct{ machine.Backend }{sim.New(1)}, nil)
	if svc.HasScreen() {
		t.Error("a backend without displays has a screen")
	}
	id := svc.Backend().List()[0].ID
	if _, err := svc.Screenshot(context.Background(), id); !errors.Is(err, machine.ErrUnsupported) {
		t.Errorf("Screenshot: %v", err)
	}
	if _, err := svc.SerialLog(id); !errors.Is(err, machine.ErrUnsupported) {
		t.Errorf("SerialLog: %v", err)
	}
}
