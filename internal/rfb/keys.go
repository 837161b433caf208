package rfb

import (
	"fmt"
	"slices"
	"strings"
)

// Stroke is one key pressed while modifiers are held: a named key (Key is
// one of KeyNames, in its canonical spelling) or one printable ASCII
// character (Key is that character).
type Stroke struct {
	Key              string
	Ctrl, Alt, Shift bool
}

// String spells the stroke as ParseKey reads it: "Ctrl-Alt-Delete", "a".
func (s Stroke) String() string {
	var b strings.Builder
	if s.Ctrl {
		b.WriteString("Ctrl-")
	}
	if s.Alt {
		b.WriteString("Alt-")
	}
	if s.Shift {
		b.WriteString("Shift-")
	}
	b.WriteString(s.Key)
	return b.String()
}

// X keysyms (X11 keysymdef.h), which RFB's KeyEvent carries (RFC 6143
// §7.5.4).
const (
	symShift = 0xffe1 // Shift_L
	symCtrl  = 0xffe3 // Control_L
	symAlt   = 0xffe9 // Alt_L
)

// named are the keys a sequence may name, with their keysyms.
var named = []struct {
	name    string
	sym     uint32
	aliases []string
}{
	{"Enter", 0xff0d, []string{"Return"}},
	{"Tab", 0xff09, nil},
	{"Esc", 0xff1b, []string{"Escape"}},
	{"Backspace", 0xff08, nil},
	{"Delete", 0xffff, []string{"Del"}},
	{"Insert", 0xff63, nil},
	{"Home", 0xff50, nil},
	{"End", 0xff57, nil},
	{"PageUp", 0xff55, nil},
	{"PageDown", 0xff56, nil},
	{"Up", 0xff52, nil},
	{"Down", 0xff54, nil},
	{"Left", 0xff51, nil},
	{"Right", 0xff53, nil},
	{"Space", 0x20, nil},
	{"F1", 0xffbe, nil}, {"F2", 0xffbf, nil}, {"F3", 0xffc0, nil}, {"F4", 0xffc1, nil},
	{"F5", 0xffc2, nil}, {"F6", 0xffc3, nil}, {"F7", 0xffc4, nil}, {"F8", 0xffc5, nil},
	{"F9", 0xffc6, nil}, {"F10", 0xffc7, nil}, {"F11", 0xffc8, nil}, {"F12", 0xffc9, nil},
}

// KeyNames lists the named keys, in their canonical spelling. Modifiers
// (Ctrl-, Alt-, Shift-) may precede any of them or one printable
// character: "Ctrl-Alt-Delete", "Alt-F2", "Ctrl-c".
func KeyNames() []string {
	out := make([]string, len(named))
	for i, k := range named {
		out[i] = k.name
	}
	return out
}

// shifted are the characters a US keyboard types with Shift held.
const shifted = `~!@#$%^&*()_+{}|:"<>?`

// ParseKey reads a key's name with its modifiers ("Enter", "Ctrl-Alt-Del",
// "shift-tab", "Ctrl-c"), case-insensitive for names and modifiers; a
// single character after the modifiers stands for itself.
func ParseKey(s string) (Stroke, error) {
	var st Stroke
	rest := s
	for {
		i := strings.IndexByte(rest, '-')
		if i <= 0 || i == len(rest)-1 {
			break
		}
		switch strings.ToLower(rest[:i]) {
		case "ctrl", "control":
			st.Ctrl = true
		case "alt":
			st.Alt = true
		case "shift":
			st.Shift = true
		default:
			return Stroke{}, unknownKey(s)
		}
		rest = rest[i+1:]
	}
	if len(rest) == 1 && rest[0] >= 0x21 && rest[0] <= 0x7e {
		st.Key = rest
		return st, nil
	}
	for _, k := range named {
		if strings.EqualFold(rest, k.name) || slices.ContainsFunc(k.aliases, func(a string) bool { return strings.EqualFold(rest, a) }) {
			st.Key = k.name
			return st, nil
		}
	}
	return Stroke{}, unknownKey(s)
}

func unknownKey(s string) error {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return fmt.Errorf("unknown key %q: want one of %s, or one printable character, after any of Ctrl-, Alt-, Shift-", s, strings.Join(KeyNames(), ", "))
}

// TextStrokes are the strokes that type s: printable ASCII characters,
// spaces, newlines (Enter) and tabs (Tab). Anything else is refused, with
// the offset of the first character that is.
func TextStrokes(s string) ([]Stroke, error) {
	out := make([]Stroke, 0, len(s))
	for i, r := range s {
		switch {
		case r == '\n':
			out = append(out, Stroke{Key: "Enter"})
		case r == '\t':
			out = append(out, Stroke{Key: "Tab"})
		case r == ' ':
			out = append(out, Stroke{Key: "Space"})
		case r > 0x20 && r < 0x7f:
			out = append(out, Stroke{Key: string(r)})
		default:
			return nil, fmt.Errorf("character %q at byte %d cannot be typed: only printable ASCII, spaces, tabs and newlines can", r, i)
		}
	}
	return out, nil
}

// Events are the key events that type s: modifiers pressed, the key
// pressed and released, the modifiers released in reverse order. A
// character typed with Shift on a US keyboard (capitals, "!@#…") holds
// Shift too.
func (s Stroke) Events() ([]KeyEvent, error) {
	var sym uint32
	shift := s.Shift
	if len(s.Key) == 1 {
		c := s.Key[0]
		if c < 0x21 || c > 0x7e {
			return nil, unknownKey(s.Key)
		}
		sym = uint32(c)
		shift = shift || (c >= 'A' && c <= 'Z') || strings.IndexByte(shifted, c) >= 0
	} else {
		i := slices.IndexFunc(named, func(k struct {
			name    string
			sym     uint32
			aliases []string
		}) bool {
			return k.name == s.Key
		})
		if i < 0 {
			return nil, unknownKey(s.Key)
		}
		sym = named[i].sym
	}
	var mods []uint32
	if s.Ctrl {
		mods = append(mods, symCtrl)
	}
	if s.Alt {
		mods = append(mods, symAlt)
	}
	if shift {
		mods = append(mods, symShift)
	}
	ev := make([]KeyEvent, 0, 2*len(mods)+2)
	for _, m := range mods {
		ev = append(ev, KeyEvent{Sym: m, Down: true})
	}
	ev = append(ev, KeyEvent{Sym: sym, Down: true}, KeyEvent{Sym: sym})
	for i := len(mods) - 1; i >= 0; i-- {
		ev = append(ev, KeyEvent{Sym: mods[i]})
	}
	return ev, nil
}

// KeyEvent is one key pressed or released.
type KeyEvent struct {
	Sym  uint32
	Down bool
}
