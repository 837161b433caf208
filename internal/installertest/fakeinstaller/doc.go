// Command fakeinstaller is a stand-in openshift-install, and oc, for
// labctl's tests (installertest.Installer and OC build it): the hybrid
// mode's `create manifests`, `create ignition-configs`, `create
// single-node-ignition-config`, `wait-for bootstrap-complete|install-complete`,
// the agent mode's `agent create image` and `agent wait-for`, oc's `adm
// node-image create|monitor`, and `version`, with realistic, deterministic
// output and exit codes chosen by the FAKE_INSTALLER_* environment variables
// (see installertest).
//
// What it does not do: install anything, talk to a cluster or the network,
// or validate install-config beyond what the tests need. Never ship it.
package main
