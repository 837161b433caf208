// Package labvirt builds a lab's libvirt objects: the directory storage pool
// and its thin qcow2 volumes (optionally clones of a backing image), the
// lab's own NAT network with DHCP reservations and DNS (IPv4, IPv6 or both:
// DHCPv6 reservations by DUID-LL and name, AAAA records, router
// advertisements from libvirt's dnsmasq; labnet.go), the bridge-named
// networks the IPI installer's bridge check accepts, a lab's entries
// (reservations and DNS records, listed per lab in the network's metadata)
// in a network it shares with other labs (shared.go), and the node domains
// (with an empty CD-ROM, a serial log, fw_cfg ignition when asked). Every
// object carries the lab's ownership mark (MarkXML, or a mark file in a
// pool's directory), and the Marked functions find what bears it.
//
// Conn is the way in: a connection to one libvirtd (Dial, or Wrap of a
// connection made elsewhere) whose methods are the tasks above. Outside
// this package and internal/virt nobody holds a go-libvirt client.
//
// What it does not do: serve BMCs or watch domains (that is internal/virt,
// the BMC backend), decide names or addresses (internal/plan), or order the
// steps (internal/lab). Nothing here changes or deletes an object without
// the lab's mark.
package labvirt
