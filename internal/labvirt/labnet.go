package labvirt

// The lab's own NAT network: what libvirt's `default` network is in the seed
// lab, but defined and owned by the lab.
//
//	ensureLabNetwork(ctx, l, LabNetworkSpec) (changed bool, err error)
//	deleteLabNetwork(ctx, l, name, lab string) (deleted bool, err error)
//	labNetworkDrift(ctx, l, LabNetworkSpec) ([]string, error)
//	LabNetworkXML(LabNetworkSpec) (string, error)
//
// The network is a libvirt network in forward mode "nat" on its own bridge
// (libvirt creates the bridge, gives it the first host address of the CIDR,
// runs dnsmasq on it for DHCP and DNS, and adds the NAT rules). Beside the
// DHCP range it carries:
//
//   - a DHCP reservation (<ip><dhcp><host mac ip name>) for every host, and a
//     DNS record for it (<dns><host>) as NAME and NAME.DOMAIN, so the hosts
//     resolve before their first lease;
//   - <domain name=DOMAIN localOnly=yes>: dnsmasq answers for the cluster
//     domain (cluster name + base domain, "ocp.lab.local") and never asks
//     upstream about it;
//   - A records api.DOMAIN and api-int.DOMAIN for the API VIP;
//   - the wildcard *.apps.DOMAIN for the ingress VIP. libvirt's <dns><host>
//     cannot hold wildcards, so this is a dnsmasq option in libvirt's dnsmasq
//     namespace (<dnsmasq:options><dnsmasq:option
//     value="address=/apps.DOMAIN/VIP"/>), which libvirt (checked on 9.0)
//     copies into the network's dnsmasq configuration as it is. dnsmasq's
//     address=/D/ answers for D and every name below it.
//
// Ownership is the same mark as for the bridge networks (network.go): the
// lab's element in <metadata> under MarkNS. A network with the spec's
// name but without the lab's mark, or any other network on the spec's
// bridge, is foreign: EnsureLabNetwork stops with ErrNetworkForeign, naming
// it and saying how to fix it, and changes nothing.
//
// Idempotence: the lab's network whose definition already says what the spec
// says (compared field by field, not as text: libvirt adds a UUID, a MAC and
// bridge defaults) is left alone and EnsureLabNetwork returns changed=false
// (after starting it and setting autostart if needed, which counts as a
// change). When the only difference is hosts the spec adds, they are added
// to the running network with NetworkUpdate (live and persistent), which
// neither restarts dnsmasq's network nor disturbs guests. Any other
// difference redefines the network (keeping its UUID and bridge MAC) and,
// when it runs, restarts it: stopping a libvirt network unplugs the taps of
// running guests from its bridge, and libvirt does not plug them back, so
// callers should redefine only while the lab's VMs are off. LabNetworkDrift
// says in words what differs, for a caller that wants to tell the user
// before.
//
// IPv6: the spec's CIDR may be IPv6 (an IPv6-only lab), or IPv4 with
// Secondary an IPv6 family (dual stack). An IPv6 family is a second <ip
// family='ipv6'> (or the only one) with its DHCPv6 range, and libvirt's
// dnsmasq then sends router advertisements on the bridge (the nodes learn
// the default route from them; the prefix's addresses come from DHCPv6).
// libvirt's IPv6 <host> takes no MAC (a MAC means nothing to DHCPv6): each
// host's reservation is id='00:03:00:01:MAC' (a DUID-LL made of its MAC,
// what NetworkManager sends with ipv6.dhcp-duid=ll, as dev-scripts' nodes
// do) and name='NAME' (dnsmasq also matches a client that sends its host
// name). A client with another DUID and another name takes an address of
// the range instead. The DNS records of an IPv6 address are AAAA
// records, and *.apps gets an address= option per family. <forward
// mode='nat'> carries <nat ipv6='yes'/> so that the unique local
// addresses reach out as IPv4's private ones do.

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/bmlab/bmlab/internal/netaddr"
)

