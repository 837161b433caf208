package lab

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The files every step keeps beside the platform's objects (markers,
// lists, installer inputs) are written and removed through these.

// Exists reports whether a file is there.
func Exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// WriteAtomic writes a file whole or not at all (a reader never sees half
// of it), with mode.
func WriteAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// RemoveFiles removes files and, when dir is not empty, a directory with
// everything in it; absent ones are success.
func RemoveFiles(paths []string, dir string) error {
	var errs []error
	for _, p := range paths {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if dir != "" {
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ReadNames is a set of node names kept one a line (none when the file is
// missing or unreadable).
func ReadNames(path string) map[string]bool {
	out := map[string]bool{}
	b, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	for _, name := range strings.Fields(string(b)) {
		out[name] = true
	}
	return out
}

// WriteNames keeps a set of node names, one a line, sorted.
func WriteNames(path string, set map[string]bool) error {
	names := make([]string, 0, len(set))
	for name := range set {
		names = append(names, name)
	}
	slices.Sort(names)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return WriteAtomic(path, []byte(strings.Join(names, "\n")+"\n"), 0o644)
}
