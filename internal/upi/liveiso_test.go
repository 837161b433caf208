package upi

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmlab/bmlab/internal/installertest"
	"github.com/bmlab/bmlab/internal/testenv"
)

// TestEmbedIgnition embeds a config into the fixture's live ISO (a real
// grub-mkrescue image) with xorriso and reads it back as the live system
// would find it: /images/ignition.img, a gzip newc cpio with config.ign.
// The volume's date (grub's filesystem UUID) is kept; an ISO without an
// embedded config reads as none. That the node boots the result is
// TestHybridSingleNode's (internal/labctl/up).
func TestEmbedIgnition(t *testing.T) {
	testenv.Integration(t)
	testenv.Command(t, "xorriso")
	testenv.Command(t, "grub-mkrescue")
	dir := t.TempDir()
	live := filepath.Join(dir, "live.iso")
	installertest.LiveISO(t, live)
	ctx := context.Background()
	if got, err := EmbeddedIgnition(ctx, live); err != nil || got != nil {
		t.Fatalf("the bare live ISO: %q, %v; want no config", got, err)
	}
	// Sizes around the cpio's 4-byte padding.
	for _, ign := range []string{`{"ignition":{"version":"3.2.0"}}`, `{"ignition":{"version":"3.2.0"}} `, `{"ignition":{"version":"3.2.0"}}  `, `{"ignition":{"version":"3.2.0"}}   `} {
		out := filepath.Join(dir, "out.iso")
		if err := EmbedIgnition(ctx, live, []byte(ign), out); err != nil {
			t.Fatal(err)
		}
		got, err := EmbeddedIgnition(ctx, out)
		if err != nil || string(got) != ign {
			t.Errorf("embedded %q, read back %q (%v)", ign, got, err)
		}
		if a, b := pvdDate(t, live), pvdDate(t, out); a == "" || a != b {
			t.Errorf("the volume date changed from %q to %q: grub would not find its root", a, b)
		}
	}
	if err := EmbedIgnition(ctx, filepath.Join(dir, "missing.iso"), []byte("{}"), filepath.Join(dir, "x.iso")); err == nil {
		t.Error("embedding into a missing ISO succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "x.iso")); err == nil {
		t.Error("a failed embedding left its output")
	}
}

func pvdDate(t *testing.T, iso string) string {
	t.Helper()
	b, _ := exec.Command("xorriso", "-indev", iso, "-pvd_info").CombinedOutput()
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "Modif. Time" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// TestMergeIgnitionSingleNode: a single node gets its hostname and the SSH
// key, but no resolv.conf dispatcher (it has no coredns of its own to put
// first; the lab network's DNS answers its names).
func TestMergeIgnitionSingleNode(t *testing.T) {
	c := testCluster(0)
	c.SingleNode = true
	files, err := NodeFiles(c.Nodes[1], c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files[0].Path != HostnamePath {
		t.Errorf("files %v, want only %s", files, HostnamePath)
	}
	c.SingleNode = false
	if files, _ := NodeFiles(c.Nodes[1], c, nil); len(files) != 2 || files[1].Path != DispatcherPath {
		t.Errorf("a multi-node cluster's node lost the dispatcher: %v", files)
	}
}
