// Package upitest is the test fixture for the hybrid flow: a stand-in for
// openshift-install (cmd fakeinstaller, built by Installer) and the assets it
// writes, for tests of internal/upi and of the labctl hybrid pipeline.
//
// The fixture behaves like the real installer where the pipeline can tell:
// `create manifests` consumes install-config.yaml (removing it, keeping it in
// its state file) and writes manifests/ and openshift/, Machine, MachineSet
// and ControlPlaneMachineSet manifests included; `create ignition-configs`
// consumes those directories and writes bootstrap.ign (files, the consumed
// manifests under /opt/openshift, systemd units, user core), master.ign and
// worker.ign (pointer configs to https://api-int.<cluster>:22623/config/<role>
// with the root CA), auth/kubeconfig, auth/kubeadmin-password and
// metadata.json, in the spec version $FAKE_INSTALLER_IGNITION_VERSION
// (default 3.2.0); `wait-for bootstrap-complete|install-complete` print the
// installer's lines and exit with the codes $FAKE_INSTALLER_BOOTSTRAP_EXIT and
// $FAKE_INSTALLER_INSTALL_EXIT give per call; `version` prints a version
// text. Every run but version is recorded in <dir>/.fake-installer-calls
// (Calls). Its output is deterministic: the same install-config gives the
// same bytes.
//
// What it does not do: validate install-config beyond the fields it reads,
// contact any host, or stand for the real installer's acceptance of a
// config. Only tests import it.
package upitest