// LabNetworkSpec declares the lab's NAT network.
type LabNetworkSpec struct {
	Name   string
	Bridge string // at most 15 bytes
	Lab    string // the owning lab
	// Family is the network's first address family: MachineNetwork is
	// the network, its first host address the bridge's (HostAddress, when
	// given, must be it); DHCPRange the DHCP range; APIVIP and IngressVIP
	// are where api, api-int and *.apps resolve: the cluster's VIPs, or a
	// single-node cluster's own address (a host's reservation below).
	// Invalid (zero): no such records.
	netaddr.Family
	MTU uint // 0: libvirt's default (1500)
	// Domain is the cluster's domain, cluster name and base domain
	// ("ocp.lab.local"): hosts resolve as NAME.Domain, the API as
	// api.Domain and api-int.Domain, ingress as *.apps.Domain.
	Domain string
	// NodeHoldsVIPs says the VIPs are a node's own reservation: a
	// single-node cluster answers api and *.apps itself.
	NodeHoldsVIPs bool
	Hosts         []LabHost
	// Secondary is a dual-stack network's IPv6 family, its own <ip>
	// element, DHCP range and VIPs (Family is then IPv4); the zero
	// Family for a single stack.
	Secondary netaddr.Family
}

// LabHost is a DHCP reservation with its DNS name.
type LabHost struct {
	MAC string
	IP  netip.Addr
	// SecondaryIP is the host's address of the Secondary family.
	SecondaryIP netip.Addr
	Hostname    string // a single DNS label ("master-0")
}

// family is one address family of the spec, as the checks and the XML
// take it.
type family struct {
	netaddr.Family
	ip    func(LabHost) netip.Addr
	label string // "" or "IPv6 " in messages
}

// gateway is the bridge's address: the network's first host address.
func (f family) gateway() netip.Addr { return f.MachineNetwork.Masked().Addr().Next() }

// families are the spec's families, the primary first.
func (s LabNetworkSpec) families() []family {
	out := []family{{Family: s.Family, ip: func(h LabHost) netip.Addr { return h.IP }}}
	if f := s.Secondary; !f.IsZero() {
		out = append(out, family{Family: f, ip: func(h LabHost) netip.Addr { return h.SecondaryIP }, label: "IPv6 "})
	}
	return out
}

// DUID is the DHCPv6 client identifier a reservation of host mac takes:
// a DUID-LL (RFC 8415 §11.4, type 3, hardware type 1, Ethernet) made of
// the MAC.
func DUID(mac string) string { return "00:03:00:01:" + strings.ToLower(mac) }

// Gateway is the bridge's address: the network's first host address.
func (s LabNetworkSpec) Gateway() netip.Addr { return s.MachineNetwork.Masked().Addr().Next() }

// dnsmasqXMLNS is libvirt's namespace for raw dnsmasq options.
const dnsmasqXMLNS = "http://libvirt.org/schemas/network/dnsmasq/1.0"

// Validate checks the spec for mistakes libvirt would accept or report
// badly: addresses outside the CIDR, a VIP dnsmasq could lease to someone,
// duplicate reservations.
func (s LabNetworkSpec) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if s.Name == "" || s.Lab == "" {
		bad("name and lab are required")
	}
	if s.Bridge == "" || len(s.Bridge) > 15 {
		bad("bridge %q: want 1 to 15 bytes", s.Bridge)
	}
	if f := s.Secondary; !f.IsZero() && (!s.MachineNetwork.Addr().Is4() || !f.MachineNetwork.Addr().Is6()) {
		bad("secondary family %s: a dual-stack network is IPv4 (CIDR %s) and IPv6 (Secondary)", f.MachineNetwork, s.MachineNetwork)
	}
	for _, f := range s.families() {
		switch a := f.MachineNetwork.Addr(); {
		case !f.MachineNetwork.IsValid(), a.Is4() && f.MachineNetwork.Bits() > 30:
			bad("CIDR %s: want an IPv4 prefix of /30 or shorter, or an IPv6 one of /64 to /126", f.MachineNetwork)
			return fmt.Errorf("lab network %q: %w", s.Name, errors.Join(errs...))
		case a.Is6() && (f.MachineNetwork.Bits() < 64 || f.MachineNetwork.Bits() > 126):
			bad("CIDR %s: want an IPv6 prefix of /64 to /126", f.MachineNetwork)
			return fmt.Errorf("lab network %q: %w", s.Name, errors.Join(errs...))
		}
		errs = append(errs, s.validateFamily(f)...)
	}
	if (s.APIVIP.IsValid() || s.IngressVIP.IsValid() || len(s.Hosts) > 0) && !validDNSName(s.Domain) {
		bad("domain %q: DNS records need a domain such as ocp.lab.local", s.Domain)
	}
	seen := map[string]string{}
	once := func(kind, key, who string) {
		if prev, ok := seen[kind+key]; ok {
			bad("hosts %s and %s have the same %s %s", prev, who, kind, key)
		}
		seen[kind+key] = who
	}
	for _, h := range s.Hosts {
		mac, err := net.ParseMAC(h.MAC)
		if err != nil || len(mac) != 6 {
			bad("host %s: MAC %q is not an Ethernet address", h.Hostname, h.MAC)
		}
		if !validDNSName(h.Hostname) || strings.Contains(h.Hostname, ".") {
			bad("host %q: want a single DNS label as hostname", h.Hostname)
		}
		once("MAC", strings.ToLower(h.MAC), h.Hostname)
		once("IP", h.IP.String(), h.Hostname)
		if h.SecondaryIP.IsValid() {
			once("IP", h.SecondaryIP.String(), h.Hostname)
		}
		once("hostname", h.Hostname, h.Hostname)
	}
	if len(errs) > 0 {
		return fmt.Errorf("lab network %q: %w", s.Name, errors.Join(errs...))
	}
	return nil
}

