package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BrokenLab is one lab file of testdata/broken-labs: a file a new user
// could write, which labctl must refuse before it creates anything. Its
// header comments say what the error must contain (# want:, empty for the
// valid control), the pull secret beside it (# pull-secret:, "none" for
// none) and the mode (# mode:).
type BrokenLab struct {
	Name, Want, PullSecret, Mode string
	data                         []byte
}

// BrokenLabs reads testdata/broken-labs.
func BrokenLabs(t testing.TB) []BrokenLab {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(RepoRoot(), "testdata", "broken-labs", "*.yaml"))
	if err != nil || len(files) < 20 {
		t.Fatalf("testdata/broken-labs: %d files, %v", len(files), err)
	}
	var out []BrokenLab
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		l := BrokenLab{Name: strings.TrimSuffix(filepath.Base(f), ".yaml"), Mode: "ipi-baremetal", data: b,
			PullSecret: `{"auths":{"registry.invalid":{"auth":"dXNlcjpwYXNz"}}}`}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "# want: "); ok {
				l.Want = v
			} else if v, ok := strings.CutPrefix(line, "# pull-secret: "); ok {
				l.PullSecret = v
			} else if v, ok := strings.CutPrefix(line, "# mode: "); ok {
				l.Mode = v
			}
		}
		out = append(out, l)
	}
	return out
}

// Write puts the lab file in dir as lab.yaml, with the SSH key it names
// (id.pub) and its pull secret, and returns the lab file's path.
func (l BrokenLab) Write(t testing.TB, dir string) string {
	t.Helper()
	cfg := filepath.Join(dir, "lab.yaml")
	write := func(path string, data []byte, mode os.FileMode) {
		if err := os.WriteFile(path, data, mode); err != nil {
			t.Fatal(err)
		}
	}
	write(cfg, l.data, 0o644)
	write(filepath.Join(dir, "id.pub"), []byte(SSHKey+"\n"), 0o644)
	if l.PullSecret != "none" {
		write(filepath.Join(dir, "pull-secret.json"), []byte(l.PullSecret), 0o600)
	}
	return cfg
}

// A pull secret and an SSH public key for tests: well-formed and worthless.
const (
	PullSecret = `{"auths":{"quay.io":{"auth":"dXNlcjpwYXNz","email":"lab@bmlab.test"}}}`
	SSHKey     = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGq7ZJzDmUd0i7UO4u4Xc5xxdtMQdaC6N0HRwsZi0o7X lab@bmlab.test"
)
