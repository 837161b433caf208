package qemuaccess

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmlab/bmlab/internal/testenv"
)

func TestQemuCanTraverse(t *testing.T) {
	testenv.Root(t) // chown
	base := testenv.TmpDir(t, "qa-", 0o755)
	q := User{Name: "lt-qemu", UID: 64999, GIDs: []uint32{64998}}
	mk := func(rel string, mode os.FileMode, uid, gid int) string {
		p := filepath.Join(base, rel)
		if err := os.Mkdir(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
		return p
	}
	open := mk("open", 0o755, 0, 0)
	closed := mk("closed", 0o700, 0, 0)
	group := mk("group", 0o710, 0, 64998)
	owner := mk("owner", 0o700, 64999, 0)
	otherGroup := mk("other-group", 0o710, 0, 0)
	if err := os.Symlink(closed, filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dir, bad string
	}{
		{filepath.Join(open, "pool"), ""},
		{filepath.Join(open, "a", "b", "pool"), ""},
		{filepath.Join(closed, "pool"), closed},
		{closed, closed},
		{filepath.Join(group, "pool"), ""},
		{filepath.Join(owner, "pool"), ""},
		{filepath.Join(otherGroup, "pool"), otherGroup},
		{filepath.Join(base, "link", "pool"), closed},
	} {
		err := q.CanTraverse(tc.dir)
		switch {
		case tc.bad == "" && err != nil:
			t.Errorf("CanTraverse(%s) = %v, want nil", tc.dir, err)
		case tc.bad != "" && (!errors.Is(err, ErrNotTraversable) || !strings.Contains(err.Error(), tc.bad+" (mode")):
			t.Errorf("CanTraverse(%s) = %v, want ErrNotTraversable naming %s", tc.dir, err, tc.bad)
		}
	}
	if err := (User{Name: "root"}).CanTraverse(filepath.Join(closed, "pool")); err != nil {
		t.Errorf("root qemu: %v", err)
	}
}

func TestQemuConfUser(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ conf, want string }{
		{"", "libvirt-qemu"},
		{"#user = \"root\"\n", "libvirt-qemu"},
		{"# comment\nuser = \"qemu\"\ngroup = \"kvm\"\n", "qemu"},
		{"user = \"+0\"\n", "0"},
	} {
		p := filepath.Join(dir, "qemu.conf")
		if err := os.WriteFile(p, []byte(tc.conf), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := ConfUser(p); got != tc.want {
			t.Errorf("ConfUser(%q) = %q, want %q", tc.conf, got, tc.want)
		}
	}
	if got := ConfUser(filepath.Join(dir, "missing")); got != "libvirt-qemu" {
		t.Errorf("without qemu.conf: %q", got)
	}
}
