package testenv

import (
	"sync/atomic"
	"testing"
	"time"
)

// Every counts its calls from 0, ends when f returns false, and its stop
// returns only once the goroutine has ended: no call runs after it.
func TestEvery(t *testing.T) {
	var calls atomic.Int32
	ended := make(chan struct{})
	stop := Every(time.Millisecond, func(i int) bool {
		if int(calls.Add(1))-1 != i {
			t.Errorf("call %d numbered %d", calls.Load()-1, i)
		}
		if i == 4 {
			close(ended)
			return false
		}
		return true
	})
	<-ended
	stop()
	if n := calls.Load(); n != 5 {
		t.Errorf("%d calls after f returned false at the fifth, want 5", n)
	}

	calls.Store(0)
	var stopped atomic.Bool
	stop = Every(time.Millisecond, func(int) bool {
		if stopped.Load() {
			t.Error("a call after stop returned")
		}
		calls.Add(1)
		return true
	})
	if !WaitFor(5*time.Second, func() bool { return calls.Load() >= 3 }) {
		t.Fatal("fewer than 3 calls in 5 s")
	}
	stop()
	stopped.Store(true)
}
