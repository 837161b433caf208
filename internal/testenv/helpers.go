package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Buffer is a bytes.Buffer safe to write from one goroutine (a process's
// output copier, a daemon) and read from the test.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var (
	binMu  sync.Mutex
	bins   = map[string]string{}
	binDir string
)

// Binary builds the repository's command cmd/NAME once per test process
// and returns the binary's path, for tests that start it as its own process.
func Binary(t testing.TB, name string) string {
	t.Helper()
	Command(t, "go")
	binMu.Lock()
	defer binMu.Unlock()
	if p, ok := bins[name]; ok {
		return p
	}
	if binDir == "" {
		d, err := os.MkdirTemp("", "bmlab-bin-")
		if err != nil {
			t.Fatal(err)
		}
		binDir = d
	}
	p := filepath.Join(binDir, name)
	out, err := exec.Command("go", "build", "-o", p, filepath.Join(RepoRoot(), "cmd", name)).CombinedOutput()
	if err != nil {
		t.Fatal(fmt.Errorf("build %s: %v: %s", name, err, out))
	}
	bins[name] = p
	return p
}
