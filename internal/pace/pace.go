// Package pace spreads the requests of a load tool's clients evenly over
// time at a given rate, for soaks and latency figures below saturation.
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
