// Package upi is the hybrid (kcli-style UPI) flow's pure parts: the edits to
// the installer's manifests, the merge of extra files into the installer's
// ignition (per spec version, with coreos/ignition/v2's stable packages), and
// the static pods that give the cluster its own API and ingress VIPs
// (keepalived), DNS (coredns) and ingress load balancer (haproxy), with their
// daemons' configuration files.
//
// Every transformation is a pure function of the cluster's facts (Cluster,
// Node) and the installer's output; the labctl hybrid pipeline resolves the
// facts once in the lab plan and calls these. What it does not do: talk to
// libvirt, run the installer, or decide addresses; those belong to the plan
// and the pipeline's actions.
package upi
