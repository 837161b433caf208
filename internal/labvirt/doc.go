// Package labvirt is labctl's libvirt provider (lab.Provider): Host for a
// lab on one host, MultiHost for a lab over several (each call goes where
// its object lives; labctl on each other host makes what only it can, and
// HostView reads it back through libvirt). It makes the objects the steps
// declare as libvirt's: the directory storage pool and its thin qcow2
// volumes (optionally clones of a backing image), the lab's own NAT network
// with DHCP reservations and DNS (IPv4, IPv6 or both: DHCPv6 reservations
// by DUID-LL and name, AAAA records, router advertisements from libvirt's
// dnsmasq; labnet.go), the bridge-named networks the IPI installer's bridge
// check accepts, a lab's entries (reservations and DNS records, listed per
// lab in the network's metadata) in a network it shares with other labs
// (shared.go, one lab at a time through a lock), and the node domains
// (internal/virt/domain's Spec from the plan's node: its NICs in the
// plan's order, the provisioning one first where the lab has one, which
// net check compares with domain.NICDrift; the in-band IPMI interface
// where the plan says so); the lab's links and routing rules through netlink
// (internal/netplumb) in the lab's namespace; and the lab's vbmcd, its
// LLDP sender (`vbmcd lldp`) and an Unmanaged provisioning network's DHCP
// server (dnsmasq, its configuration file written first) as processes
// (daemon.go), their command lines (vbmcd's, the sender's, dnsmasq's)
// built from the plan's facts (command.go; TestCommands pins them for the labs of
// plantest/labs.json). It answers for the machine labctl runs on
// (hostinfo.go, hostfiles.go): what it offers (Info), what a disk image is
// (Image, with qemu-img), and the host's files the network step declares,
// NetworkManager's unmanaged-devices snippet and the resolver drop-in
// (written by internal/netplumb). Every object carries the lab's ownership
// mark (MarkXML, a mark file in a pool's directory, a link's alias,
// vbmcd's environment, a snippet's name, a drop-in's first line), and
// Marked finds what bears it.
//
// Conn is a connection to one libvirtd (Dial, or Wrap of one made
// elsewhere) with the few tasks labctl demo uses.
// Outside this package and internal/virt nobody holds a go-libvirt client.
//
// What it does not do: serve BMCs or watch domains (that is internal/virt,
// the BMC backend), decide names or addresses (internal/plan), or order the
// steps (internal/lab). Nothing here changes or deletes an object without
// the lab's mark.
package labvirt
