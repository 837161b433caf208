package machine

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/testenv"
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

// fakeFollower keeps a name per machine, as a face keeps a BMC per
// machine, over a fake store of machines.
type fakeFollower struct {
	mu    sync.Mutex
	store []*Machine        // the machines there now
	have  map[string]string // what it keeps: ID → the name it was started with
	log   []string          // ensure/stop calls, in order
}

func (f *fakeFollower) list() []*Machine {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.store)
}

func (f *fakeFollower) ensure(m *Machine) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.have[m.ID] != m.Name {
		f.have[m.ID] = m.Name
		f.log = append(f.log, "ensure "+m.ID+"="+m.Name)
	}
}

func (f *fakeFollower) stop(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.have[id]; ok {
		delete(f.have, id)
		f.log = append(f.log, "stop "+id)
	}
}

func (f *fakeFollower) resync(context.Context) { Sync(f.list(), &f.mu, f.have, f.ensure, f.stop) }

func (f *fakeFollower) on(_ context.Context, ev Event) {
	switch {
	case ev.Kind == EventRemoved:
		f.stop(ev.ID)
	case ev.Machine != nil:
		f.ensure(ev.Machine)
	}
}

// kept waits until what f keeps is want.
func (f *fakeFollower) kept(t *testing.T, what string, want map[string]string) {
	t.Helper()
	same := func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return maps.Equal(f.have, want)
	}
	if !testenv.WaitFor(5*time.Second, same) {
		f.mu.Lock()
		defer f.mu.Unlock()
		t.Fatalf("%s: keeps %v, want %v (calls %v)", what, f.have, want, f.log)
	}
}

// TestFollow: what a follower keeps follows the machines as they appear,
// change and vanish, by their events and, for what no event told, by the
// resync on the tick (also once the events channel is closed); Follow
// returns when ctx ends.
func TestFollow(t *testing.T) {
	a := &Machine{ID: "a", Name: "alpha"}
	f := &fakeFollower{store: []*Machine{a}, have: map[string]string{"stale": "x"}}
	// The caller's first resync: a started, what no machine has stopped.
	f.resync(context.Background())
	f.kept(t, "first resync", map[string]string{"a": "alpha"})

	ctx, cancel := context.WithCancel(context.Background())
	events := make(chan Event)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Follow(ctx, events, 20*time.Millisecond, f.resync, f.on)
	}()
	// A machine appears: its event starts it.
	b := &Machine{ID: "b", Name: "bravo"}
	f.mu.Lock()
	f.store = append(f.store, b)
	f.mu.Unlock()
	events <- Event{Kind: EventChanged, ID: "b", Machine: b}
	f.kept(t, "b appeared", map[string]string{"a": "alpha", "b": "bravo"})
	// A machine changes: its event carries it.
	a2 := &Machine{ID: "a", Name: "alpha-2"}
	f.mu.Lock()
	f.store[0] = a2
	f.mu.Unlock()
	events <- Event{Kind: EventChanged, ID: "a", Machine: a2}
	f.kept(t, "a changed", map[string]string{"a": "alpha-2", "b": "bravo"})
	// A machine vanishes with an event.
	f.mu.Lock()
	f.store = []*Machine{b}
	f.mu.Unlock()
	events <- Event{Kind: EventRemoved, ID: "a"}
	f.kept(t, "a removed", map[string]string{"b": "bravo"})
	// The events end; a machine that vanishes and one that appears
	// unannounced are found by the tick.
	close(events)
	c := &Machine{ID: "c", Name: "charlie"}
	f.mu.Lock()
	f.store = []*Machine{c}
	f.mu.Unlock()
	f.kept(t, "the tick after the events ended", map[string]string{"c": "charlie"})
	// ctx ends: Follow returns (the caller then stops what it keeps).
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Follow did not return after ctx ended")
	}
	// Each change once, in order, whether its event or a tick saw it first.
	if diff := cmp.Diff([]string{
		"ensure a=alpha", "stop stale", "ensure b=bravo", "ensure a=alpha-2", "stop a", "ensure c=charlie", "stop b",
	}, f.log); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}
