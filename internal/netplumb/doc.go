// Package netplumb keeps the lab's host network plumbing in its declared
// shape: the bridges the IPI bare-metal installer wants (baremetal and, unless
// the provisioning network is Disabled, provisioning), the veth pairs that
// join baremetal to libvirt's network bridge so VMs keep libvirt's DHCP, DNS
// and NAT, VLAN sub-interfaces, MTUs, addresses and link state.
//
// The flow is desired state → plan → apply:
//
//   - A Topology declares the links. Validate checks it on its own.
//   - Plan reads the kernel's links once (two netlink dumps) and lists each
//     Difference: missing, down, wrong master, wrong MTU, wrong type, peer
//     missing, address missing, and the two it cannot fix: a foreign link
//     holding a lab name, and a master outside the lab (libvirt's bridge)
//     that does not exist.
//   - Apply changes only the difference, in dependency order (bridges, then
//     veth pairs, then VLANs; for each link: create, MTU, master, up,
//     addresses), then plans again and fails unless nothing differs. A second
//     Apply changes nothing and so keeps every ifindex.
//   - Down deletes the links the lab owns and nothing else.
//
// Ownership: every link the lab creates carries the link alias Owner(lab).
// A link with a lab name but another alias is foreign: Apply stops before
// changing anything and never modifies or deletes it; Down leaves it alone.
// Links outside the topology (libvirt's virbr0, a host NIC under a VLAN) are
// only ever referred to, never changed.
//
// Every call works on the *netlink.Handle it is given; OpenNamespace makes one
// for a named network namespace with netlink.NewHandleAt, so no goroutine ever
// switches namespace by hand. Netlink calls take no context; Apply checks the
// context between steps.
//
// NetworkManager: UnmanagedSnippet and WriteUnmanagedSnippet write a
// conf.d file that keeps NetworkManager's hands off the lab's links.
//
// What it does not do: libvirt networks (internal/virt), firewalling, routes,
// or moving links between namespaces.
package netplumb