// validateFamily checks one family's range, VIPs and hosts' addresses.
func (s LabNetworkSpec) validateFamily(f family) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(f.label+format, a...)) }
	gw := f.gateway()
	bcast := lastAddr(f.MachineNetwork)
	host := func(a netip.Addr) bool {
		return f.MachineNetwork.Contains(a) && a != gw && a != bcast && a != f.MachineNetwork.Masked().Addr()
	}
	if !host(f.DHCPRange.Start) || !host(f.DHCPRange.End) || f.DHCPRange.End.Less(f.DHCPRange.Start) {
		bad("DHCP range %s-%s: want host addresses of %s other than the bridge's %s, start before end", f.DHCPRange.Start, f.DHCPRange.End, f.MachineNetwork, gw)
	}
	inRange := func(a netip.Addr) bool { return !a.Less(f.DHCPRange.Start) && !f.DHCPRange.End.Less(a) }
	reserved := func(a netip.Addr) bool {
		for _, h := range s.Hosts {
			if f.ip(h) == a {
				return true
			}
		}
		return false
	}
	for _, v := range []struct {
		what string
		ip   netip.Addr
	}{{"API VIP", f.APIVIP}, {"ingress VIP", f.IngressVIP}} {
		switch {
		case !v.ip.IsValid(), s.NodeHoldsVIPs && reserved(v.ip):
			// A node's own address: a single-node cluster's API and apps.
		case !host(v.ip):
			bad("%s %s: want a host address of %s other than the bridge's %s", v.what, v.ip, f.MachineNetwork, gw)
		case inRange(v.ip):
			bad("%s %s is inside the DHCP range %s-%s, where dnsmasq may lease it to a host", v.what, v.ip, f.DHCPRange.Start, f.DHCPRange.End)
		}
	}
	for _, h := range s.Hosts {
		ip := f.ip(h)
		if !host(ip) || (!s.NodeHoldsVIPs && (ip == f.APIVIP || ip == f.IngressVIP)) {
			bad("host %s: IP %s is not a free host address of %s (bridge %s, VIPs %s, %s)", h.Hostname, ip, f.MachineNetwork, gw, f.APIVIP, f.IngressVIP)
		}
	}
	return errs
}

// lastAddr is a prefix's last address (IPv4's broadcast address).
func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr()
	b := a.AsSlice()
	for i := p.Bits(); i < a.BitLen(); i++ {
		b[i/8] |= 1 << (7 - i%8)
	}
	out, _ := netip.AddrFromSlice(b)
	return out
}

func validDNSName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// LabNetworkXML builds the network's definition (no UUID: libvirt picks one).
func LabNetworkXML(spec LabNetworkSpec) (string, error) {
	n, err := labNetwork(spec)
	if err != nil {
		return "", err
	}
	return n.Marshal()
}

