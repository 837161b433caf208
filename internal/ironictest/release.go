package ironictest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmlab/bmlab/internal/testenv"
)

// Release is an Ironic release the harness runs.
type Release string

const (
	// Ironic21 is Debian 12's Ironic 21.4 (ironic-api and
	// ironic-conductor 1:21.4.4), installed on the host by
	// hack/install-deps.sh, with python3-sushy 4.3.3.
	Ironic21 Release = "21.4"
	// Ironic29 is Debian 13's Ironic 29.0.5, with python3-sushy 5.5.0,
	// from the trixie root hack/build-ironic-root.sh builds into the tool
	// cache (_out/tools/ironic-29/root). It runs in a mount namespace whose
	// / is that root, read-only, with the host's /tmp, /dev (and
	// /dev/shm), /sys and a /proc of its own mounted in, and tmpfs on
	// /run, /var/tmp and /var/lib/ironic (the defaults of the paths the
	// configuration does not set): the paths a test writes Ironic's configuration,
	// database, caches and CA files at are the same inside, and nothing
	// Ironic does reaches the cached root.
	Ironic29 Release = "29.0.5"
)

// Releases are the releases the project's Ironic tests run on.
var Releases = []Release{Ironic21, Ironic29}

// Short is the release's major version ("21", "29"), for test names.
func (r Release) Short() string { v, _, _ := strings.Cut(string(r), "."); return v }

// install is where a release's commands run: the host, or a root.
type install struct {
	release Release
	root    string // "" for the host
}

// RootDir is where hack/build-ironic-root.sh links Ironic 29's root.
func RootDir() string { return testenv.Ironic29Root() }

// locate finds release r's commands, or skips the test (fails it under
// CI=true) when they are not there.
func locate(t testing.TB, r Release) install {
	t.Helper()
	switch r {
	case Ironic21:
		testenv.Command(t, "ironic")
		testenv.Command(t, "ironic-dbsync")
		testenv.Python(t, "ironic", "sushy")
		testenv.Command(t, "ipmitool")
		return install{release: r}
	case Ironic29:
		root := RootDir()
		_, err := os.Stat(filepath.Join(root, "usr", "bin", "ironic"))
		testenv.Require(t, err == nil, "Ironic 29's trixie root at "+root+" (bash hack/build-ironic-root.sh)")
		testenv.Command(t, "unshare")
		testenv.Command(t, "chroot")
		return install{release: r, root: root}
	}
	t.Fatalf("ironictest: no Ironic release %q (have %s and %s)", r, Ironic21, Ironic29)
	return install{}
}

// argv is how to run argv (a command of the release, by its path inside
// the install) in network namespace ns ("": the test's).
func (in install) argv(ns string, argv ...string) []string {
	if in.root != "" {
		argv = testenv.InRootWith(in.root, []string{"/var/lib/ironic"}, argv...)
	}
	if ns != "" {
		argv = append([]string{"ip", "netns", "exec", ns}, argv...)
	}
	return argv
}

// path is where a file of the install is on the host.
func (in install) path(p string) string { return filepath.Join(in.root, p) }

func (in install) String() string {
	if in.root == "" {
		return fmt.Sprintf("Ironic %s (the host's)", in.release)
	}
	return fmt.Sprintf("Ironic %s (%s)", in.release, in.root)
}
