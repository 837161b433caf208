package cli

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Status draws one line per step, kind-style: a spinner while the step
// runs (on a terminal), then ✓ or ✗ with its duration. Notes print under
// their step. Off a terminal it prints plain lines, so logs stay readable.
type Status struct {
	out   io.Writer
	tty   bool
	mu    sync.Mutex
	step  string
	start time.Time
	stop  chan struct{}
	done  chan struct{}
	// detail is the running step's progress (a terminal shows it after
	// the spinner); printed is when plain output last printed one.
	detail  string
	printed time.Time
}

// Progress modes (labctl --progress).
const (
	ProgressAuto  = "auto"  // animated on a terminal, plain otherwise
	ProgressTTY   = "tty"   // animated
	ProgressPlain = "plain" // plain lines, progress at most every PlainEvery
)

// PlainEvery is how often plain output prints a step's progress.
var PlainEvery = 5 * time.Second

// NewStatus writes to out; mode says whether it animates (auto: when out
// is a terminal).
func NewStatus(out io.Writer, mode string) *Status {
	s := &Status{out: out, tty: mode == ProgressTTY}
	if f, ok := out.(*os.File); ok && mode == ProgressAuto {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			s.tty = true
		}
	}
	return s
}

// Progress shows how far the running step has come.
func (s *Status) Progress(step, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tty {
		s.detail = msg
		return
	}
	if time.Since(s.printed) < PlainEvery {
		return
	}
	s.printed = time.Now()
	fmt.Fprintf(s.out, "   … %s: %s\n", step, msg)
}

var spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// Start begins a step's line.
func (s *Status) Start(step string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.step, s.start, s.detail, s.printed = step, time.Now(), "", time.Now()
	if !s.tty {
		return
	}
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go func(stop, done chan struct{}) {
		defer close(done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for i := 0; ; i++ {
			s.mu.Lock()
			line := s.step
			if s.detail != "" {
				line += ": " + s.detail
			}
			fmt.Fprintf(s.out, "\r %s %s \033[K", spinner[i%len(spinner)], line)
			s.mu.Unlock()
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}(s.stop, s.done)
}

func (s *Status) halt() {
	if s.stop != nil {
		close(s.stop)
		s.mu.Unlock()
		<-s.done
		s.mu.Lock()
		s.stop = nil
		fmt.Fprint(s.out, "\r\033[K")
	}
}

// Note prints a line of detail under the running step.
func (s *Status) Note(step, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tty && s.stop != nil {
		fmt.Fprint(s.out, "\r\033[K")
	}
	fmt.Fprintf(s.out, "   · %s\n", msg)
}

// Done ends the step's line.
func (s *Status) Done(step string, changed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.halt()
	d := time.Since(s.start).Round(10 * time.Millisecond)
	mark, what := "✓", ""
	if !changed {
		what = " (no change)"
	}
	if err != nil {
		mark, what = "✗", ""
	}
	fmt.Fprintf(s.out, " %s %s%s %s\n", mark, step, what, d)
}
