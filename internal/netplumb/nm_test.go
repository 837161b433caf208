package netplumb

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestUnmanagedSnippet(t *testing.T) {
	root := t.TempDir()
	confDir := filepath.Join(root, "NetworkManager", "conf.d")
	if NetworkManagerPresent(confDir) {
		t.Fatal("NetworkManagerPresent with no NetworkManager directory")
	}
	if err := os.Mkdir(filepath.Dir(confDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if !NetworkManagerPresent(confDir) {
		t.Fatal("NetworkManagerPresent = false with its directory there")
	}
	links := []string{"baremetal", "bmlab-veth0", "bmlab-veth1"}
	if UnmanagedSnippetCurrent(confDir, "seed", links) {
		t.Error("UnmanagedSnippetCurrent before writing")
	}
	path, changed, err := WriteUnmanagedSnippet(confDir, "seed", links)
	if err != nil || !changed {
		t.Fatalf("first write: changed=%v err=%v", changed, err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := `# Written by bmlab (labctl net) for the lab "seed": NetworkManager must leave
# the lab's links alone. ` + "`labctl net down`" + ` removes this file.
[keyfile]
unmanaged-devices+=interface-name:baremetal;interface-name:bmlab-veth0;interface-name:bmlab-veth1
`
	if d := cmp.Diff(want, string(got)); d != "" {
		t.Errorf("snippet (-want +got):\n%s", d)
	}
	if _, changed, err := WriteUnmanagedSnippet(confDir, "seed", links); err != nil || changed {
		t.Errorf("second write: changed=%v err=%v, want unchanged", changed, err)
	}
	if !UnmanagedSnippetCurrent(confDir, "seed", links) || UnmanagedSnippetCurrent(confDir, "seed", links[:1]) {
		t.Error("UnmanagedSnippetCurrent does not compare the content")
	}
	entries, _ := os.ReadDir(confDir)
	if len(entries) != 1 {
		t.Errorf("conf.d holds %d files, want only the snippet (no temp files)", len(entries))
	}
	for _, wantRemoved := range []bool{true, false} {
		_, removed, err := RemoveUnmanagedSnippet(confDir, "seed")
		if err != nil || removed != wantRemoved {
			t.Errorf("remove: removed=%v err=%v, want removed=%v", removed, err, wantRemoved)
		}
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("snippet still there after remove: %v", err)
	}
}
