package pace

import (
	"context"
	"testing"
	"time"
)

// Fifty turns at 1,000 a second cannot come sooner than 49 ms; a nil Pacer
// never waits; a cancelled wait says so.
func TestTurnsAreSpread(t *testing.T) {
	p := New(1000)
	start := time.Now()
	for range 50 {
		p.Wait(context.Background())
	}
	if d := time.Since(start); d < 49*time.Millisecond {
		t.Errorf("50 turns at 1000/s in %v", d)
	}
	if New(0) != nil || !(*Pacer)(nil).Wait(context.Background()) {
		t.Errorf("rate 0 must not pace")
	}
	p.next = time.Now().Add(time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if p.Wait(ctx) {
		t.Errorf("a wait an hour ahead with a cancelled context returned true")
	}
}

// A schedule far behind restarts from now instead of bursting.
func TestNoBurstAfterAStall(t *testing.T) {
	p := New(10)
	p.next = time.Now().Add(-time.Minute)
	p.Wait(context.Background())
	if behind := time.Since(p.next); behind > 0 {
		t.Errorf("after a stall the next turn is %v in the past", behind)
	}
}

// Every calls its job on each tick until the job says stop, and not after
// the context ends.
func TestEvery(t *testing.T) {
	var n int
	Every(context.Background(), time.Millisecond, func() bool {
		n++
		return n < 3
	})
	if n != 3 {
		t.Errorf("a job that stops at its third call ran %d times", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	Every(ctx, time.Hour, func() bool {
		t.Errorf("a job ran after its context ended")
		return true
	})
}