func labNetwork(spec LabNetworkSpec) (*libvirtxml.Network, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	n, err := labNetworkMarked(spec)
	if err != nil {
		return nil, err
	}
	n.Forward = &libvirtxml.NetworkForward{Mode: "nat"}
	n.Bridge = &libvirtxml.NetworkBridge{Name: spec.Bridge, STP: "on", Delay: "0"}
	if spec.MTU > 0 {
		n.MTU = &libvirtxml.NetworkMTU{Size: spec.MTU}
	}
	if spec.Domain != "" {
		n.Domain = &libvirtxml.NetworkDomain{Name: spec.Domain, LocalOnly: "yes"}
	}
	var dns []libvirtxml.NetworkDNSHost
	for _, f := range spec.families() {
		ip := libvirtxml.NetworkIP{
			Address: f.gateway().String(),
			Prefix:  uint(f.MachineNetwork.Bits()),
			DHCP: &libvirtxml.NetworkDHCP{Ranges: []libvirtxml.NetworkDHCPRange{{
				Start: f.DHCPRange.Start.String(), End: f.DHCPRange.End.String(),
			}}},
		}
		if f.MachineNetwork.Addr().Is6() {
			ip.Family = "ipv6"
			n.Forward.NAT = &libvirtxml.NetworkForwardNAT{IPv6: "yes"}
		}
		for _, h := range spec.Hosts {
			dh, dn := labHostXML(spec, h, f)
			ip.DHCP.Hosts = append(ip.DHCP.Hosts, dh)
			dns = append(dns, dn)
		}
		if f.APIVIP.IsValid() {
			api := dnsHost(f.APIVIP, "api."+spec.Domain, "api-int."+spec.Domain)
			merged := false
			for i := range dns {
				if dns[i].IP == api.IP { // a single node's own address
					dns[i].Hostnames = append(dns[i].Hostnames, api.Hostnames...)
					merged = true
				}
			}
			if !merged {
				dns = append(dns, api)
			}
		}
		if f.IngressVIP.IsValid() {
			if n.DnsmasqOptions == nil {
				n.DnsmasqOptions = &libvirtxml.NetworkDnsmasqOptions{}
			}
			n.DnsmasqOptions.Option = append(n.DnsmasqOptions.Option,
				libvirtxml.NetworkDnsmasqOption{Value: "address=/apps." + spec.Domain + "/" + f.IngressVIP.String()})
		}
		n.IPs = append(n.IPs, ip)
	}
	if len(dns) > 0 {
		n.DNS = &libvirtxml.NetworkDNS{Host: dns}
	}
	return n, nil
}

// labNetworkMarked is a network with only its name and the lab's mark.
func labNetworkMarked(spec LabNetworkSpec) (*libvirtxml.Network, error) {
	x, err := NetworkXML(NetworkSpec{Name: spec.Name, Lab: spec.Lab}, "")
	if err != nil {
		return nil, err
	}
	var n libvirtxml.Network
	if err := n.Unmarshal(x); err != nil {
		return nil, err
	}
	return &libvirtxml.Network{Name: n.Name, Metadata: n.Metadata}, nil
}

// labHostXML is a host's DHCP reservation and DNS record in family f: by
// MAC for IPv4, by DUID and name for IPv6 (see the top of this file).
func labHostXML(spec LabNetworkSpec, h LabHost, f family) (libvirtxml.NetworkDHCPHost, libvirtxml.NetworkDNSHost) {
	ip := f.ip(h)
	dh := libvirtxml.NetworkDHCPHost{MAC: strings.ToLower(h.MAC), IP: ip.String(), Name: h.Hostname}
	if ip.Is6() {
		dh.MAC, dh.ID = "", DUID(h.MAC)
	}
	return dh, dnsHost(ip, h.Hostname, h.Hostname+"."+spec.Domain)
}

func dnsHost(ip netip.Addr, names ...string) libvirtxml.NetworkDNSHost {
	d := libvirtxml.NetworkDNSHost{IP: ip.String()}
	for _, n := range names {
		d.Hostnames = append(d.Hostnames, libvirtxml.NetworkDNSHostHostname{Hostname: n})
	}
	return d
}

// labNetView is what the lab cares about in a network definition, in a form
// that compares: lists sorted, libvirt's additions left out.
type labNetView struct {
	Owner, Forward, Bridge, MTU, Domain, Address string
	Ranges, DHCPHosts, DNSHosts, Dnsmasq         []string
}

