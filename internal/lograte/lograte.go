// Package lograte logs refusals (a login refused, a request turned away
// for room, a websocket without a valid token) with their source and user,
// without letting a flood of them flood the log: each refusal is a line of
// its own until Burst lines were written in an interval of Every, then the
// rest of the interval's refusals are counted by what they name, and one
// line at the interval's end says how many there were and which sources
// and users were refused most.
package lograte

import (
	"sort"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Log is a rate-limited refusal log. It is safe for concurrent use.
type Log struct {
	log   *zap.Logger
	msg   string // the summary line's message
	burst int
	every time.Duration

	mu      sync.Mutex
	start   time.Time // the interval's start
	lines   int
	counts  map[string]int
	dropped int
	timer   *time.Timer
}

// New returns a log writing to log, burst lines per every at most, then
// one summary line with msg per interval.
func New(log *zap.Logger, msg string, burst int, every time.Duration) *Log {
	if log == nil {
		log = zap.NewNop()
	}
	return &Log{log: log, msg: msg, burst: burst, every: every}
}

// maxKeys bounds the distinct keys counted in one interval.
const maxKeys = 1024

// Refused logs one refusal as a line of its own (msg and fields) while the
// interval's burst lasts, else counts it under key ("source user why", say)
// for the interval's summary.
func (l *Log) Refused(key, msg string, fields ...zap.Field) {
	now := time.Now()
	l.mu.Lock()
	if now.Sub(l.start) >= l.every && l.dropped == 0 {
		l.start, l.lines = now, 0
	}
	if l.lines < l.burst {
		l.lines++
		l.mu.Unlock()
		l.log.Info(msg, fields...)
		return
	}
	if l.counts == nil {
		l.counts = map[string]int{}
	}
	if _, ok := l.counts[key]; ok || len(l.counts) < maxKeys {
		l.counts[key]++
	}
	l.dropped++
	if l.timer == nil {
		l.timer = time.AfterFunc(l.every-now.Sub(l.start), l.flush)
	}
	l.mu.Unlock()
}

// flush writes the interval's summary and starts a new interval.
func (l *Log) flush() {
	l.mu.Lock()
	counts, n := l.counts, l.dropped
	l.counts, l.dropped, l.timer = nil, 0, nil
	l.start, l.lines = time.Now(), 0
	l.mu.Unlock()
	if n > 0 {
		l.log.Warn(l.msg, zap.Int("refused", n), zap.Strings("most refused", Top(counts, 8)))
	}
}

// Top names the n keys with the highest counts, "key: count", highest
// first.
func Top(m map[string]int, n int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	if len(keys) > n {
		keys = keys[:n]
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k + ": " + strconv.Itoa(m[k])
	}
	return out
}
