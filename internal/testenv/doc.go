// Package testenv holds the rules integration tests share: what a test needs
// (root, a running libvirtd, a client binary, the marker ISO) and what happens
// when it is missing. On a developer's laptop a missing prerequisite skips the
// test; under CI=true it fails it, so a skipped test is never counted as a pass.
//
// trixie.go runs Python from Ironic 29's Debian 13 root (the tool cache's,
// hack/build-ironic-root.sh), with the vendor overlay that makes Debian's
// python3-sushy-oem-idrac 5.0.0-2 importable (VendorOverlay: three empty
// modules the package imports and does not ship).
//
// golden.go holds the tests' one -update flag (Update) and Golden, the
// compare-or-rewrite of a golden file under testdata that the packages
// with goldens (redfish, upi, ipi, agent, plan, lab/steps) share; a test
// package defines no -update flag of its own.
//
// It is imported only from _test.go files and from the helper packages that
// only tests import (virttest, netplumb/netnstest, installertest).
package testenv