// viewLabNetwork leaves out the entries other labs added to the network
// (listed in its shared metadata, shared.go): they are theirs, not drift.
func viewLabNetwork(n *libvirtxml.Network) labNetView { return viewLabNetworkBut(n, n) }

// viewLive is the running network's view. The other labs' list is in the
// persistent definition's metadata only: labctl adds it by redefining.
func viewLive(st labNetState) labNetView { return viewLabNetworkBut(st.live, st.def) }

// viewLabNetworkBut is n's view without the entries lists names.
func viewLabNetworkBut(n, lists *libvirtxml.Network) labNetView {
	v := viewLabNetworkAll(n)
	labs, _, _, _ := sharedLabs(metadataOf(lists))
	if len(labs) == 0 {
		return v
	}
	var hosts, dns []string
	for _, e := range labs {
		for _, h := range e.Hosts {
			hosts = append(hosts, dhcpHostKey(h.xml()))
		}
		for _, r := range e.Records {
			dns = append(dns, dnsHostKey(r.xml()))
		}
	}
	v.DHCPHosts = slices.DeleteFunc(v.DHCPHosts, func(k string) bool { return slices.Contains(hosts, k) })
	v.DNSHosts = slices.DeleteFunc(v.DNSHosts, func(k string) bool { return slices.Contains(dns, k) })
	return v
}

// viewLabNetworkAll is viewLabNetwork with every entry.
func viewLabNetworkAll(n *libvirtxml.Network) labNetView {
	v := labNetView{Owner: networkOwner(n)}
	if n.Forward != nil {
		v.Forward = n.Forward.Mode
		if n.Forward.NAT != nil && n.Forward.NAT.IPv6 == "yes" {
			v.Forward += " (IPv6 too)"
		}
	}
	if n.Bridge != nil {
		v.Bridge = n.Bridge.Name
	}
	if n.MTU != nil {
		v.MTU = fmt.Sprint(n.MTU.Size)
	}
	if n.Domain != nil {
		v.Domain = n.Domain.Name + " localOnly=" + n.Domain.LocalOnly
	}
	for i, ip := range n.IPs {
		prefix := ip.Prefix
		if ip.Netmask != "" {
			if m := net.ParseIP(ip.Netmask).To4(); m != nil {
				ones, _ := net.IPMask(m).Size()
				prefix = uint(ones)
			}
		}
		if i > 0 {
			v.Address += ", "
		}
		v.Address += fmt.Sprintf("%s/%d %s", ip.Address, prefix, ip.Family)
		if ip.DHCP == nil {
			continue
		}
		for _, r := range ip.DHCP.Ranges {
			v.Ranges = append(v.Ranges, r.Start+"-"+r.End)
		}
		for _, h := range ip.DHCP.Hosts {
			v.DHCPHosts = append(v.DHCPHosts, dhcpHostKey(h))
		}
	}
	if n.DNS != nil {
		for _, h := range n.DNS.Host {
			v.DNSHosts = append(v.DNSHosts, dnsHostKey(h))
		}
	}
	if n.DnsmasqOptions != nil {
		for _, o := range n.DnsmasqOptions.Option {
			v.Dnsmasq = append(v.Dnsmasq, o.Value)
		}
	}
	for _, l := range [][]string{v.Ranges, v.DHCPHosts, v.DNSHosts, v.Dnsmasq} {
		slices.Sort(l)
	}
	return v
}

func dhcpHostKey(h libvirtxml.NetworkDHCPHost) string {
	if h.ID != "" { // IPv6
		return "id " + strings.ToLower(h.ID) + " " + h.IP + " " + h.Name
	}
	return strings.ToLower(h.MAC) + " " + h.IP + " " + h.Name
}

func dnsHostKey(h libvirtxml.NetworkDNSHost) string {
	k := h.IP
	for _, n := range h.Hostnames {
		k += " " + n.Hostname
	}
	return k
}

