// Package ipi turns a lab into what the OpenShift installer's IPI bare-metal
// flow wants, checks it the way the installer would, and runs the installer.
//
// The API, in the order `labctl up --mode ipi-baremetal` uses it:
//
//   - ReadInputs(pullSecretPath, sshKeyPath) reads the pull secret and the
//     SSH public key at the paths the lab plan resolved, with messages that
//     say where to get them.
//   - Generate(cluster, nodes, pullSecret, sshKey) builds the InstallConfig
//     from the plan's Cluster and nodes: one Node per domain with its name,
//     role, UUID (the Redfish System id), the MAC of its NIC on the
//     baremetal bridge and its bmc.address (ocp.BMCAddress, which the plan
//     calls). labctl's preflight generates and validates it before any VM
//     exists, with the plan's real MACs and UUIDs.
//   - Validate(ic, dhcpRanges...) returns every problem, each worded as the
//     installer words it ("platform.baremetal.apiVIPs: Invalid value:
//     \"10.0.0.9\": IP expected to be in one of the machine networks: ..."),
//     the installer's dual-stack rules included, plus a few rules of the
//     lab's own (VIPs outside each family's DHCP range).
//   - ClusterNetworking(machine...) is install-config's networking for one
//     machine network per family, in the installer's order: each family's
//     machine, cluster and service network. A dual-stack Cluster has its
//     IPv6 family in Secondary, apiVIPs and ingressVIPs one of each.
//   - Write(dir, ic) writes dir/install-config.yaml, mode 0600 (it holds the
//     pull secret and the BMC passwords), fields in the installer's order.
//   - RunInstaller(ctx, opts, onLine) runs `openshift-install create cluster`
//     in the lab's directory, hands every output line to onLine and keeps a
//     log; when the binary is absent it returns an *InstallerNotFoundError
//     that says where to get it and that `labctl up` again resumes.
//     RunInstallerCommand does the same for any other command (create
//     manifests, create ignition-configs, wait-for; internal/upi uses it).
//
// What it does not do: read the lab file (its inputs are its own types,
// which the lab plan fills); define networks, disks, domains or BMCs (the
// labctl pipeline does, and hands the result over as []Node); talk to libvirt (the
// installer's own check that externalBridge and provisioningBridge exist as
// host interfaces is left to the installer); reach any network.
package ipi
