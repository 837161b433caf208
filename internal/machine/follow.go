package machine

import (
	"context"
	"sync"
	"time"
)

// WaitChange waits until machine id changes (an event for it arrives on
// events) or every passes: true then, for the caller to look again (a
// console to reopen, a session to retry). False when ctx or quit ends
// first. A closed events channel leaves the timer to wake the caller.
func WaitChange(ctx context.Context, quit <-chan struct{}, events <-chan Event, id string, every time.Duration) bool {
	timer := time.NewTimer(every)
	defer timer.Stop()
	return WaitEvent(ctx, quit, events, timer.C, func(ev Event) bool { return ev.ID == id })
}

// WaitEvent waits until an event of events matches or wake delivers: true
// then. False when ctx or quit ends first. A closed events channel leaves
// wake to wake the caller.
func WaitEvent[T any](ctx context.Context, quit <-chan struct{}, events <-chan Event, wake <-chan T, match func(Event) bool) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-quit:
			return false
		case <-wake:
			return true
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if match(ev) {
				return true
			}
		}
	}
}

// ForEach calls fn with each event from events, in order, until ctx ends
// or events is closed (a subscription cancelled).
func ForEach(ctx context.Context, events <-chan Event, fn func(Event)) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			fn(ev)
		}
	}
}

// Gone returns the keys of have (per-machine things: a BMC, a listener, a
// domain's record) that seen, the machines there now, lacks. It reads have
// under mu (an RWMutex's RLocker will do) and returns before its caller
// stops each, which may take that lock again.
func Gone[V any](mu sync.Locker, have map[string]V, seen map[string]bool) []string {
	mu.Lock()
	defer mu.Unlock()
	var gone []string
	for id := range have {
		if !seen[id] {
			gone = append(gone, id)
		}
	}
	return gone
}

// Follow is the loop of whoever keeps something per machine (a BMC, a
// listener): until ctx ends it calls resync every every (events may be
// lost by a slow reader, and what would not start is retried) and on for
// each event of events (a Backend's Subscribe). A closed events channel
// leaves the ticks. The caller resyncs once before (what it keeps is right
// from the start) and stops what it keeps once Follow returns.
func Follow(ctx context.Context, events <-chan Event, every time.Duration, resync func(context.Context), on func(context.Context, Event)) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case ev, ok := <-events:
			if ok {
				on(ctx, ev)
			} else {
				events = nil // closed: the ticks go on
			}
		case <-tick.C:
			resync(ctx)
		case <-ctx.Done():
			return
		}
	}
}

// Sync makes what a follower keeps (have, by machine ID, read under mu)
// follow ms, the machines there now: ensure for each of ms, in its order,
// then stop for each ID of have that ms lacks (Gone).
func Sync[V any](ms []*Machine, mu sync.Locker, have map[string]V, ensure func(*Machine), stop func(id string)) {
	seen := make(map[string]bool, len(ms))
	for _, m := range ms {
		seen[m.ID] = true
		ensure(m)
	}
	for _, id := range Gone(mu, have, seen) {
		stop(id)
	}
}
