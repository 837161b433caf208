package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// WriteFile writes data to the file name in dir (mode 0644) and returns
// its path, failing the test when it cannot.
func WriteFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
