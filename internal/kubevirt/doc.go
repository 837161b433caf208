// Package kubevirt is the KubeVirt backend of the machine model: every
// VirtualMachine in the chosen namespaces that matches a label selector is
// a machine, addressed as <namespace>.<name> and by its firmware UUID.
//
// Reads come from client-go informers (list + watch of VirtualMachines and
// VirtualMachineInstances), never a round trip per GET. Power goes through
// KubeVirt's subresources: vbmcd puts a VM under runStrategy Manual with
// its first power action, so KubeVirt starts and stops instances only when
// asked (start, stop with a zero grace period for ForceOff, the instance's
// reset for a warm ForceRestart, softreboot) and a guest that powers itself
// off stays off, as a server does. KubeVirt's refusals of a request while
// it carries out an earlier one are waited out; others are the request's
// answer. The state is read from status.printableStatus and the instance's
// phase. A boot override is the devices' bootOrder in the VM's template;
// the VM's own order (and the one vbmcd wrote, so that an owner's edit is
// followed) is an annotation. Start returns once KubeVirt made the new
// instance, so a Once override that the model spends right after holds for
// that instance only. Firmware (BIOS, EFI, secure boot) is
// spec.template...firmware.bootloader, with features.smm for secure boot.
// The backend is no machine.KeyStorer: the enrolled keys are in the
// variable store virt-launcher makes, out of vbmcd's reach.
// What KubeVirt does not hold (the BMC's settings: override, BIOS
// attributes current and pending, firmware versions, accounts) is an
// annotation on the VM, so a restarted or second vbmcd sees the same state.
// An API server that does not answer makes every machine Unavailable. The
// serial console (IPMI SOL) is the instance's console subresource, a
// WebSocket.
//
// Virtual media (the CD): the image vbmcd fetched into its cache is served
// by an ImageServer, a CDI DataVolume (labelled, owned by the VM) imports
// it from there (PrepareMedia, outside the machine's lock; CDI's importer
// restarts are followed and bounded), and the BMC's SATA CD-ROM on the
// VM's template takes the DataVolume. With KubeVirt's
// DeclarativeHotplugVolumes feature gate (read from the KubeVirt CR) the
// CD goes into and out of a running instance live; without it, a running
// VM gets it at its next start (machine.Disk.NextStart). Eject removes it
// and deletes the DataVolume.
//
// Not there: NMI (KubeVirt has none), the removable member (KubeVirt
// hot-plugs no USB disk).
// docs/kubevirt.md has the whole mapping and what the tests run of
// KubeVirt's own code and what their fixture plays.
package kubevirt
