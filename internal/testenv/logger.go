package testenv

import (
	"bytes"
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Logger returns a debug-level zap logger that writes to the test's log
// until the test ends and discards what comes after. Backends keep
// goroutines (event loops, reconnects) that may log after a test returns;
// zaptest's logger panics then.
func Logger(t testing.TB) *zap.Logger {
	w := &testWriter{t: t}
	t.Cleanup(w.stop) // registered first, so it runs last
	enc := zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig())
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(w), zapcore.DebugLevel))
}

type testWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Logf("%s", bytes.TrimRight(p, "\n"))
	}
	return len(p), nil
}

func (w *testWriter) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
}
