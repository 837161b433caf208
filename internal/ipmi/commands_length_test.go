package ipmi

import (
	"testing"

	"github.com/bmlab/bmlab/internal/ipmi/wire"
)

// TestRequestLengths: every command the LAN face takes answers C7h
// (request data length invalid, IPMI v2.0 §5.2) to a request one byte
// longer than its table's bound, and one byte shorter. The check is the
// dispatcher's: the handlers no longer make it, and without it a short
// request reads past its data (a panic). The bounds themselves are the
// command tables'; the commands' own tests hold the lengths that matter.
func TestRequestLengths(t *testing.T) {
	l := newLab(t, 1, "127.0.0.1", nil)
	c := l.dial(t, 0, 17)
	for k, h := range handlers {
		if h.face == systemOnly {
			continue // D4h over LAN, whatever the length
		}
		var lengths []int
		if h.max < 0xffff {
			lengths = append(lengths, h.max+1)
		}
		if h.min > 0 {
			lengths = append(lengths, h.min-1)
		}
		for _, n := range lengths {
			code, _, err := c.Do(k.netFn, k.cmd, make([]byte, n)...)
			if err != nil {
				t.Fatalf("netFn %#x cmd %#x with %d bytes: %v", k.netFn, k.cmd, n, err)
			}
			if code != wire.CodeDataLengthInvalid {
				t.Errorf("netFn %#x cmd %#x with %d bytes of data (table: %d to %d): %v, want %v", k.netFn, k.cmd, n, h.min, h.max, code, wire.CodeDataLengthInvalid)
			}
		}
	}
}
