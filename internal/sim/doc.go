// Package sim is an in-memory machine.Backend: simulated servers with
// realistic power transitions, for scale tests of Ironic or Metal3 without
// VMs and for demos on hosts without libvirt. It speaks the same model as the
// libvirt backend, so the protocol faces cannot tell them apart.
//
// A running machine has a screen of its own (screen.go): a text screen
// drawn from its state and what was typed on it, for the hands-free
// console's scripts and tests without VMs.
//
// What it does not do: boot anything. A started machine is "On" after the
// configured delay; nothing runs inside it.
package sim
