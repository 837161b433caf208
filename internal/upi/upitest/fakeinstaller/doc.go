// Command fakeinstaller is a stand-in openshift-install for the hybrid
// mode's tests (upitest.Installer builds it): `create manifests`, `create
// ignition-configs`, `wait-for bootstrap-complete|install-complete` and
// `version`, with realistic, deterministic output and exit codes chosen by
// the FAKE_INSTALLER_* environment variables (see upitest).
//
// What it does not do: install anything, talk to a cluster or the network,
// or validate install-config beyond what the tests need. Never ship it.
package main
