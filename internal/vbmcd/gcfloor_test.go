package vbmcd

import (
	"context"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestGCPercent(t *testing.T) {
	const mb = 1 << 20
	for _, tc := range []struct {
		name                 string
		live, scan, headroom uint64
		want                 int
	}{
		// 4 MB·p/100 = 1+8 MB first: p = 225, the goal 9 MB.
		{"small live heap", 1 * mb, mb / 2, 8 * mb, 225},
		// live+(live+scan)·p/100 = 6+8 MB first: p = 123.
		{"live+scan reach the goal first", 6 * mb, mb / 2, 8 * mb, 123},
		{"twice the live heap is more", 9 * mb, 0, 8 * mb, 100},
		{"empty", 0, 0, 8 * mb, 100},
		{"nearly empty: at most 100 times base", 1, 0, 1 << 40, 10000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := percent(tc.live, tc.scan, tc.headroom, 100); got != tc.want {
				t.Errorf("percent(%d, %d, %d) = %d, want %d", tc.live, tc.scan, tc.headroom, got, tc.want)
			}
		})
	}
}

// keepGCHeadroom raises GOGC after a collection that leaves a live heap
// under the headroom, gives Go's default back when the live heap passes
// it, and when the daemon ends.
func TestKeepGCHeadroom(t *testing.T) {
	t.Setenv("GOGC", "") // as a daemon started without it
	gogc := func() int { p := debug.SetGCPercent(100); debug.SetGCPercent(p); return p }
	collect := func() {
		// The finalizer runs after the collection; a second one waits
		// for it.
		for range 3 {
			runtime.GC()
		}
	}
	const headroom = 32 << 20 // more than this test binary's live heap
	ctx, cancel := context.WithCancel(context.Background())
	keepGCHeadroom(ctx, headroom)
	collect()
	var got []bool
	got = append(got, gogc() > 100)
	gcSink = make([]byte, headroom+headroom/2) // live past the headroom
	collect()
	got = append(got, gogc() == 100)
	gcSink = nil
	collect()
	got = append(got, gogc() > 100)
	cancel()
	collect()
	got = append(got, gogc() == 100)
	if diff := cmp.Diff([]bool{true, true, true, true}, got); diff != "" {
		t.Errorf("GOGC raised at a small live heap, 100 past the headroom, raised again, 100 after the end (-want +got):\n%s", diff)
	}
}

// gcSink holds what TestKeepGCHeadroom keeps live.
var gcSink []byte
