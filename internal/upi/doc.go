// Package upi is the hybrid (kcli-style UPI) flow's pure parts: the edits to
// the installer's manifests, the merge of extra files into the installer's
// ignition (per spec version, with coreos/ignition/v2's stable packages), and
// the static pods that give the cluster its own API and ingress VIPs
// (keepalived), DNS (coredns) and ingress load balancer (haproxy), with their
// daemons' configuration files. keepalived tracks the API's readyz for the
// API VIP and the router's (or haproxy's) health for the ingress VIP.
// IPv6-only clusters have IPv6 in Cluster's and Node's addresses;
// dual-stack ones have IPv4 there and IPv6 in Cluster.Secondary and
// Node.SecondaryIP. keepalived then runs one instance per family and VIP
// (the same router ID in both families), coredns answers AAAA (and A),
// and haproxy binds [::]:80 and [::]:443 v4v6; StaticPodFiles refuses an
// address of the wrong family, naming the field.
//
// Every transformation is a pure function of the cluster's facts (Cluster,
// Node) and the installer's output; the labctl hybrid pipeline resolves the
// facts once in the lab plan and calls these:
//
//   - EditManifests(dir, cluster, opts) after `create manifests`: removes the
//     Machine, MachineSet and ControlPlaneMachineSet manifests (by kind),
//     sets the Scheduler's mastersSchedulable (true without workers), writes
//     the default IngressController (replicas and placement on the routers'
//     nodes) and a CSR approver that approves only the cluster's own nodes'
//     CSRs; idempotent. Its parts (IsMachineManifest,
//     SetMastersSchedulable, IngressController, CSRApprover) are pure.
//   - MergeIgnition(file, installer, node, cluster, extra) after `create
//     ignition-configs`: the node's hostname, SSH key, extra files (the
//     static pods) and a NetworkManager dispatcher that puts the node's IP
//     first in resolv.conf, added to the installer's config in its own spec
//     version (3.2.0 to 3.6.0); the installer's entries win and stay byte for
//     byte, the pointer configs' merge source and CA stay.
//   - EmbedIgnition(ctx, liveISO, ign, out) for a single node (bootstrap in
//     place): the config as /images/ignition.img (a gzip newc cpio holding
//     config.ign, where coreos-installer's `iso ignition embed` puts it),
//     written with xorriso, the ISO's boot records and volume date kept;
//     EmbeddedIgnition reads it back. A single node's MergeIgnition adds no
//     resolv.conf dispatcher (Cluster.SingleNode: no coredns of its own).
//   - Installer runs `create manifests`, `create ignition-configs`,
//     `create single-node-ignition-config` and `wait-for` through ipi.RunInstallerCommand (output streamed, its tail in
//     errors). Package installertest has a fixture openshift-install for tests.
//
// What it does not do: talk to libvirt, decide addresses, retry the
// installer's waits, or remove the bootstrap; those belong to the plan and
// the pipeline's actions. The ignition merge does not fetch the configs the
// pointer configs reference (the machine config server serves them at boot).
package upi
