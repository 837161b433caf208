// Command testtimes reads `go test -json` on stdin and prints what plain
// `go test` would (each package's ok/FAIL line, a failing test's output,
// build errors, a timed-out package's panic), then the slowest top-level
// tests with their packages. hack/test.sh pipes the whole suite through it so
// every CI log says where its minutes went (docs/tests.md).
//
//	go test -json ./... | go run ./hack/testtimes -top 25 -out _out/test-times.txt
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// event is one line of test2json's output (go doc test2json).
type event struct {
	Time        time.Time
	Action      string
	Package     string
	Test        string
	Elapsed     float64
	Output      string
	ImportPath  string
	FailedBuild string
}

type key struct{ pkg, test string }

// timing is one finished top-level test.
type timing struct {
	pkg, test, result string
	elapsed           float64
}

// summary holds each running test's output until it passes (dropped) or
// fails (printed), as plain go test does.
type summary struct {
	w       io.Writer
	pending map[key][]string
	started map[key]time.Time
	times   []timing
}

func newSummary(w io.Writer) *summary {
	return &summary{w: w, pending: map[key][]string{}, started: map[key]time.Time{}}
}

func (s *summary) add(e event) {
	if e.Action == "build-output" {
		fmt.Fprint(s.w, e.Output)
		return
	}
	if e.Test == "" {
		switch e.Action {
		case "output":
			// A package's own lines: its ok/FAIL line, a panic or
			// timeout outside any test. The bare PASS/FAIL before the
			// ok line is what plain go test hides.
			if e.Output != "PASS\n" && e.Output != "FAIL\n" {
				fmt.Fprint(s.w, e.Output)
			}
		case "fail":
			// The package failed with tests still running (a timeout,
			// a crash): their output so far is the evidence.
			for k, lines := range s.pending {
				if k.pkg == e.Package {
					s.flush(lines)
					delete(s.pending, k)
				}
			}
		}
		return
	}
	// Every line of a test, its subtests' included, is kept under its
	// top-level test until that one ends.
	name, _, sub := strings.Cut(e.Test, "/")
	top := key{e.Package, name}
	if _, ok := s.started[top]; !ok && !e.Time.IsZero() {
		s.started[top] = e.Time
	}
	switch {
	case e.Action == "output":
		if !strings.HasPrefix(e.Output, "=== ") {
			s.pending[top] = append(s.pending[top], e.Output)
		}
	case sub:
		// A subtest's end: its lines stay with its parent.
	case e.Action == "pass" || e.Action == "skip" || e.Action == "fail":
		// A test whose subtests run in parallel reports its own
		// function's time only; the wall time from its first event to
		// its end is what it held the run.
		elapsed := e.Elapsed
		if start, ok := s.started[top]; ok && !e.Time.IsZero() {
			elapsed = max(elapsed, e.Time.Sub(start).Seconds())
		}
		s.times = append(s.times, timing{e.Package, e.Test, e.Action, elapsed})
		if e.Action == "fail" {
			s.flush(s.pending[top])
		}
		delete(s.pending, top)
		delete(s.started, top)
	}
}

func (s *summary) flush(lines []string) {
	for _, line := range lines {
		fmt.Fprint(s.w, line)
	}
}

// slowest returns the n longest top-level tests, longest first.
func (s *summary) slowest(n int) []timing {
	t := append([]timing(nil), s.times...)
	sort.SliceStable(t, func(i, j int) bool { return t[i].elapsed > t[j].elapsed })
	if len(t) > n {
		t = t[:n]
	}
	return t
}

func (s *summary) report(w io.Writer, n int) {
	var total float64
	for _, t := range s.times {
		total += t.elapsed
	}
	fmt.Fprintf(w, "\nslowest %d of %d tests (%s summed):\n",
		min(n, len(s.times)), len(s.times), seconds(total))
	for _, t := range s.slowest(n) {
		fmt.Fprintf(w, "%9s  %-4s %s %s\n", seconds(t.elapsed), t.result, strings.TrimPrefix(t.pkg, "github.com/bmlab/bmlab/"), t.test)
	}
}

func seconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(100 * time.Millisecond).String()
}

func main() {
	top := flag.Int("top", 25, "how many of the slowest tests to list")
	out := flag.String("out", "", "also write every test's time to this file, slowest first")
	flag.Parse()

	s := newSummary(os.Stdout)
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			// Not test2json's: go test's own stderr-like lines pass through.
			fmt.Println(string(line))
			continue
		}
		s.add(e)
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "testtimes: reading go test -json: %v\n", err)
		os.Exit(2)
	}
	s.report(os.Stdout, *top)
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			fmt.Fprintf(os.Stderr, "testtimes: %v\n", err)
			os.Exit(2)
		}
		s.report(f, len(s.times))
		if err := f.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "testtimes: %v\n", err)
			os.Exit(2)
		}
	}
}
