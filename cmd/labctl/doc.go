// Command labctl builds, checks and removes a bare-metal lab of libvirt VMs
// on one host: `labctl up` (network, storage, nodes, BMCs, install-config,
// installer), `labctl status`, `labctl down`, `labctl net check|repair|down`
// and `labctl demo`.
//
// This package is main only: it builds the logger, sets up signal handling
// and prints the one error at the top. The commands live in internal/labctl
// and the work in internal/lab, internal/netplumb, internal/ipi and
// internal/virt; nothing here talks to libvirt or the kernel.
package main
