package steps

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
)

func TestProgressText(t *testing.T) {
	for _, tt := range []struct {
		done, total int64
		elapsed     time.Duration
		want        string
	}{
		{412 << 20, 1200 << 20, 10 * time.Second, "412 MiB of 1.2 GiB, 41 MiB/s, 19s left"},
		{3 << 10, -1, time.Second, "3 KiB, 3 KiB/s"},
		{5 << 20, 5 << 20, time.Second, "5 MiB of 5 MiB, 5 MiB/s"},
	} {
		if got := progressText(tt.done, tt.total, tt.elapsed); got != tt.want {
			t.Errorf("progressText(%d, %d, %s) = %q, want %q", tt.done, tt.total, tt.elapsed, got, tt.want)
		}
	}
}

// TestProgressReaderReportsTheEnd: whatever the pace, the last report
// says everything arrived.
func TestProgressReaderReportsTheEnd(t *testing.T) {
	var last string
	r := newProgressReader(bytes.NewReader(make([]byte, 3<<20)), 3<<20, func(s string) { last = s })
	if _, err := io.Copy(io.Discard, r); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(last, "3 MiB of 3 MiB") {
		t.Errorf("last report %q", last)
	}
}
