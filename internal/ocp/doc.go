// Package ocp is the vocabulary that the lab file (internal/labconfig), the
// lab plan (internal/plan) and the installers' generators (internal/ipi,
// internal/agent, internal/upi) share: OpenShift's words as install-config
// spells them, so that the plan speaks them without importing an installer.
//
//   - Machine roles (RoleMaster, RoleWorker, RoleArbiter, and RoleBootstrap,
//     the installer's temporary control plane).
//   - BMC kinds, the schemes of install-config's bmc.address, and
//     BMCAddress, which makes a node's address for a kind.
//   - Provisioning network profiles (Managed, Unmanaged, Disabled), as
//     platform.baremetal.provisioningNetwork spells them.
//   - The bond of a host's NICs on the machine network (BondName, BondModes).
//   - The names of the files the installers read and write in their
//     directory (install-config.yaml, the installer's logs, the agent ISO).
//
// It holds constants and pure functions only: no I/O, no type of an
// installer's input.
package ocp
