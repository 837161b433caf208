package testenv

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Update is the tests' -update flag: golden files are rewritten from what
// the code makes now instead of compared with it (go test ./internal/PKG
// -run TEST -update).
var Update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// Golden compares got with the golden file at path and reports their
// difference (-want +got); under -update it writes got there instead
// (making its directory) and compares nothing.
func Golden(t testing.TB, path string, got []byte) {
	t.Helper()
	if *Update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Errorf("%s differs (-want +got; go test -update rewrites it):\n%s", path, d)
	}
}
