package lograte

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// Refusals are lines of their own up to the burst; past it they are counted
// by key and summed up in one line at the interval's end, the most refused
// first; then a new interval has its burst again.
func TestRefusedBurstThenSummary(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	l := New(zap.New(core), "refused (summary)", 3, 200*time.Millisecond)
	for i := range 3 {
		l.Refused("a", "refused", zap.Int("i", i))
	}
	for i := range 50 {
		key := "192.0.2.1 alice"
		if i%10 == 0 {
			key = "192.0.2.2 bob"
		}
		l.Refused(key, "refused")
	}
	if n := logs.FilterMessage("refused").Len(); n != 3 {
		t.Fatalf("%d lines of their own, want the burst of 3", n)
	}
	var sum []observer.LoggedEntry
	deadline := time.Now().Add(5 * time.Second)
	for len(sum) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		sum = logs.FilterMessage("refused (summary)").All()
	}
	if len(sum) != 1 {
		t.Fatalf("%d summary lines, want 1", len(sum))
	}
	f := sum[0].ContextMap()
	if f["refused"] != int64(50) || !strings.HasPrefix(fmt.Sprint(f["most refused"]), "[192.0.2.1 alice: 45 192.0.2.2 bob: 5") {
		t.Errorf("summary %v, want 50 refused, alice's 45 first", f)
	}
	l.Refused("c", "refused")
	if n := logs.FilterMessage("refused").Len(); n != 4 {
		t.Errorf("after the summary, a refusal is a line of its own again: %d lines, want 4", n)
	}
}
