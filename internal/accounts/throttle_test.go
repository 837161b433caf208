package accounts

import (
	"fmt"
	"testing"
	"time"
)

func TestThrottle(t *testing.T) {
	th := NewThrottle(3, time.Second)
	now := time.Unix(1000, 0)
	th.now = func() time.Time { return now }
	const a = "192.0.2.1:5000"
	for i := range 3 {
		if w := th.Wait(a); w != 0 {
			t.Fatalf("failure %d: asked to wait %v within the burst", i, w)
		}
		th.Failed(a)
	}
	if w := th.Wait(a); w != time.Second {
		t.Errorf("after the burst: wait %v, want 1s", w)
	}
	if w := th.Wait("192.0.2.1:6000"); w == 0 {
		t.Errorf("another port of the same address is not slowed")
	}
	if w := th.Wait("192.0.2.2:5000"); w != 0 {
		t.Errorf("another address is slowed: %v", w)
	}
	now = now.Add(400 * time.Millisecond)
	if w := th.Wait(a); w != 600*time.Millisecond {
		t.Errorf("400ms later: wait %v, want 600ms", w)
	}
	now = now.Add(600 * time.Millisecond)
	if w := th.Wait(a); w != 0 {
		t.Errorf("a second later: wait %v, want 0", w)
	}
	th.Failed(a)
	if w := th.Wait(a); w != time.Second {
		t.Errorf("one earned try spent: wait %v, want 1s", w)
	}
	// IPv6 sources are counted by /64.
	for range 3 {
		th.Failed("[2001:db8::1]:623")
	}
	if w := th.Wait("[2001:db8::ffff]:623"); w == 0 {
		t.Errorf("another address of the same /64 is not slowed")
	}
	var nilT *Throttle
	nilT.Failed(a)
	if nilT.Wait(a) != 0 {
		t.Errorf("a nil throttle waits")
	}
}

// failEach has n distinct sources (10.x.y.z) fail once each, a microsecond
// apart on the clock *now.
func failEach(th *Throttle, now *time.Time, n int) {
	for i := range n {
		*now = now.Add(time.Microsecond)
		th.Failed(fmt.Sprintf("10.%d.%d.%d:1", i>>16&255, i>>8&255, i&255))
	}
}

// The table stays bounded whatever sources fail; the ones forgotten first
// are those whose budget is whole again.
func TestThrottleBounded(t *testing.T) {
	th := NewThrottle(2, time.Second)
	now := time.Unix(1000, 0)
	th.now = func() time.Time { return now }
	th.Failed("198.51.100.1:1")
	th.Failed("198.51.100.1:1")
	failEach(th, &now, maxSources+500)
	if n := th.Sources(); n > maxSources {
		t.Errorf("%d sources tracked, want at most %d", n, maxSources)
	}
}

// A source that spent its budget stays blocked however many other sources
// fail after it: a full table forgets idle sources, never one blocked now
// while another may go (issue 25: it was forgotten after 4,200 others).
func TestThrottleKeepsSourceUnderAttack(t *testing.T) {
	th := NewThrottle(2, time.Minute)
	now := time.Unix(1000, 0)
	th.now = func() time.Time { return now }
	const attacker = "198.51.100.1:1"
	th.Failed(attacker)
	th.Failed(attacker)
	if th.Wait(attacker) == 0 {
		t.Fatal("the attacker is not blocked after its burst")
	}
	failEach(th, &now, maxSources+4200)
	if n := th.Sources(); n > maxSources {
		t.Errorf("%d sources tracked, want at most %d", n, maxSources)
	}
	if th.Wait(attacker) == 0 {
		t.Errorf("the blocked source was forgotten after %d other sources failed once each", maxSources+4200)
	}
	// A table full of blocked sources still takes a new one: the one
	// whose wait ends first goes.
	th2 := NewThrottle(1, time.Minute)
	th2.now = th.now
	failEach(th2, &now, maxSources)
	th2.Failed(attacker)
	if th2.Wait(attacker) == 0 || th2.Sources() != maxSources {
		t.Errorf("a table full of blocked sources: the new one waits %v, %d tracked", th2.Wait(attacker), th2.Sources())
	}
	if th2.Wait("10.0.0.0:1") != 0 || th2.Wait("10.0.0.1:1") == 0 {
		t.Errorf("not the source whose wait ends first was forgotten")
	}
}

// Guesses spread over the /64s of a /52 buy about one /48's budget, not
// one per /64; another /48 is not slowed (issue 25: a /52 got 4,096
// buckets).
func TestThrottleIPv6RollsUpTo48(t *testing.T) {
	const burst = 3
	th := NewThrottle(burst, time.Hour)
	now := time.Unix(1000, 0)
	th.now = func() time.Time { return now }
	tries := 0
	for i := range 4096 { // 2001:db8:0:0::/52 holds /64s 0 to fff
		addr := fmt.Sprintf("[2001:db8:0:%x::1]:623", i)
		for th.Wait(addr) == 0 && tries < 100000 {
			th.Failed(addr)
			tries++
		}
	}
	if want := (rollupAt + 1) * burst; tries > want {
		t.Errorf("the /52 got %d guesses, want at most %d", tries, want)
	}
	if th.Wait("[2001:db8:0:ffff::9]:623") == 0 {
		t.Errorf("a /64 of the same /48 that never failed is not slowed")
	}
	if w := th.Wait("[2001:db8:1::1]:623"); w != 0 {
		t.Errorf("another /48 is slowed: %v", w)
	}
	// Fewer /64s than rollupAt keep their own budgets.
	th = NewThrottle(burst, time.Hour)
	th.now = func() time.Time { return now }
	for i := range rollupAt - 1 {
		for range burst {
			th.Failed(fmt.Sprintf("[2001:db8:5:%x::1]:623", i))
		}
	}
	if w := th.Wait("[2001:db8:5:ff::1]:623"); w != 0 {
		t.Errorf("%d failing /64s slowed the whole /48: %v", rollupAt-1, w)
	}
}
