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
	write("sion 6.12 again\r\nLinux version twice on one line, Linux version\r\n")
	waitFor(4)
	// Nothing is recorded for a line without the text: the line written
	// after it is the fifth sighting, not the sixth.
	write("nothing here\r\n")
	write("Linux version, the last\r\n")
	waitFor(5)
	if got := seen(); len(got) != 5 || !got[0].Equal(first[0]) || got[1].Before(got[0]) || !got[3].Equal(got[2]) || got[4].Before(got[3]) {
		t.Errorf("sightings %v, want 5 in order (the first at %v, the third and fourth together)", got, first[0])
	}
}

// TestCountAcross: a text cut in two between reads is counted once, in the
// read that completes it; a read without it counts nothing and carries no
// more than a text's length less one.
func TestCountAcross(t *testing.T) {
	const text = "Linux version"
	var carry string
	for _, tt := range []struct {
		read string
		want int
	}{
		{"[    1.0] Linux ver", 0},
		{"sion 6.12 again\r\nLinux version twice on one line, Linux version\r\n", 3},
		{"nothing here\r\n", 0},
		{"Linux", 0},
		{" ", 0},
		{"version", 1},
		{"Linux versionLinux version", 2},
	} {
		var got int
		got, carry = countAcross(carry, []byte(tt.read), text)
		if got != tt.want || len(carry) >= len(text) {
			t.Errorf("read %q: %d sightings, carry %q; want %d, a carry shorter than %q", tt.read, got, carry, tt.want, text)
		}
	}
}
