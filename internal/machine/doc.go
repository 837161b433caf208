// Package machine is the one model of a server and its BMC that every
// protocol face uses. Redfish and IPMI translate their requests into calls on
// a Service; the Service carries a real BMC's semantics (a Once boot override
// applies to the next boot and then reverts, pending BIOS settings apply at
// the next reset, a reset that restarts the machine applies pending firmware
// changes) and a Backend (libvirt, KubeVirt, sim) carries them out; the
// backends share their lock-and-lookup (Read, Change) and their power
// conflicts (Machine.CheckOn, CheckOff) from backend.go. It also holds
// the machine's boot options and persistent boot order (bootorder.go), the
// BMC's clock (clock.go) and what the switch each NIC is plugged into
// announces over LLDP (lldp.go, filled in by the backend), and the UEFI
// HTTP boot of an ISO or a UEFI application the BMC fetches (httpboot.go).
// The BMC's own NIC (bmcnic.go: its address, prefix, gateway and a MAC
// derived from the machine's id) is what IPMI's LAN parameters and
// Redfish's Manager EthernetInterface both report; Inventory.IPMISocket
// names the unix socket of a machine's in-band IPMI (its KCS).
// A machine has one serial console, shared by every face that shows it
// (IPMI SOL, the web console): one backend stream per machine, each reader
// getting the output from when it joined, anyone's input reaching the
// machine (consoles.go). Its screen can be read and typed on without a
// browser (screen.go: a screenshot and keys through the backend's display,
// with an RFB client, or the backend's own Screener; the end of its serial
// log). An On while the guest shuts itself down starts it
// once it is off (power.go, service.go). A configuration job
// (configjob.go) sets many things at once, as a vendor's configuration
// profile does: the override at once, BIOS attributes and the boot order
// for the next boot, its task done when all of it took effect; deleting a
// job queue cancels the jobs that wait and takes back what they staged.
// Those who keep something per machine follow the model with the helpers
// of follow.go: Follow is their loop (events, and a resync on a tick),
// Sync makes what they keep follow the machines there now, Gone names what
// they keep for machines no longer there, WaitChange waits for a machine's
// next change or an interval (WaitEvent for an event of one's choosing or
// a channel), and ForEach hands a subscription's events to
// a function until its context ends. The IPMI manager's BMCs and vbmcd's
// per-address listeners (internal/listen) follow the model with Follow
// and Sync.
//
// What it does not do: decode protocols, authenticate, or talk to libvirt.
// Faces import this package; this package imports no backend.
package machine
