// Package testenv holds the rules integration tests share: what a test needs
// (root, a running libvirtd, a client binary, the marker ISO) and what happens
// when it is missing. On a developer's laptop a missing prerequisite skips the
// test; under CI=true it fails it, so a skipped test is never counted as a pass.
//
// It is imported only from _test.go files and from the helper packages that
// only tests import (virttest, netplumb/netnstest, installertest).
package testenv
