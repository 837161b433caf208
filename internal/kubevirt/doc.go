// Package kubevirt is the KubeVirt backend of the machine model: every
// VirtualMachine in the chosen namespaces that matches a label selector is
// a machine, addressed as <namespace>.<name> and by its firmware UUID.
//
// Reads come from client-go informers (list + watch of VirtualMachines and
// VirtualMachineInstances), never a round trip per GET. Power goes through
// KubeVirt's subresources (start, stop with a zero grace period for
// ForceOff, restart, the instance's softreboot) and so through
// spec.runStrategy; the state is read from status.printableStatus and the
// instance's phase. A boot override is the devices' bootOrder in the VM's
// template; Start returns once KubeVirt made the new instance, so a Once
// override that the model spends right after holds for that instance only.
// Firmware (BIOS, EFI, secure boot) is spec.template...firmware.bootloader,
// with features.smm for secure boot. The backend is no machine.KeyStorer:
// the enrolled keys are in the variable store virt-launcher makes, out of
// vbmcd's reach, so no key databases are served.
// What KubeVirt does not hold (the BMC's settings: override, BIOS
// attributes current and pending, firmware versions, accounts) is an
// annotation on the VM, so a restarted or second vbmcd sees the same state.
// An API server that does not answer makes every machine Unavailable. The
// serial console (IPMI SOL) is the instance's console subresource, a
// WebSocket.
//
// Virtual media (the CD): the image vbmcd fetched into its cache is served
// by an ImageServer, a CDI DataVolume (labelled, owned by the VM) imports
// it from there, and a SATA CD-ROM disk on the VM's template takes the
// DataVolume. KubeVirt does not hot-plug CD-ROMs, so a running VM gets it
// at its next start (machine.Disk.NextStart). Eject removes the disk and
// deletes the DataVolume.
//
// Not there: NMI (KubeVirt has none), the removable member.
// docs/kubevirt.md has the whole mapping and what the tests' fixture plays.
package kubevirt
