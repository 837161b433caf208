// Command labctl builds, checks and removes a bare-metal lab of libvirt VMs
// on one host or over several: `labctl up` (--mode ipi-baremetal: network,
// storage, nodes, BMCs, install-config, installer; --mode hybrid: the
// kcli-style UPI flow), `labctl status`, `labctl down`, `labctl net
// check|repair|down` and `labctl demo`.
//
// This package is main only: it builds the logger, sets up signal handling
// and prints the one error at the top. The commands live in internal/labctl
// and the work in internal/plan, internal/lab, internal/labvirt,
// internal/netplumb, internal/ipi and internal/upi; nothing here talks to
// libvirt or the kernel.
package main