// labNetDiff says in words how have differs from want. additionsOnly is
// true when every difference is a host that want has and have lacks.
func labNetDiff(want, have labNetView) (diff []string, additionsOnly bool) {
	additionsOnly = true
	for _, f := range []struct{ what, want, have string }{
		{"owner", want.Owner, have.Owner}, {"forward mode", want.Forward, have.Forward},
		{"bridge", want.Bridge, have.Bridge}, {"MTU", want.MTU, have.MTU},
		{"domain", want.Domain, have.Domain}, {"address", want.Address, have.Address},
	} {
		if f.want != f.have {
			diff = append(diff, fmt.Sprintf("%s: wants %s, has %s", f.what, orNetworkNone(f.want), orNetworkNone(f.have)))
			additionsOnly = false
		}
	}
	for _, f := range []struct {
		what       string
		want, have []string
		addable    bool
	}{
		{"DHCP range", want.Ranges, have.Ranges, false}, {"DHCP host", want.DHCPHosts, have.DHCPHosts, true},
		{"DNS host", want.DNSHosts, have.DNSHosts, true}, {"dnsmasq option", want.Dnsmasq, have.Dnsmasq, false},
	} {
		for _, w := range f.want {
			if !slices.Contains(f.have, w) {
				diff = append(diff, fmt.Sprintf("%s %q missing", f.what, w))
				additionsOnly = additionsOnly && f.addable
			}
		}
		for _, h := range f.have {
			if !slices.Contains(f.want, h) {
				diff = append(diff, fmt.Sprintf("%s %q unwanted", f.what, h))
				additionsOnly = false
			}
		}
	}
	return diff, additionsOnly && len(diff) > 0
}

// labNetState is a lab network as libvirt has it.
type labNetState struct {
	net               libvirt.Network
	def               *libvirtxml.Network // the persistent definition
	live              *libvirtxml.Network // what runs, when active
	exists            bool
	active, autostart bool
}

func getLabNetState(ctx context.Context, l *libvirt.Libvirt, name string) (labNetState, error) {
	var st labNetState
	net, found, err := findNetwork(ctx, l, name)
	if err != nil || !found {
		return st, err
	}
	st.net, st.exists = net, true
	if st.def, err = networkDef(l, net, libvirt.NetworkXMLInactive); err != nil {
		return st, err
	}
	if st.active, st.autostart, err = runState(l, net); err != nil {
		return st, err
	}
	if st.active {
		st.live, err = networkDef(l, net, 0)
	}
	return st, err
}

// runState says whether a network runs and starts with libvirtd.
func runState(l *libvirt.Libvirt, net libvirt.Network) (active, autostart bool, err error) {
	a, err := l.NetworkIsActive(net)
	if err != nil {
		return false, false, fmt.Errorf("libvirt network %q: %w", net.Name, err)
	}
	auto, err := l.NetworkGetAutostart(net)
	if err != nil {
		return false, false, fmt.Errorf("libvirt network %q: %w", net.Name, err)
	}
	return a == 1, auto == 1, nil
}

// networkDef reads and parses a network's XML.
func networkDef(l *libvirt.Libvirt, net libvirt.Network, flags libvirt.NetworkXMLFlags) (*libvirtxml.Network, error) {
	x, err := l.NetworkGetXMLDesc(net, uint32(flags))
	if err != nil {
		return nil, fmt.Errorf("libvirt network %q XML: %w", net.Name, err)
	}
	var n libvirtxml.Network
	if err := n.Unmarshal(x); err != nil {
		return nil, fmt.Errorf("libvirt network %q XML: %w", net.Name, err)
	}
	return &n, nil
}

// labNetworkForeign returns an ErrNetworkForeign error when the spec's name
// is a network that is not the lab's or its bridge belongs to another
// network.
func labNetworkForeign(l *libvirt.Libvirt, spec LabNetworkSpec, st labNetState) error {
	if st.exists {
		if owner := networkOwner(st.def); owner != spec.Lab {
			return fmt.Errorf("libvirt network %q has owner %q, not the lab %q: %w; remove it (virsh net-destroy %s; virsh net-undefine %s) or give the lab another network name",
				spec.Name, owner, spec.Lab, ErrNetworkForeign, spec.Name, spec.Name)
		}
	}
	nets, _, err := l.ConnectListAllNetworks(1, 0)
	if err != nil {
		return fmt.Errorf("list libvirt networks: %w", err)
	}
	for _, o := range nets {
		if o.Name == spec.Name {
			continue
		}
		n, err := networkDef(l, o, libvirt.NetworkXMLInactive)
		if isNetworkNotFound(err) {
			continue // gone meanwhile
		}
		if err != nil {
			return err
		}
		if n.Bridge != nil && n.Bridge.Name == spec.Bridge {
			return fmt.Errorf("bridge %q of the lab network %q is the bridge of libvirt network %q (owner %q): %w; give the lab another bridge name or remove that network (virsh net-destroy %s; virsh net-undefine %s)",
				spec.Bridge, spec.Name, o.Name, networkOwner(n), ErrNetworkForeign, o.Name, o.Name)
		}
	}
	return nil
}

