package ironictest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/bmlab/bmlab/internal/redfish"
)

// registriesDir is where sushy 4.3 lists its standard message registries:
// sushy/main.py's _get_standard_message_registry_collection calls
// pkg_resources.resource_listdir('sushy.main', 'standard_registries/'),
// which resolves next to the module's own file. No setting or environment
// variable names another directory, and Debian's python3-sushy 4.3.3 does
// not ship it.
const registriesDir = "standard_registries"

// sushyOverlay makes dir/sushy a copy of the install's sushy package (the
// host's, or the one in Ironic 29's root) made of links to its files, plus
// standard_registries/ holding vbmcd's Base and Update registries. With dir
// first on PYTHONPATH, Python imports sushy from there, so sushy finds the
// directory next to its main.py, and Debian's files stay as the package
// installed them. The links name the files as the install sees them.
func sushyOverlay(in install, dir string) error {
	args := in.argv("", "/usr/bin/python3", "-c", "import os, sushy; print(os.path.dirname(sushy.__file__))")
	out, err := exec.Command(args[0], args[1:]...).Output()
	if err != nil {
		return fmt.Errorf("find python3-sushy in %s: %v", in, err)
	}
	src := strings.TrimSpace(string(out))
	dst := filepath.Join(dir, "sushy")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(in.path(src))
	if err != nil {
		return err
	}
	for _, e := range entries {
		// Python writes the overlay's own bytecode beside it; the
		// package's __pycache__ stays Debian's.
		if e.Name() == "__pycache__" || e.Name() == registriesDir {
			continue
		}
		if err := os.Symlink(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	regs := filepath.Join(dst, registriesDir)
	if err := os.MkdirAll(regs, 0o755); err != nil {
		return err
	}
	// Debian's own registries, should a later package ship them, come
	// first; vbmcd's fill the gap.
	if own, err := os.ReadDir(in.path(filepath.Join(src, registriesDir))); err == nil {
		for _, e := range own {
			if err := os.Symlink(filepath.Join(src, registriesDir, e.Name()), filepath.Join(regs, e.Name())); err != nil {
				return err
			}
		}
	}
	for id, body := range redfish.MessageRegistries() {
		p := filepath.Join(regs, id+".json")
		if _, err := os.Lstat(p); err == nil {
			continue
		}
		if err := os.WriteFile(p, body, 0o644); err != nil {
			return err
		}
	}
	return nil
}
