// Package installertest is the test fixture that plays every installer
// labctl runs: a stand-in for openshift-install (cmd fakeinstaller, built by
// Installer) in the hybrid mode (`create manifests`, `create
// ignition-configs`, `create single-node-ignition-config`, `wait-for`) and
// the agent mode (`agent create image`, `agent wait-for`), and for oc
// (`adm node-image create|monitor`, add-node; OC builds it), with the assets
// they write, for tests of internal/upi and of labctl's modes.
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
// $FAKE_INSTALLER_INSTALL_EXIT give per call; `create
// single-node-ignition-config` refuses what the real installer refuses for
// it (controlPlane.replicas other than 1, no
// bootstrapInPlace.installationDisk) and writes
// bootstrap-in-place-for-live-iso.ign (the bootstrap's config plus an
// install-to-disk script and unit naming the installation disk), worker.ign,
// auth/ and metadata.json; after it, `wait-for install-complete` with
// $FAKE_INSTALLER_LIVE_NODES plays the bootstrap in place on the real
// domain: it waits for the node to boot the live ISO (LiveISO, a grub image
// that says whether it carries /images/ignition.img) and power off, checks
// that the ISO in its CD drive embeds that config, writes the "installed OS"
// onto the disk the guest sees as the installation disk and starts the node;
// `version` prints a version
// text. Every run but version is recorded in <dir>/.fake-installer-calls
// (Calls). Its output is deterministic: the same install-config gives the
// same bytes.
//
// What it does not do: validate install-config beyond the fields it reads,
// run bootkube or coreos-installer (the live ISO is a grub image; the
// "installed OS" is whatever image the test names),
// contact any host, or stand for the real installer's acceptance of a
// config. Only tests import it.
package installertest
