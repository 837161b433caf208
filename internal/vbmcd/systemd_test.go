package vbmcd

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmlab/bmlab/internal/testenv"
)

// TestSystemdUnit: the shipped unit passes systemd-analyze verify with no
// message at all (a bad directive is only a message there, not a failure),
// and the configuration it starts vbmcd with is one vbmcd accepts.
func TestSystemdUnit(t *testing.T) {
	analyze := testenv.Command(t, "systemd-analyze")
	root := testenv.RepoRoot()
	bin := filepath.Join(t.TempDir(), "vbmcd")
	if out, err := exec.Command("go", "build", "-o", bin, filepath.Join(root, "cmd/vbmcd")).CombinedOutput(); err != nil {
		t.Fatalf("build vbmcd: %v\n%s", err, out)
	}
	unit, err := os.ReadFile(filepath.Join(root, "contrib/systemd/vbmcd.service"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "ExecStart=/usr/local/bin/vbmcd --config /etc/vbmcd/vbmcd.yaml\n") {
		t.Fatalf("the unit's ExecStart changed; update this test:\n%s", unit)
	}
	// verify checks that ExecStart's binary exists: point it at the one
	// just built, nothing else changes.
	p := testenv.WriteFile(t, t.TempDir(), "vbmcd.service", []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/vbmcd", bin)))
	out, err := exec.Command(analyze, "verify", p).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}

	c, err := parse(t, nil, nil, filepath.Join(root, "contrib/systemd/vbmcd.yaml"))
	if err == nil {
		err = c.validate()
	}
	if err != nil {
		t.Fatalf("contrib/systemd/vbmcd.yaml: %v", err)
	}
	if c.CredentialsFile != "/etc/vbmcd/credentials.yaml" || c.StateDir != "/var/lib/vbmcd" || c.MetricsAddr != "127.0.0.1:9120" {
		t.Errorf("the example config: credentials %q, state %q, metrics %q", c.CredentialsFile, c.StateDir, c.MetricsAddr)
	}
}
