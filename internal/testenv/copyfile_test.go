package testenv

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// CopyFile copies every byte, over a file already at dst too, and leaves
// the copy writable by others (qemu's user) as far as the umask lets it.
func TestCopyFile(t *testing.T) {
	dir := t.TempDir()
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16+3) // 1 MiB and a bit: more than one io.Copy buffer
	src := WriteFile(t, dir, "src", data)
	dst := filepath.Join(dir, "dst")
	if err := os.WriteFile(dst, bytes.Repeat([]byte("x"), 2<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	CopyFile(t, src, dst)
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Errorf("the copy has %d bytes, not the source's %d", len(got), len(data))
	}
	dir2 := t.TempDir()
	fresh := filepath.Join(dir2, "fresh")
	CopyFile(t, src, fresh)
	st, err := os.Stat(fresh)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm()&0o044 == 0 {
		t.Errorf("a new copy is %v, want it readable by group and others", st.Mode().Perm())
	}
}
