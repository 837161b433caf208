package netplumb

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// NetworkManager grabs new interfaces and may bring them down, take their
// addresses or add them to its own connections. A conf.d snippet that lists
// the lab's links under [keyfile] unmanaged-devices keeps it off them. The
// list is appended with "+=" (NetworkManager.conf(5)), so the snippet adds to
// the user's own unmanaged-devices instead of replacing them.

// NetworkManagerPresent reports whether NetworkManager is installed, judged
// by the directory that holds confDir (/etc/NetworkManager for the default).
func NetworkManagerPresent(confDir string) bool {
	fi, err := os.Stat(filepath.Dir(filepath.Clean(confDir)))
	return err == nil && fi.IsDir()
}

// UnmanagedSnippetPath is where the lab's snippet lives in confDir.
func UnmanagedSnippetPath(confDir, lab string) string {
	return filepath.Join(confDir, "90-bmlab-"+lab+".conf")
}

// UnmanagedSnippet returns the snippet that makes links unmanaged.
func UnmanagedSnippet(lab string, links []string) []byte {
	specs := make([]string, len(links))
	for i, l := range links {
		specs[i] = "interface-name:" + l
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Written by bmlab (labctl net) for the lab %q: NetworkManager must leave\n", lab)
	b.WriteString("# the lab's links alone. `labctl net down` removes this file.\n")
	b.WriteString("[keyfile]\n")
	fmt.Fprintf(&b, "unmanaged-devices+=%s\n", strings.Join(specs, ";"))
	return b.Bytes()
}

// WriteUnmanagedSnippet writes the snippet into confDir unless it is there
// already with the same content; changed says whether it wrote. NetworkManager
// reads it on `nmcli general reload conf` or its next start.
func WriteUnmanagedSnippet(confDir, lab string, links []string) (path string, changed bool, err error) {
	path = UnmanagedSnippetPath(confDir, lab)
	want := UnmanagedSnippet(lab, links)
	if got, err := os.ReadFile(path); err == nil && bytes.Equal(got, want) {
		return path, false, nil
	}
	if err := writeFile(path, want); err != nil {
		return path, false, fmt.Errorf("NetworkManager snippet: %w", err)
	}
	return path, true, nil
}

// UnmanagedSnippetCurrent reports whether the lab's snippet is in confDir
// with exactly the content UnmanagedSnippet gives.
func UnmanagedSnippetCurrent(confDir, lab string, links []string) bool {
	got, err := os.ReadFile(UnmanagedSnippetPath(confDir, lab))
	return err == nil && bytes.Equal(got, UnmanagedSnippet(lab, links))
}

// RemoveUnmanagedSnippet deletes the lab's snippet; a missing file is no
// error. removed says whether there was one.
func RemoveUnmanagedSnippet(confDir, lab string) (path string, removed bool, err error) {
	path = UnmanagedSnippetPath(confDir, lab)
	err = os.Remove(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return path, false, nil
	case err != nil:
		return path, false, fmt.Errorf("NetworkManager snippet: %w", err)
	}
	return path, true, nil
}

// Unmanaged is the lab's unmanaged-devices snippet for its links in
// ConfDir, as a provider keeps it on the lab's host.
type Unmanaged struct {
	ConfDir, Lab string
	Links        []string
}

// Path is where the snippet lives.
func (u Unmanaged) Path() string { return UnmanagedSnippetPath(u.ConfDir, u.Lab) }

// Ensure writes the snippet where NetworkManager is, unless it is there
// already; changed says whether it wrote.
func (u Unmanaged) Ensure() (changed bool, err error) {
	if !NetworkManagerPresent(u.ConfDir) {
		return false, nil
	}
	_, changed, err = WriteUnmanagedSnippet(u.ConfDir, u.Lab, u.Links)
	return changed, err
}

// Stale says NetworkManager is there and the snippet is not, or differs.
func (u Unmanaged) Stale() bool {
	return NetworkManagerPresent(u.ConfDir) && !UnmanagedSnippetCurrent(u.ConfDir, u.Lab, u.Links)
}

// UnmanagedSnippetOwner says whether the snippet at path exists and the
// lab it is for: its name (UnmanagedSnippetPath) is its mark.
func UnmanagedSnippetOwner(path string) (found bool, lab string, err error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return false, "", nil
	} else if err != nil {
		return false, "", fmt.Errorf("NetworkManager snippet: %w", err)
	}
	lab, _ = strings.CutPrefix(filepath.Base(path), "90-bmlab-")
	return true, strings.TrimSuffix(lab, ".conf"), nil
}

// writeFile puts data at path whole (a temporary file renamed), mode 0644,
// making its directory.
func writeFile(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".bmlab-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
