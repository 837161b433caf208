// Package netplumb keeps the lab's host network plumbing in its declared
// shape: the bridges the IPI bare-metal installer wants (baremetal and, unless
// the provisioning network is Disabled, provisioning), the veth pairs that
// join baremetal to libvirt's network bridge so VMs keep libvirt's DHCP, DNS
// and NAT, VLAN sub-interfaces, the VXLAN links that join a lab's bridges
// across several hosts, MTUs, addresses and link state. WaitAddress waits
// for an address to be usable (an IPv6 one is tentative until duplicate
// address detection has run on a link with a carrier).
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
//     veth pairs, then VLANs, then VXLANs; for each link: create, MTU,
//     master, up, addresses), then plans again and fails unless nothing
//     differs. A second Apply changes nothing and so keeps every ifindex.
//   - Down deletes the topology's links that the lab owns and nothing else;
//     Owned and DownOwned find and delete every link that bears the lab's
//     mark, whatever topology declared it (for a lab file gone or changed).
//
// Routing rules: a Topology's Rules (rules.go) are policy rules (ip rule)
// that route one of the lab's networks as a router would (a BMC network:
// from its addresses, the main table for the networks it reaches, else
// unreachable). Plan reports a rule missing, or one of the lab's block
// that the topology no longer has; Apply adds or deletes it after the
// links. The lab's rules carry protocol RuleProtocol and priorities of a
// block derived from the lab's name (RulePriorities), so OwnedRules and
// DeleteRule find them without the lab file; no other rule is touched.
//
// Ownership: every link the lab creates carries the link alias Owner(lab).
// A link with a lab name but another alias is foreign: Apply stops before
// changing anything and never modifies or deletes it; Down leaves it alone.
// Links outside the topology (libvirt's virbr0, a host NIC under a VLAN) are
// only ever referred to, never changed.
//
// Every link call works on the *netlink.Handle it is given; OpenNamespace
// makes one for a named network namespace with netlink.NewHandleAt, so no
// goroutine switches namespace for them. Netlink calls take no context;
// Apply checks the context between steps. Sockets are the exception:
// InNamespace, DialContextIn and ListenIn make a dialer or a listener inside
// a named namespace (for a lab whose network lives in one) and are the only
// place that switches an OS thread's namespace, locked for that call.
//
// NetworkManager: UnmanagedSnippet and WriteUnmanagedSnippet write a
// conf.d file that keeps NetworkManager's hands off the lab's links;
// RemoveUnmanagedSnippet takes it away; Unmanaged is the same as one value
// (written only where NetworkManager is), as the provider keeps it, and
// UnmanagedSnippetOwner reads the lab from the file's name.
//
// Host resolver: a ResolverDropIn is the file that makes NetworkManager's
// dnsmasq plugin (dnsmasq.d, server=/DOMAIN/IP) or systemd-resolved
// (resolved.conf.d, DNS= with Domains=~DOMAIN) send a cluster's domain to
// the lab network's DNS. Its first line is the lab's mark: Write never
// writes over a file without it (ErrNotLabs), RemoveResolverDropIn never
// removes one; ResolverDropInOwner reads whose mark a file bears. Telling
// the resolver to reload is the user's (ApplyHint).
//
// What it does not do: libvirt networks (the lab's NAT network is
// internal/labvirt's), firewalling, routes of its own (its rules use the
// main table's), or moving links between namespaces.
package netplumb
