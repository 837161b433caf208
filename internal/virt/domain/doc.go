// Package domain defines the libvirt domains that look like bare-metal
// servers, for both sides of the project: labctl's provider
// (internal/labvirt) makes a lab's nodes with it, and vbmcd's test fixtures
// (internal/virttest, internal/kubevirt/kubevirttest) their VMs, so neither
// fixture imports labctl's provider. Spec is the server (disks, a CD-ROM
// drive that always exists for virtual media, NICs in order, a serial
// console that is a pty and a log file, UEFI or secure boot, an in-band
// IPMI interface wired to vbmcd's socket, fw_cfg ignition), XML its
// libvirt definition: an aarch64 server is qemu's virt machine on AAVMF,
// and an x86_64 one under TCG has qemu64 without CMPXCHG16B, which QEMU
// 7.2's TCG gets wrong (XML says how). Define, Start, Power and Delete act
// on one domain by name; NICDrift and NICProblems say how a defined
// domain's NICs differ from the spec's.
//
// What it does not do: mark what it makes as a lab's (internal/labvirt's
// MarkXML goes in Spec.Metadata), or serve a BMC (internal/virt).
package domain
