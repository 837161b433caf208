package testenv

import (
	"os"
	"testing"
	"time"
)

// TestWatchLines: each occurrence of the text is recorded once, in order,
// including one written in two pieces across two reads, and nothing is
// recorded for what does not contain it.
func TestWatchLines(t *testing.T) {
	path := t.TempDir() + "/serial.log"
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := WatchLines(t, path, "Linux version")
	write := func(s string) {
		t.Helper()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(n int) []time.Time {
		t.Helper()
		var got []time.Time
		if !WaitFor(5*time.Second, func() bool { got = seen(); return len(got) >= n }) {
			t.Fatalf("want %d sightings, got %d", n, len(got))
		}
		return got
	}
	write("BdsDxe: loading\r\n[    0.000000] Linux version 6.12\r\n")
	first := waitFor(1)
	write("[    1.0] Linux ver")
	time.Sleep(300 * time.Millisecond) // read apart
	write("sion 6.12 again\r\nLinux version twice on one line, Linux version\r\n")
	waitFor(4)
	time.Sleep(300 * time.Millisecond)
	write("nothing here\r\n")
	time.Sleep(300 * time.Millisecond)
	if got := seen(); len(got) != 4 || !got[0].Equal(first[0]) || got[1].Before(got[0]) || !got[3].Equal(got[2]) {
		t.Errorf("sightings %v, want 4 in order (the first at %v, the last two together)", got, first[0])
	}
}
