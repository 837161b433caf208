// Command labctl builds, checks and removes a bare-metal lab of libvirt VMs
// on one host or over several: `labctl up` (the mode in the lab file's
// mode: or --mode: ipi-baremetal: network, storage, nodes, BMCs,
// install-config, installer; hybrid: the kcli-style UPI flow, a single node
// in place; agent: the agent-based installer, every node booted through
// its BMC), `labctl status`, `labctl down`, `labctl add-node` (agent
// mode, day 2), `labctl net check|repair|down`, `labctl graph` and
// `labctl demo`.
//
// This package is main only: it builds the logger, sets up signal handling
// and prints the one error at the top. The commands live in internal/labctl
// and the work in internal/plan, internal/lab (the engine, its steps and
// its modes), internal/labvirt (the libvirt provider), internal/netplumb,
// internal/ipi, internal/upi and internal/agent; nothing here talks to
// libvirt or the kernel.
package main
