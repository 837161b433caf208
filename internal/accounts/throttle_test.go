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

// The table stays bounded whatever sources fail; the ones forgotten first
// are those whose budget is whole again.
func TestThrottleBounded(t *testing.T) {
	th := NewThrottle(2, time.Second)
	now := time.Unix(1000, 0)
	th.now = func() time.Time { return now }
	th.Failed("198.51.100.1:1")
	th.Failed("198.51.100.1:1")
	for i := range maxSources + 500 {
		now = now.Add(time.Microsecond)
		th.Failed(fmt.Sprintf("10.%d.%d.%d:1", i>>16&255, i>>8&255, i&255))
	}
	if n := th.Sources(); n > maxSources {
		t.Errorf("%d sources tracked, want at most %d", n, maxSources)
	}
}
