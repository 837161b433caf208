package vbmcd

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// gcHeadroom is the least heap the garbage collector lets a busy vbmcd
// allocate between two collections, while its live heap is small.
//
// Go collects when the heap reaches twice the live heap, 4 MB at the
// least. vbmcd's live heap is about 1 MB (the machines, the render cache,
// the types client-go and Prometheus register), and a Redfish GET
// allocates about 2.2 KB, most of it net/http's own (the request, its
// headers, the answer's headers): at the least heap the collector ran
// every 900 requests, 35 times a second under rfbench's 8 connections
// (181 collections in 5 s), and took about 1.2 µs of every request's
// 21 µs of CPU (issue 46: GOGC=400 cut vbmcd's CPU per request from 21.1
// to 19.9 µs). With the headroom kept at 8 MB it runs about a quarter as
// often (46 collections in 5 s).
//
// The memory it costs is bounded: the heap grows at most gcHeadroom past
// the live heap while that is under gcHeadroom (16 MB in all at most),
// and not at all beyond that, where Go's own rule (twice the live heap)
// already gives more room: an attack that makes vbmcd hold 100 MB meets
// the same collector as before (docs/security.md).
const gcHeadroom = 8 << 20

// keepGCHeadroom keeps the collector's goal at the live heap plus at
// least headroom, until ctx ends (then Go's default comes back): after
// every collection it sets the GOGC percentage that gives that goal for
// the live heap just measured, and the default again once the live heap
// is past headroom. GOGC set in the environment is the operator's choice
// and is left alone. The setting is the process's: daemons run together
// in one process (tests) share one tuner, which stops with the last.
func keepGCHeadroom(ctx context.Context, headroom uint64) {
	if os.Getenv("GOGC") != "" {
		return
	}
	gcTuning.Lock()
	defer gcTuning.Unlock()
	if gcTuning.users++; gcTuning.users == 1 {
		base := debug.SetGCPercent(100)
		debug.SetGCPercent(base)
		gcTuning.t = &gcTuner{base: base, headroom: headroom, current: base}
		gcTuning.t.arm()
	}
	context.AfterFunc(ctx, func() {
		gcTuning.Lock()
		defer gcTuning.Unlock()
		if gcTuning.users--; gcTuning.users == 0 {
			gcTuning.t.stop()
			gcTuning.t = nil
		}
	})
}

var gcTuning struct {
	sync.Mutex
	users int
	t     *gcTuner
}

// gcTuner sets the GOGC percentage after each collection (a finalizer on
// an object dropped at once runs after the collection that finds it
// unreachable, and arms the next).
type gcTuner struct {
	base     int
	headroom uint64

	mu      sync.Mutex
	stopped bool
	current int
}

// gcSentinel is the object whose finalizer follows the collections; it
// holds a pointer so that the allocator never batches it with others.
type gcSentinel struct{ _ *gcTuner }

func (g *gcTuner) arm() {
	runtime.SetFinalizer(&gcSentinel{}, func(*gcSentinel) {
		if g.tune() {
			g.arm()
		}
	})
}

// stop gives Go's default back; the next collection disarms the tuner.
func (g *gcTuner) stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopped = true
	debug.SetGCPercent(g.base)
}

// percent is the GOGC percentage that makes the collector's goal
// live+headroom, or base when base gives that much already; at most 100
// times base. Go's goal for a percentage p is the larger of
// live + (live+scan)·p/100 (the live heap, and p of it, the goroutine
// stacks and the globals: scan) and its least heap, 4 MB·p/100 (the
// runtime's defaultHeapMinimum; "A Guide to the Go Garbage Collector");
// both grow with p, so the goal is reached at the smaller of the two
// percentages that each give it.
func percent(live, scan, headroom uint64, base int) int {
	const least = 4 << 20
	all := live + scan
	if all == 0 || all*uint64(base)/100 >= headroom {
		return base
	}
	p := min(headroom*100/all, (live+headroom)*100/least, uint64(base)*100)
	return max(int(p), base)
}

// tune sets the percentage for the live heap the last collection left;
// false once stopped.
func (g *gcTuner) tune() bool {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}
	metrics.Read(s)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return false
	}
	for _, x := range s {
		if x.Value.Kind() != metrics.KindUint64 {
			return true
		}
	}
	if p := percent(s[0].Value.Uint64(), s[1].Value.Uint64()+s[2].Value.Uint64(), g.headroom, g.base); p != g.current {
		g.current = p
		debug.SetGCPercent(p)
	}
	return true
}
