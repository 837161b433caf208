package sim

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseUUID(t *testing.T) {
	want := [16]byte{0xcf, 0x79, 0x13, 0xc7, 0xfe, 0x24, 0x59, 0xb2, 0x96, 0x05, 0xea, 0x9d, 0x61, 0x51, 0x61, 0x80}
	for _, c := range []struct {
		in string
		ok bool
	}{
		{"cf7913c7-fe24-59b2-9605-ea9d61516180", true},
		{"CF7913C7-FE24-59B2-9605-EA9D61516180", true},
		{"cf7913c7-fe24-59b2-9605-ea9d6151618", false},   // short
		{"cf7913c7-fe24-59b2-9605-ea9d615161800", false}, // long
		{"cf7913c7xfe24-59b2-9605-ea9d61516180", false},  // a dash missing
		{"cf7913c7-fe24-59b2-9605-ea9d6151618g", false},  // not hex
		{"cf7913c7-fe24-59b2-9605-ea9d6151618-", false},
		{"sim-0001", false},
	} {
		u, ok := parseUUID(c.in)
		if ok != c.ok {
			t.Errorf("parseUUID(%q): ok %v, want %v", c.in, ok, c.ok)
			continue
		}
		if ok {
			if diff := cmp.Diff(want, u); diff != "" {
				t.Errorf("parseUUID(%q) (-want +got):\n%s", c.in, diff)
			}
		}
	}
}

var sinkUUID [16]byte

func BenchmarkParseUUID(b *testing.B) {
	for range b.N {
		sinkUUID, _ = parseUUID("cf7913c7-fe24-59b2-9605-ea9d61516180")
	}
}
