package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// run feeds test2json lines (as go test -json writes them) to a summary.
func run(t *testing.T, lines ...string) (*summary, string) {
	t.Helper()
	var out bytes.Buffer
	s := newSummary(&out)
	for _, l := range lines {
		var e event
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("bad fixture line %s: %v", l, err)
		}
		s.add(e)
	}
	return s, out.String()
}

const pkg = `"Package":"example.com/p"`

func TestPrintsWhatPlainGoTestPrints(t *testing.T) {
	_, got := run(t,
		`{"Action":"run",`+pkg+`,"Test":"TestOK"}`,
		`{"Action":"output",`+pkg+`,"Test":"TestOK","Output":"=== RUN   TestOK\n"}`,
		`{"Action":"output",`+pkg+`,"Test":"TestOK","Output":"ok_test.go:9: quiet when it passes\n"}`,
		`{"Action":"pass",`+pkg+`,"Test":"TestOK","Elapsed":1.5}`,
		`{"Action":"output",`+pkg+`,"Test":"TestBad/case","Output":"bad_test.go:7: want 1, got 2\n"}`,
		`{"Action":"output",`+pkg+`,"Test":"TestBad/case","Output":"    --- FAIL: TestBad/case (0.00s)\n"}`,
		`{"Action":"fail",`+pkg+`,"Test":"TestBad/case","Elapsed":0}`,
		`{"Action":"output",`+pkg+`,"Test":"TestBad","Output":"--- FAIL: TestBad (0.00s)\n"}`,
		`{"Action":"fail",`+pkg+`,"Test":"TestBad","Elapsed":0.2}`,
		`{"Action":"output",`+pkg+`,"Output":"FAIL\n"}`,
		`{"Action":"output",`+pkg+`,"Output":"FAIL\texample.com/p\t1.7s\n"}`,
		`{"Action":"fail",`+pkg+`,"Elapsed":1.7}`,
	)
	want := "bad_test.go:7: want 1, got 2\n    --- FAIL: TestBad/case (0.00s)\n--- FAIL: TestBad (0.00s)\nFAIL\texample.com/p\t1.7s\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("printed (-want +got):\n%s", diff)
	}
}

func TestTimedOutPackageShowsItsRunningTest(t *testing.T) {
	_, got := run(t,
		`{"Action":"output",`+pkg+`,"Test":"TestDone","Output":"not shown\n"}`,
		`{"Action":"pass",`+pkg+`,"Test":"TestDone","Elapsed":3}`,
		`{"Action":"output",`+pkg+`,"Test":"TestHangs","Output":"hangs_test.go:12: waiting for the node\n"}`,
		`{"Action":"output",`+pkg+`,"Output":"panic: test timed out after 45m0s\n"}`,
		`{"Action":"fail",`+pkg+`,"Elapsed":2700}`,
	)
	for _, want := range []string{"panic: test timed out after 45m0s", "hangs_test.go:12: waiting for the node"} {
		if !strings.Contains(got, want) {
			t.Errorf("output %q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "not shown") {
		t.Errorf("a passing test's output was printed: %q", got)
	}
}

func TestSlowestFirstTopLevelOnly(t *testing.T) {
	s, _ := run(t,
		`{"Action":"pass",`+pkg+`,"Test":"TestA","Elapsed":2}`,
		`{"Action":"pass",`+pkg+`,"Test":"TestB/sub","Elapsed":9}`,
		`{"Action":"pass",`+pkg+`,"Test":"TestB","Elapsed":9.5}`,
		`{"Action":"skip",`+pkg+`,"Test":"TestC","Elapsed":0}`,
		`{"Action":"fail",`+pkg+`,"Test":"TestD","Elapsed":4}`,
	)
	var got []string
	for _, t := range s.slowest(3) {
		got = append(got, t.test+" "+t.result+" "+seconds(t.elapsed))
	}
	want := []string{"TestB pass 9.5s", "TestD fail 4s", "TestA pass 2s"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("slowest (-want +got):\n%s", diff)
	}
	var rep bytes.Buffer
	s.report(&rep, 2)
	if !strings.Contains(rep.String(), "slowest 2 of 4 tests (15.5s summed") {
		t.Errorf("report header: %q", rep.String())
	}
}

// TestParallelSubtestsCountTheirWallTime: a test whose subtests run in
// parallel reports 0s of its own; the summary takes the wall time from its
// first event to its end.
func TestParallelSubtestsCountTheirWallTime(t *testing.T) {
	s, _ := run(t,
		`{"Time":"2026-11-29T02:00:00Z","Action":"run",`+pkg+`,"Test":"TestAgent"}`,
		`{"Time":"2026-11-29T02:00:00.1Z","Action":"run",`+pkg+`,"Test":"TestAgent/29"}`,
		`{"Time":"2026-11-29T02:05:00Z","Action":"pass",`+pkg+`,"Test":"TestAgent/29","Elapsed":299.9}`,
		`{"Time":"2026-11-29T02:07:00Z","Action":"pass",`+pkg+`,"Test":"TestAgent","Elapsed":0}`,
		`{"Action":"pass",`+pkg+`,"Test":"TestNoTime","Elapsed":1.5}`,
	)
	var got []string
	for _, t := range s.slowest(2) {
		got = append(got, t.test+" "+seconds(t.elapsed))
	}
	if diff := cmp.Diff([]string{"TestAgent 7m0s", "TestNoTime 1.5s"}, got); diff != "" {
		t.Errorf("slowest (-want +got):\n%s", diff)
	}
}
