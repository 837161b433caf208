// Package vbmcd is the vbmcd command: one daemon that gives every libvirt VM
// (or KubeVirt VirtualMachine, or simulated server) a Redfish BMC and an IPMI lanplus BMC over one
// machine model. It parses flags, the YAML config file and VBMCD_*
// environment variables, builds the backend, the model and the protocol
// faces, and shuts them down within a bounded time.
//
// What it does not do: any protocol or backend work; that lives in
// internal/redfish, internal/ipmi, internal/virt, internal/kubevirt and
// internal/sim.
package vbmcd
