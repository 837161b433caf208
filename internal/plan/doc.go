// Package plan resolves a lab once: from the lab file, the profile and the
// flags every labctl command shares (Options) it makes the Plan, every fact
// about the lab: its nodes (name, role, MAC, UUID, IP, sizes, disks, serial
// log), its network (the NAT network and bridge, or the shared network it
// joins with the reservations and DNS records it adds there, the baremetal and
// provisioning bridges, veths, MTU, VLANs, the bridge-named libvirt
// networks), its storage pool, its BMC endpoints (scheme, address, port,
// path, credentials), what vbmcd and the LLDP sender serve (Vbmcd,
// LLDPSender, an Unmanaged network's DHCPServer: facts; the provider builds
// their command lines), the installer directory, the
// cluster (its names api, api-int and *.apps in its domain, VIPs, machine
// network, counts, bridges, input files) and every file labctl keeps (Paths:
// state, logs, markers, ignition, install-config and its copy, installer
// logs, kubeconfig, hosts file), the host resolver's drop-in (Resolver) and,
// for a hybrid single node (Hybrid.SingleNode), its ISO and installation
// disk, with the VIPs in the lab network's DNS made the node's address.
// The plan reads the mode's Traits (traits.go: nodes with BMCs, the
// provisioning network, the topologies it installs, bonds, what its nodes
// boot, the LLDP default), never its name: each mode declares its own
// (lab.Mode.Traits) and labctl hands the plan the list (Options.Modes), so
// a new mode resolves without an edit here (TestTheFloorPlan,
// internal/lab/modes' TestAFourthModeResolves).
//
// The plan speaks OpenShift's words through internal/ocp (roles, BMC
// kinds, provisioning profiles, the installers' file names) and imports no
// installer: the adapters to install-config and agent-config generation
// are the installer step's (steps.IPICluster, steps.IPINodes) and the
// agent mode's (agentmode.Cluster); TestTheFloorPlan holds it.
//
// An IPI lab is wired as dev-scripts wires one (provisioning.go): with a
// provisioning network each node's NICs are the provisioning one first
// (its boot MAC, provisioningNetworkInterface), then its machine-network
// NIC (and a bond's second port); the provisioning services' addresses,
// the lab host's address on the provisioning bridge, and an Unmanaged
// network's DHCP server are the plan's too. A BMC network's routes
// (cluster.bmc.routes) are rules of the topology (bmcRules).
//
// Address families (cluster.ipFamily): an IPv6-only lab has IPv6 where an
// IPv4 lab has IPv4; a dual-stack lab has IPv4 there and its IPv6 family
// in Cluster.Secondary, NAT.Secondary and each node's SecondaryIP (the same
// place of the IPv6 range as IP of the IPv4 one). BMC URLs and vbmcd's
// RedfishAddr bracket an IPv6 host (net.JoinHostPort).
//
// `labctl up`, `down`, `status` and `net` all read the plan, so they cannot
// disagree about a lab: nothing outside this package derives a name, an
// address or a path, and internal/lab, internal/ipi and internal/upi never
// read the lab file (TestOnlyThePlanReadsTheLabFile).
//
// The files go by concern: plan.go (Options, the Plan, Load and Resolve,
// the paths), cluster.go (names, families, VIPs, topology, the agent and
// hybrid sections), network.go (NAT or shared network, bridges, resolver,
// LLDP), nodes.go (names, MACs, UUIDs, addresses, disks, BMC endpoints),
// bmcs.go (the BMC network, what vbmcd serves), hosts.go (a lab over
// several hosts), provisioning.go and traits.go.
//
// Resolve is pure (it reads only its arguments), which is what the golden
// files in testdata/ pin down. What it does not do: look at the host. Whether
// the plan's objects exist, and whose they are, is the actions' business
// (internal/lab).
package plan
