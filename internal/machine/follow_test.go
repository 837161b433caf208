package machine

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestWaitChange: an event for the machine wakes the waiter, another
// machine's does not, the interval does; ctx or quit ending stops it.
func TestWaitChange(t *testing.T) {
	never := time.Hour
	ctx := context.Background()
	events := make(chan Event, 2)
	events <- Event{ID: "other"}
	events <- Event{ID: "m1"}
	if !WaitChange(ctx, nil, events, "m1", never) {
		t.Error("an event for m1 did not wake the waiter")
	}
	if len(events) != 0 {
		t.Errorf("%d events left: the other machine's was not passed over", len(events))
	}
	closed := make(chan Event)
	close(closed)
	if !WaitChange(ctx, nil, closed, "m1", time.Nanosecond) {
		t.Error("the interval did not wake the waiter (events closed)")
	}
	quit := make(chan struct{})
	close(quit)
	if WaitChange(ctx, quit, make(chan Event), "m1", never) {
		t.Error("true after quit ended")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if WaitChange(cancelled, nil, make(chan Event), "m1", never) {
		t.Error("true after ctx ended")
	}
}

// TestForEach: the events reach fn in order until the channel is closed;
// an ended ctx stops it.
func TestForEach(t *testing.T) {
	events := make(chan Event, 3)
	events <- Event{ID: "m1"}
	events <- Event{ID: "m2"}
	close(events)
	var got []string
	ForEach(context.Background(), events, func(ev Event) { got = append(got, ev.ID) })
	if !slices.Equal(got, []string{"m1", "m2"}) {
		t.Errorf("ForEach handed %v, want [m1 m2]", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ForEach(ctx, make(chan Event), func(ev Event) { t.Errorf("an event after ctx ended: %v", ev) })
}

func TestGone(t *testing.T) {
	var mu sync.RWMutex
	have := map[string]int{"a": 1, "b": 2, "c": 3}
	got := Gone(mu.RLocker(), have, map[string]bool{"b": true, "z": true})
	slices.Sort(got)
	if !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("gone %v, want [a c]", got)
	}
	if got := Gone(&sync.Mutex{}, map[string]bool{}, nil); got != nil {
		t.Errorf("gone from nothing: %v", got)
	}
}
