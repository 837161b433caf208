package bmcscreen

import (
	"fmt"
	"strings"

	"github.com/bmlab/bmlab/internal/rfb"
)

// Item is one element of a key sequence, as Bmlab.SendKeys takes it: text
// to type, or one named key with its modifiers.
type Item struct {
	Text string `json:"Text,omitempty"`
	Key  string `json:"Key,omitempty"`
}

// ParseSequence reads a key sequence as people write one: text, with
// named keys in angle brackets, as Packer's boot_command and expect
// scripts write them: "root<Enter>", "<Down><Down><Enter>",
// "<Ctrl-Alt-Del>", "<F2>". Names are those of rfb.KeyNames, case does not
// matter, with any of Ctrl-, Alt-, Shift- before them; "<lt>" types a "<".
func ParseSequence(s string) ([]Item, error) {
	var items []Item
	var text strings.Builder
	flush := func() {
		if text.Len() > 0 {
			items = append(items, Item{Text: text.String()})
			text.Reset()
		}
	}
	for i := 0; i < len(s); {
		if s[i] != '<' {
			text.WriteByte(s[i])
			i++
			continue
		}
		end := strings.IndexByte(s[i:], '>')
		if end < 0 {
			return nil, fmt.Errorf("a %q at byte %d opens a key name that no %q closes; type a %q as <lt>", "<", i, ">", "<")
		}
		name := s[i+1 : i+end]
		i += end + 1
		if strings.EqualFold(name, "lt") {
			text.WriteByte('<')
			continue
		}
		st, err := rfb.ParseKey(name)
		if err != nil {
			return nil, err
		}
		flush()
		items = append(items, Item{Key: st.String()})
	}
	flush()
	if len(items) == 0 {
		return nil, fmt.Errorf("nothing to type")
	}
	for _, it := range items {
		if it.Text != "" {
			if _, err := rfb.TextStrokes(it.Text); err != nil {
				return nil, err
			}
		}
	}
	return items, nil
}
