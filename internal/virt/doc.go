// Package virt is the libvirt backend of the machine model: libvirt domains
// as machines, for vbmcd. It and internal/labvirt (which builds the lab's
// libvirt objects for labctl) are the packages that import go-libvirt.
//
// A Backend keeps one long-lived connection to one hypervisor URI, pings it
// and reconnects when it drops; lifecycle, reboot, metadata and device
// events keep an in-memory view of every domain current, so reads (List,
// Get, Stale) cost no libvirt round trip. Hosts is a machine.Backend over
// several libvirt daemons, one Backend each, with machines addressed by
// domain UUID across all of them (a UUID found on two hosts is served by
// neither).
//
// Domain XML is read and written through libvirtxml. What libvirt does not
// hold (the boot override, pending BIOS settings, BMC credentials, the IPMI
// endpoint, RAID volumes) is stored in the domain's <metadata> under the
// project's namespace (MetadataNS), so a restarted or second daemon sees the
// same state.
//
// It also carries out what the machine model asks of a domain: virtual media
// (a CD-ROM or USB disk changed live on a running domain, media.go), the
// serial console as a libvirt stream and the path of its serial log file
// on this host (console.go), the VNC display on a unix socket, added to a
// domain without graphics at its start (display.go), the in-band IPMI
// interface (a KCS wired to vbmcd's socket by qemu arguments), added at its
// start to a local x86 domain without one, and the socket a domain names
// (kcs.go), secure boot keys in
// OVMF's variable store (keys.go), RAID volumes as qcow2 volumes in the
// domain's pool (volumes.go), and the PCI inventory QEMU shows (pci.go).
//
// What it does not do: BMC semantics (package machine decides when a Once
// override is spent), protocols, or lab building (pools, networks, domain
// definitions for a lab: internal/labvirt).
package virt
