// Package virt is the libvirt backend of the machine model and the only
// package that imports go-libvirt.
//
// It keeps one long-lived connection per hypervisor URI, pings it and
// reconnects when it drops; lifecycle, reboot, metadata and device events keep
// an in-memory view of every domain current, so reads (List, Get, Stale) cost
// no libvirt round trip. Domain XML is read and written through libvirtxml.
// What libvirt does not hold (the boot override and boot order, pending BIOS
// settings, BMC credentials, the IPMI endpoint, the BMC's clock) is stored in
// the domain's <metadata> under the project's namespace (MetadataNS), so a
// restarted or second daemon sees the same state. A boot order is written as
// per-device boot order into the persistent definition; each running NIC's
// LLDP neighbour is read from its live interface and its libvirt network.
//
// What it does not do: BMC semantics (package machine decides when a Once
// override is spent) or protocols.
package virt
