package sim

import (
	"context"
	"image"
	"image/color"
	"image/draw"
	"slices"
	"time"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"github.com/bmlab/bmlab/internal/machine"
)

// A simulated machine's screen (machine.Screener): a text screen drawn
// from the machine's state, deterministic for a given state. It shows who
// the machine is, its power and boot override, and what was typed on it
// since it started: a printable key is its character, Enter starts a new
// line, Backspace takes the last character back, any other key shows as
// its name in angle brackets ("<F2>"). Scripts and tests can type on it
// and read it back, as on a real screen, without a VM.

// ScreenWidth and ScreenHeight are a simulated screen's size in pixels.
const (
	ScreenWidth  = 640
	ScreenHeight = 400
)

const (
	screenCols   = 80
	screenLines  = 20 // lines of typed text kept
	screenMargin = 8
	lineHeight   = 18
)

// KeyDelay is how long a simulated machine takes to take one key: typing
// on it takes time, as on a real keyboard.
var KeyDelay = time.Millisecond

// Screenshot implements machine.Screener.
func (b *Backend) Screenshot(_ context.Context, id string) (image.Image, error) {
	b.mu.RLock()
	k, m, err := b.findOn(id)
	var typed []string
	if err == nil {
		if n := b.changed[k]; n != nil {
			typed = append(typed, n.typed...)
		}
	}
	b.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	lines := []string{
		"bmlab simulated server " + m.Name,
		"UUID " + m.ID,
		"Power " + string(m.Power) + "   Boot " + string(m.Settings.Boot.Target) + " " + string(m.Settings.Boot.Enabled) + " " + string(m.Settings.Boot.Mode),
		"",
	}
	for i, l := range typed {
		if i == 0 {
			l = "> " + l
		}
		lines = append(lines, l)
	}
	img := image.NewRGBA(image.Rect(0, 0, ScreenWidth, ScreenHeight))
	draw.Draw(img, img.Bounds(), image.NewUniform(color.Black), image.Point{}, draw.Src)
	d := font.Drawer{Dst: img, Src: image.NewUniform(color.RGBA{0xd0, 0xd0, 0xd0, 0xff}), Face: basicfont.Face7x13}
	for i, l := range lines {
		d.Dot = fixed.P(screenMargin, screenMargin+lineHeight*(i+1))
		d.DrawString(l)
	}
	return img, nil
}

// TypeKeys implements machine.Screener.
func (b *Backend) TypeKeys(ctx context.Context, id string, keys []machine.Keystroke, still func() error) (int, error) {
	for i, k := range keys {
		if err := still(); err != nil {
			return i, err
		}
		b.mu.Lock()
		kk, _, err := b.findOn(id)
		if err == nil {
			n := b.node(kk)
			n.typed = typeKey(n.typed, k)
		}
		b.mu.Unlock()
		if err != nil {
			return i, err
		}
		select {
		case <-ctx.Done():
			return i + 1, ctx.Err()
		case <-time.After(KeyDelay):
		}
	}
	return len(keys), nil
}

// typeKey is the screen's text after key k.
func typeKey(lines []string, k machine.Keystroke) []string {
	if len(lines) == 0 {
		lines = []string{""}
	}
	last := len(lines) - 1
	plain := !k.Ctrl && !k.Alt
	switch {
	case plain && k.Key == "Enter":
		lines = append(lines, "")
	case plain && k.Key == "Backspace":
		if l := lines[last]; l != "" {
			lines[last] = l[:len(l)-1]
		}
	case plain && len(k.Key) == 1:
		lines[last] += k.Key
	case plain && k.Key == "Space":
		lines[last] += " "
	default:
		lines[last] += "<" + k.String() + ">"
	}
	for i, l := range lines {
		if len(l) > screenCols {
			lines[i] = l[:screenCols]
		}
	}
	if len(lines) > screenLines {
		lines = lines[len(lines)-screenLines:]
	}
	return slices.Clone(lines)
}
