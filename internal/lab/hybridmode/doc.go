// Package hybridmode is the hybrid install mode, kcli's flow for people who
// control neither DNS nor PXE: install-config with platform none, the
// installer's manifests edited and its ignition merged with static pods
// for the cluster's VIPs (keepalived), DNS (coredns) and ingress load
// balancer (haproxy), each node a thin clone of the RHCOS image booting its
// ignition through fw_cfg, the bootstrap removed after bootstrap-complete,
// then the workers, then install-complete and the lab host's names.
//
// It holds two flows; each plan runs the actions that apply to it
// (lab.Conditional): the bootstrap flow (manifests, ignition,
// control-plane, bootstrap-complete, remove-bootstrap, workers) and, for a
// single node (masters 1, no workers), kcli's sno with the bootstrap in
// place (sno.go: the bootstrap-in-place ignition embedded into the live
// ISO, one VM booting it from its CD drive behind its blank disk).
//
// Its rules (rules.go, the preflight's hooks): one host only, a live ISO
// for a single node, no VIP or keepalived router ID another hybrid
// cluster on the same segment holds (read from that cluster's nodes'
// marks, which its own nodes carry too), and the planned addresses a
// borrowed network would not give.
//
// What it does not do: edit manifests, merge ignition or write static pods
// itself (internal/upi), or reach the platform (the steps and the
// provider do).
package hybridmode
