package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/testenv"
)

// TestProgressPlain: without a terminal, progress is a plain line at most
// every PlainEvery, under the step; the step's line follows.
func TestProgressPlain(t *testing.T) {
	old := PlainEvery
	PlainEvery = 50 * time.Millisecond
	defer func() { PlainEvery = old }()
	var out bytes.Buffer
	s := NewStatus(&out, ProgressPlain)
	s.Start("media")
	s.Progress("media", "0 of 3 nodes") // too soon after the start: dropped
	time.Sleep(60 * time.Millisecond)   // let PlainEvery pass (the rule under test is time itself)
	s.Progress("media", "1 of 3 nodes")
	s.Progress("media", "2 of 3 nodes") // within PlainEvery of the last: dropped
	s.Done("media", true, nil)
	got := out.String()
	if strings.Contains(got, "0 of 3") || strings.Contains(got, "2 of 3") || !strings.Contains(got, "   … media: 1 of 3 nodes\n") || !strings.Contains(got, " ✓ media ") {
		t.Errorf("plain output:\n%s", got)
	}
	if strings.Contains(got, "\r") || strings.Contains(got, "\033") {
		t.Errorf("plain output has terminal control characters: %q", got)
	}
}

// TestProgressTTY: on a terminal the progress rides on the spinner line.
func TestProgressTTY(t *testing.T) {
	var out testenv.Buffer
	s := NewStatus(&out, ProgressTTY)
	s.Start("bmcs")
	s.Progress("bmcs", "2 of 5 BMCs answer")
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "bmcs: 2 of 5 BMCs answer") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	s.Done("bmcs", true, nil)
	if got := out.String(); !strings.Contains(got, "bmcs: 2 of 5 BMCs answer") || !strings.Contains(got, " ✓ bmcs ") {
		t.Errorf("terminal output: %q", got)
	}
}
