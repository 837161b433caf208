// Command vbmcd gives every libvirt VM (or KubeVirt VirtualMachine, or
// simulated server) a Redfish and an IPMI lanplus BMC from one daemon,
// manages IPMI endpoints with `vbmcd ipmi set|unset|list`, and injects
// faults into a running daemon with `vbmcd fault set|clear|list`.
//
// This package is main only: signal handling and the exit code. Flags, the
// config file and wiring are in internal/vbmcd; the protocols in
// internal/redfish and internal/ipmi; the machines in internal/machine,
// internal/virt, internal/kubevirt and internal/sim.
package main
