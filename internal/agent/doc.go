// Package agent is what OpenShift's agent-based installer needs of a lab
// beside install-config: agent-config.yaml (the rendezvous address, every
// host with its hostname, role, NIC by MAC, root disk and, for static
// addresses, an nmstate networkConfig with an address, a default route
// and a resolver of each family), its checks, worded as the
// installer words them, and the installer's agent commands (`agent create
// image`, `agent wait-for bootstrap-complete|install-complete`).
//
// Generate takes its own Cluster, which the lab plan (internal/plan)
// fills; like internal/ipi it never reads the lab file. What it does not
// do: build the ISO (the installer does), serve it or boot the nodes from
// it (labctl's media step does that through each node's BMC, as on real
// servers).
package agent