// labNetworkDrift says how the network falls short of the spec, in words
// for people; none means EnsureLabNetwork would change nothing.
func labNetworkDrift(ctx context.Context, l *libvirt.Libvirt, spec LabNetworkSpec) ([]string, error) {
	want, st, err := labNetworkNow(ctx, l, spec)
	if err != nil {
		return nil, err
	}
	return labNetProblems(want, st), nil
}

// labNetworkNow is the network the spec wants (checked first: an invalid
// spec asks libvirt nothing) and what libvirt has of that name.
func labNetworkNow(ctx context.Context, l *libvirt.Libvirt, spec LabNetworkSpec) (*libvirtxml.Network, labNetState, error) {
	want, err := labNetwork(spec)
	if err != nil {
		return nil, labNetState{}, err
	}
	st, err := getLabNetState(ctx, l, spec.Name)
	return want, st, err
}

func labNetProblems(want *libvirtxml.Network, st labNetState) []string {
	if !st.exists {
		return []string{"missing"}
	}
	out, _ := labNetDiff(viewLabNetwork(want), viewLabNetwork(st.def))
	switch {
	case !st.active:
		out = append(out, "inactive")
	case len(out) == 0:
		if live, _ := labNetDiff(viewLabNetwork(want), viewLive(st)); len(live) > 0 {
			out = append(out, "runs an older definition: "+strings.Join(live, "; "))
		}
	}
	if !st.autostart {
		out = append(out, "not autostarted")
	}
	return out
}

// ensureLabNetwork defines, starts and autostarts the lab's NAT network, or
// brings the lab's existing network to the spec (see the top of this file
// for how). It returns whether it changed anything. A foreign network with
// the spec's name or bridge stops it with ErrNetworkForeign; an invalid spec
// stops it before it asks libvirt anything.
func ensureLabNetwork(ctx context.Context, l *libvirt.Libvirt, spec LabNetworkSpec) (changed bool, err error) {
	want, st, err := labNetworkNow(ctx, l, spec)
	if err != nil {
		return false, err
	}
	if err := labNetworkForeign(l, spec, st); err != nil {
		return false, err
	}
	if len(labNetProblems(want, st)) == 0 {
		return false, nil
	}
	if err := labNetworkApply(l, spec, want, st); err != nil {
		return true, err
	}
	st, err = getLabNetState(ctx, l, spec.Name)
	if err != nil {
		return true, err
	}
	if p := labNetProblems(want, st); len(p) > 0 {
		return true, fmt.Errorf("libvirt network %q read back: %s", spec.Name, strings.Join(p, "; "))
	}
	return true, nil
}

