package steps

import (
	"fmt"
	"io"
	"time"
)

// progressReader reports a download's progress: bytes, rate and time left
// (when the total is known), at most every 250 ms.
type progressReader struct {
	r      io.Reader
	total  int64 // -1: unknown
	done   int64
	start  time.Time
	last   time.Time
	report func(string)
}

func newProgressReader(r io.Reader, total int64, report func(string)) *progressReader {
	now := time.Now()
	return &progressReader{r: r, total: total, start: now, last: now, report: report}
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.done += int64(n)
	if now := time.Now(); now.Sub(p.last) >= 250*time.Millisecond || err == io.EOF {
		p.last = now
		p.report(progressText(p.done, p.total, now.Sub(p.start)))
	}
	return n, err
}

// progressText is "412 MiB of 1.1 GiB, 38 MiB/s, 18 s left".
func progressText(done, total int64, elapsed time.Duration) string {
	rate := float64(done) / max(elapsed.Seconds(), 0.001)
	s := size(done)
	if total > 0 {
		s += " of " + size(total)
	}
	s += fmt.Sprintf(", %s/s", size(int64(rate)))
	if total > 0 && rate > 0 && done < total {
		left := time.Duration(float64(total-done) / rate * float64(time.Second)).Round(time.Second)
		s += fmt.Sprintf(", %s left", left)
	}
	return s
}

func size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
