// Package qemuaccess answers one question for every part that puts files
// where qemu must open them (labctl's storage pools, vbmcd's image cache):
// can the user qemu runs as reach this directory? qemu runs unprivileged
// (libvirt-qemu on Debian, or the user in /etc/libvirt/qemu.conf) and needs
// search permission on every directory above an image, else the VM fails to
// start with "Permission denied". It finds that user, checks a path by its
// mode bits (CanTraverse, ErrNotTraversable naming the directory and the
// fix), and makes missing directories traversable (MkdirTraversable).
//
// It does not change existing directories, nor read POSIX ACLs.
package qemuaccess

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// ErrNotTraversable means qemu could not reach files in a directory.
var ErrNotTraversable = errors.New("directory not traversable by qemu")

// MkdirTraversable makes dir and its missing parents 0755 (whatever the
// umask), so that qemu's user can traverse them, and says whether dir was
// missing.
func MkdirTraversable(dir string) (created bool, err error) {
	fi, err := os.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return false, fmt.Errorf("%s is not a directory", dir)
		}
		return false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || d == filepath.Dir(d) {
			break
		}
		missing = append(missing, d)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, fmt.Errorf("make directory %s: %w", dir, err)
	}
	for _, d := range missing {
		if err := os.Chmod(d, 0o755); err != nil {
			return true, fmt.Errorf("make directory %s: %w", dir, err)
		}
	}
	return true, nil
}

// User is who qemu runs as.
type User struct {
	Name string
	UID  uint32
	GIDs []uint32
}

// Lookup finds the user qemu runs as: name, else the user in
// /etc/libvirt/qemu.conf, else libvirt-qemu.
func Lookup(name string) (User, error) {
	if name == "" {
		name = ConfUser("/etc/libvirt/qemu.conf")
	}
	u, err := user.Lookup(name)
	if err != nil {
		return User{}, fmt.Errorf("the user qemu runs as: %w", err)
	}
	id := User{Name: name}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return id, fmt.Errorf("user %s: uid %q: %w", name, u.Uid, err)
	}
	id.UID = uint32(uid)
	groups, err := u.GroupIds()
	if err != nil {
		groups = []string{u.Gid}
	}
	for _, g := range groups {
		if gid, err := strconv.ParseUint(g, 10, 32); err == nil {
			id.GIDs = append(id.GIDs, uint32(gid))
		}
	}
	return id, nil
}

// ConfUser returns the user = "..." of libvirt's qemu.conf at path, or
// libvirt-qemu (Debian's build default) when it sets none.
func ConfUser(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return "libvirt-qemu"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok && strings.TrimSpace(k) == "user" {
			if v = strings.Trim(strings.TrimSpace(v), `"`); v != "" {
				return strings.TrimPrefix(v, "+") // "+0" is a uid
			}
		}
	}
	return "libvirt-qemu"
}

// CanTraverse checks that the user may search every existing directory
// from / down to dir (symbolic links resolved), by the mode bits; POSIX
// ACLs are not consulted. A missing tail is what MkdirTraversable creates.
// A directory that stops it is an ErrNotTraversable that names it and the
// fix.
func (q User) CanTraverse(dir string) error {
	if q.UID == 0 {
		return nil
	}
	existing := dir
	for {
		if _, err := os.Stat(existing); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			if errors.Is(err, fs.ErrPermission) {
				return q.notTraversable(existing, nil)
			}
			return err
		}
		existing = filepath.Dir(existing)
	}
	real, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return err
	}
	p := "/"
	for _, c := range append([]string{""}, strings.Split(strings.TrimPrefix(real, "/"), "/")...) {
		p = filepath.Join(p, c)
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			return fmt.Errorf("check %s for qemu: %w", p, err)
		}
		var bit uint32 = 0o001
		switch {
		case st.Uid == q.UID:
			bit = 0o100
		case slices.Contains(q.GIDs, st.Gid):
			bit = 0o010
		}
		if st.Mode&bit == 0 {
			return q.notTraversable(p, &st)
		}
	}
	return nil
}

func (q User) notTraversable(p string, st *syscall.Stat_t) error {
	mode := "unknown mode"
	if st != nil {
		mode = fmt.Sprintf("mode %04o, owner %d:%d", st.Mode&0o7777, st.Uid, st.Gid)
	}
	return fmt.Errorf("%w: %s (%s) does not let user %s (uid %d) search it. qemu runs as %s and must traverse every directory above a disk image; "+
		"otherwise the VM fails to start with \"Could not open '<image>': Permission denied\", the classic trap with images under /root, a home "+
		"directory or a 0700 temporary directory. Fix: chmod o+x %s (or a+rx), or put the files under a traversable path such as /var/lib/libvirt/images",
		ErrNotTraversable, p, mode, q.Name, q.UID, q.Name, p)
}
