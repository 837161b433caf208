package session

import (
	"bytes"
	"testing"

	"github.com/bmlab/bmlab/internal/ipmi/wire"
)

func TestSealOpen(t *testing.T) {
	for _, id := range []uint8{0, 3, 17} {
		k, err := NewKeys(Suites[id], []byte("a session integrity key"))
		if err != nil {
			t.Fatal(err)
		}
		for n := 0; n < 40; n++ {
			payload := bytes.Repeat([]byte{0xab}, n)
			pkt := k.Seal(nil, wire.V2Header{SessionID: 5, Sequence: 9}, payload)
			p, err := wire.DecodeV2(pkt)
			if err != nil {
				t.Fatal(err)
			}
			got, err := k.Open(p)
			if err != nil || !bytes.Equal(got, payload) {
				t.Fatalf("suite %d len %d: %v % x", id, n, err, got)
			}
			if id != 0 {
				pkt[len(pkt)-1] ^= 1
				p, _ = wire.DecodeV2(pkt)
				if _, err := k.Open(p); err == nil {
					t.Fatalf("suite %d: a changed auth code was accepted", id)
				}
			}
		}
	}
}

func TestWindow(t *testing.T) {
	var w Window
	steps := []struct {
		seq  uint32
		want bool
	}{
		{0, false}, {3, true}, {3, false}, {4, true}, {2, true}, {2, false},
		{19, true}, {35, false}, {34, true}, {17, false}, {18, true}, {18, false},
		{1, false},
	}
	for i, s := range steps {
		if got := w.Accept(s.seq); got != s.want {
			t.Errorf("step %d: Accept(%d) = %v, want %v", i, s.seq, got, s.want)
		}
	}
}

func FuzzOpen(f *testing.F) {
	k, _ := NewKeys(Suites[17], []byte("sik"))
	f.Add(k.Seal(nil, wire.V2Header{SessionID: 1, Sequence: 1}, []byte{1, 2, 3}))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := wire.DecodeV2(b)
		if err != nil {
			return
		}
		_, _ = k.Open(p)
	})
}