func labNetworkApply(l *libvirt.Libvirt, spec LabNetworkSpec, want *libvirtxml.Network, st labNetState) error {
	net := st.net
	var diff, liveDiff []string
	var additionsOnly bool
	if st.exists {
		diff, additionsOnly = labNetDiff(viewLabNetwork(want), viewLabNetwork(st.def))
		if st.active {
			liveDiff, _ = labNetDiff(viewLabNetwork(want), viewLive(st))
		}
	}
	// Hosts added to a running network whose live and persistent
	// definitions agree go in live; anything else is a redefinition and,
	// for a running network, a restart.
	live := additionsOnly && st.active && slices.Equal(diff, liveDiff) && labNetworkAddHosts(l, spec, st) == nil
	switch {
	case live:
	case !st.exists || len(diff) > 0:
		// Keep the identity libvirt gave the network, and the entries
		// other labs added to it with their list.
		if st.exists {
			want.UUID, want.MAC = st.def.UUID, st.def.MAC
			if err := keepShared(want, st.def); err != nil {
				return err
			}
		}
		x, err := want.Marshal()
		if err != nil {
			return err
		}
		why := "missing"
		if st.exists {
			why = strings.Join(diff, "; ")
		}
		if net, err = l.NetworkDefineXML(x); err != nil {
			return fmt.Errorf("define libvirt network %q (%s): %w", spec.Name, why, err)
		}
		liveDiff = append(liveDiff, diff...)
	}
	if !live && st.active && len(liveDiff) > 0 {
		if err := l.NetworkDestroy(net); err != nil && !isNetworkError(err, libvirt.ErrOperationInvalid) {
			return fmt.Errorf("stop libvirt network %q to apply its new definition (%s): %w", spec.Name, strings.Join(liveDiff, "; "), err)
		}
		st.active = false
	}
	if !st.active {
		if err := l.NetworkCreate(net); err != nil && !isNetworkError(err, libvirt.ErrOperationInvalid) {
			return fmt.Errorf("start libvirt network %q on bridge %q: %w", spec.Name, spec.Bridge, err)
		}
	}
	if !st.autostart {
		if err := l.NetworkSetAutostart(net, 1); err != nil {
			return fmt.Errorf("autostart libvirt network %q: %w", spec.Name, err)
		}
	}
	return nil
}

// labNetworkAddHosts adds the spec's hosts that the running network lacks,
// live and to its persistent definition. On error the caller redefines.
func labNetworkAddHosts(l *libvirt.Libvirt, spec LabNetworkSpec, st labNetState) error {
	have := viewLabNetwork(st.def)
	const flags = libvirt.NetworkUpdateAffectLive | libvirt.NetworkUpdateAffectConfig
	for i, f := range spec.families() {
		for _, h := range spec.Hosts {
			dh, dn := labHostXML(spec, h, f)
			for _, u := range []struct {
				what    string
				present bool
				section libvirt.NetworkUpdateSection
				parent  int32
				elem    any
			}{
				// A DHCP host goes into its family's <ip> (libvirt's
				// -1 is the first IPv4 one).
				{"DHCP host", slices.Contains(have.DHCPHosts, dhcpHostKey(dh)), libvirt.NetworkSectionIPDhcpHost, int32(i), dh},
				{"DNS host", slices.Contains(have.DNSHosts, dnsHostKey(dn)), libvirt.NetworkSectionDNSHost, -1, dn},
			} {
				if u.present {
					continue
				}
				x, err := xml.Marshal(u.elem)
				if err != nil {
					return err
				}
				if err := l.NetworkUpdateCompat(st.net, libvirt.NetworkUpdateCommandAddLast, u.section, u.parent, string(x), flags); err != nil {
					return fmt.Errorf("add %s %s to libvirt network %q: %w", u.what, h.Hostname, spec.Name, err)
				}
			}
		}
	}
	return nil
}

// deleteLabNetwork stops and undefines the lab's NAT network; a missing
// network is no error, a foreign one is ErrNetworkForeign and is left
// alone. It returns whether it deleted anything. (It is DeleteNetwork: the
// ownership mark is the same.)
func deleteLabNetwork(ctx context.Context, l *libvirt.Libvirt, name, lab string) (deleted bool, err error) {
	return deleteNetwork(ctx, l, name, lab)
}

// keepShared copies into want the entries other labs added to have, and
// their list in the metadata.
func keepShared(want, have *libvirtxml.Network) error {
	labs, _, _, err := sharedLabs(metadataOf(have))
	if err != nil || len(labs) == 0 {
		return err
	}
	for _, e := range labs {
		for _, h := range e.Hosts {
			if len(want.IPs) > 0 && want.IPs[0].DHCP != nil {
				want.IPs[0].DHCP.Hosts = append(want.IPs[0].DHCP.Hosts, h.xml())
			}
		}
		for _, r := range e.Records {
			if want.DNS == nil {
				want.DNS = &libvirtxml.NetworkDNS{}
			}
			want.DNS.Host = append(want.DNS.Host, r.xml())
		}
	}
	inner, err := withSharedLabs(metadataOf(want), labs)
	if err != nil {
		return err
	}
	want.Metadata = &libvirtxml.NetworkMetadata{XML: inner}
	return nil
}
