// Package pace times repeated work: a Pacer spreads the requests of a load
// tool's clients evenly over time at a given rate, for soaks and latency
// figures below saturation; Every runs a periodic job (a probe, a resync,
// a sampler) until its context ends.
package pace

import (
	"context"
	"sync"
	"time"
)

// Pacer hands out send times, one every 1/rate seconds. A nil Pacer does not
// wait at all.
type Pacer struct {
	mu    sync.Mutex
	every time.Duration
	next  time.Time
}

// New returns a Pacer for rate sends a second, or nil when rate <= 0.
func New(rate int) *Pacer {
	if rate <= 0 {
		return nil
	}
	return &Pacer{every: time.Second / time.Duration(rate)}
}

// Wait blocks until the caller's turn and reports false if ctx ends first.
// A schedule that has fallen more than a second behind (a stalled server)
// starts again from now rather than sending the missed turns in a burst.
func (p *Pacer) Wait(ctx context.Context) bool {
	if p == nil {
		return ctx.Err() == nil
	}
	p.mu.Lock()
	now := time.Now()
	if p.next.Before(now.Add(-time.Second)) {
		p.next = now
	}
	at := p.next
	p.next = p.next.Add(p.every)
	p.mu.Unlock()
	d := time.Until(at)
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Every calls f once every d, the first time d from now, until ctx ends or
// f reports false. A call that overruns d delays the next one; missed
// ticks are not made up (time.Ticker drops them).
func Every(ctx context.Context, d time.Duration, f func() bool) {
	t := time.NewTicker(d)
	defer t.Stop()
	for more := true; more; {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			more = f()
		}
	}
}
