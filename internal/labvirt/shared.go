package labvirt

// A libvirt network that several labs share (network.shared in the lab
// file): libvirt's "default", one lab's NAT network, or one of the user's.
// Each lab adds its entries to it, and removes only those:
//
//	ensureShared(ctx, l, SharedSpec) (done []string, err error)
//	sharedProblems(ctx, l, SharedSpec) ([]string, error)
//	removeShared(ctx, l, network, lab) (removed bool, err error)
//	sharedNetworks(ctx, l) ([]lab.SharedNetwork, error)
//
// A lab's entries are DHCP reservations (<ip><dhcp><host>) and DNS records
// (<dns><host>), added and removed with NetworkUpdate, live and to the
// persistent definition, so that the network's dnsmasq is never restarted
// (a restart unplugs every running guest's tap and every veth from the
// bridge: the other labs' nodes would drop off). The *.apps wildcard, a
// dnsmasq option, cannot be added that way; the plan names the usual
// routes one by one instead.
//
// Which entries are whose is in the network's <metadata>, under SharedNS:
//
//	<shared xmlns="http://bmlab.dev/xmlns/shared/1">
//	  <lab name="labb" block="10.198.97.100-10.198.97.120">
//	    <host mac="52:54:00:…" ip="10.198.97.100" name="labb-master-0"/>
//	    <dns ip="10.198.97.100"><hostname>labb-master-0</hostname>…</dns>
//	  </lab>
//	</shared>
//
// so that `labctl down --lab labb`, without the lab file, removes exactly
// them, and preflight sees every lab's addresses, MACs and names on the
// network before a new lab adds its own. libvirt 9.0 has no
// virNetworkSetMetadata: the metadata goes in by redefining the network's
// persistent definition as it is, metadata changed, which touches nothing
// that runs. Two labs changing one network's metadata at the same moment
// could lose one's list (read, change, write): labctl's callers hold a
// per-network lock on the host (Host.Ensure, lockShared), and check says
// when a lab's list is missing.
//
// The network's owner (a lab whose NAT network it is, or the user) keeps
// its own entries: the NAT network's drift check leaves out what the
// shared metadata lists (labnet.go), a redefinition keeps it, and the
// owner's down refuses to remove the network while other labs are on it.

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/netaddr"
)

// SharedNS is the XML namespace of the per-lab entries in a shared
// network's metadata.
const SharedNS = "http://bmlab.dev/xmlns/shared/1"

// ErrNetworkShared says a lab's network carries other labs' entries.
var ErrNetworkShared = errors.New("libvirt network carries other labs' entries")

// SharedSpec is a lab's part of a shared network, and what the lab expects
// of the network (its bridge and address).
type SharedSpec struct {
	Network string
	Bridge  string
	CIDR    netip.Prefix
	Entries SharedEntries
}

// SharedEntries is what one lab added to a shared network.
type SharedEntries struct {
	Lab string `xml:"name,attr"`
	// Block is the lab's own range of addresses ("start-end" in the
	// metadata; absent for none).
	Block   netaddr.Range  `xml:"block,attr"`
	Hosts   []SharedHost   `xml:"host"`
	Records []SharedRecord `xml:"dns"`
}

// SharedHost is a DHCP reservation.
type SharedHost struct {
	MAC  string `xml:"mac,attr"`
	IP   string `xml:"ip,attr"`
	Name string `xml:"name,attr"`
}

// SharedRecord is a DNS address record.
type SharedRecord struct {
	IP    string   `xml:"ip,attr"`
	Names []string `xml:"hostname"`
}

type sharedMeta struct {
	XMLName xml.Name        `xml:"http://bmlab.dev/xmlns/shared/1 shared"`
	Labs    []SharedEntries `xml:"lab"`
}

func (h SharedHost) xml() libvirtxml.NetworkDHCPHost {
	return libvirtxml.NetworkDHCPHost{MAC: strings.ToLower(h.MAC), IP: h.IP, Name: h.Name}
}

func (r SharedRecord) xml() libvirtxml.NetworkDNSHost {
	d := libvirtxml.NetworkDNSHost{IP: r.IP}
	for _, n := range r.Names {
		d.Hostnames = append(d.Hostnames, libvirtxml.NetworkDNSHostHostname{Hostname: n})
	}
	return d
}

// sharedLabs reads the shared element of a <metadata> fragment, and where
// it is (start, end: byte offsets; end 0 when there is none).
func sharedLabs(inner string) (labs []SharedEntries, start, end int, err error) {
	d := xml.NewDecoder(strings.NewReader(inner))
	for {
		off := int(d.InputOffset())
		tok, terr := d.Token()
		if terr != nil {
			return nil, 0, 0, nil // the end, or nothing we can read: no entries
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if se.Name.Space != SharedNS || se.Name.Local != "shared" {
			if err := d.Skip(); err != nil {
				return nil, 0, 0, nil
			}
			continue
		}
		var m sharedMeta
		if err := d.DecodeElement(&m, &se); err != nil {
			return nil, 0, 0, fmt.Errorf("the shared entries in the network's metadata: %w", err)
		}
		return m.Labs, off, int(d.InputOffset()), nil
	}
}

// withSharedLabs is the <metadata> fragment with its shared element
// replaced by labs (removed when labs is empty).
func withSharedLabs(inner string, labs []SharedEntries) (string, error) {
	_, start, end, err := sharedLabs(inner)
	if err != nil {
		return "", err
	}
	if end > 0 {
		inner = inner[:start] + inner[end:]
	}
	if len(labs) == 0 {
		return inner, nil
	}
	b, err := xml.Marshal(sharedMeta{Labs: labs})
	if err != nil {
		return "", err
	}
	return inner + string(b), nil
}

func metadataOf(n *libvirtxml.Network) string {
	if n == nil || n.Metadata == nil {
		return ""
	}
	return n.Metadata.XML
}

// sharedNetworks lists every libvirt network with its shared entries, as
// a lab that would join it sees it (lab.SharedNetwork; an address that
// does not parse stays invalid: it matches no lab's).
func sharedNetworks(ctx context.Context, l *libvirt.Libvirt) ([]lab.SharedNetwork, error) {
	nets, _, err := l.ConnectListAllNetworks(1, 0)
	if err != nil {
		return nil, fmt.Errorf("list libvirt networks: %w", err)
	}
	var out []lab.SharedNetwork
	for _, n := range nets {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		st, err := getLabNetState(ctx, l, n.Name)
		if err != nil {
			if isNetworkNotFound(errors.Unwrap(err)) || isNetworkNotFound(err) {
				continue
			}
			return nil, err
		}
		if !st.exists {
			continue
		}
		sn, err := viewShared(n.Name, st)
		if err != nil {
			return nil, err
		}
		if st.active {
			leases, _, err := l.NetworkGetDhcpLeases(st.net, nil, 1, 0)
			if err != nil && !isNetworkNotFound(err) {
				return nil, fmt.Errorf("libvirt network %q leases: %w", n.Name, err)
			}
			for _, le := range leases {
				h := SharedHost{IP: le.Ipaddr}
				if len(le.Mac) > 0 {
					h.MAC = strings.ToLower(le.Mac[0])
				}
				if len(le.Hostname) > 0 {
					h.Name = le.Hostname[0]
				}
				sn.Leases = append(sn.Leases, reservation(h))
			}
		}
		out = append(out, sn)
	}
	return out, nil
}

func viewShared(name string, st labNetState) (lab.SharedNetwork, error) {
	def := st.def
	sn := lab.SharedNetwork{Name: name, Owner: networkOwner(def), Active: st.active}
	if def.Bridge != nil {
		sn.Bridge = def.Bridge.Name
	}
	labs, _, _, err := sharedLabs(metadataOf(def))
	if err != nil {
		return sn, fmt.Errorf("libvirt network %q: %w", name, err)
	}
	listed := map[string]bool{}
	for _, e := range labs {
		sn.Labs = append(sn.Labs, labEntries(e))
		for _, h := range e.Hosts {
			listed["h"+dhcpHostKey(h.xml())] = true
		}
		for _, r := range e.Records {
			listed["d"+dnsHostKey(r.xml())] = true
		}
	}
	for _, ip := range def.IPs {
		if ip.Family != "" && ip.Family != "ipv4" {
			continue
		}
		if p, ok := ipPrefix(ip); ok {
			sn.CIDRs = append(sn.CIDRs, p)
		}
		if ip.DHCP == nil {
			continue
		}
		for _, r := range ip.DHCP.Ranges {
			if rg, ok := netaddr.ParseRange(r.Start + "-" + r.End); ok {
				sn.Ranges = append(sn.Ranges, rg)
			}
		}
		for _, h := range ip.DHCP.Hosts {
			if !listed["h"+dhcpHostKey(h)] {
				sn.Hosts = append(sn.Hosts, reservation(SharedHost{MAC: strings.ToLower(h.MAC), IP: h.IP, Name: h.Name}))
			}
		}
	}
	if def.DNS != nil {
		for _, h := range def.DNS.Host {
			if listed["d"+dnsHostKey(h)] {
				continue
			}
			r := SharedRecord{IP: h.IP}
			for _, n := range h.Hostnames {
				r.Names = append(r.Names, n.Hostname)
			}
			sn.Records = append(sn.Records, record(r))
		}
	}
	return sn, nil
}

func ipPrefix(ip libvirtxml.NetworkIP) (netip.Prefix, bool) {
	a, err := netip.ParseAddr(ip.Address)
	if err != nil {
		return netip.Prefix{}, false
	}
	bits := int(ip.Prefix)
	if bits == 0 && ip.Netmask != "" {
		if m, err := netip.ParseAddr(ip.Netmask); err == nil {
			bits = maskBits(m)
		}
	}
	p, err := a.Prefix(bits)
	return p, err == nil
}

// sharedPresence says which of a lab's entries a definition has, by key.
func sharedPresence(def *libvirtxml.Network) map[string]bool {
	have := map[string]bool{}
	if def == nil {
		return have
	}
	v := viewLabNetworkAll(def)
	for _, k := range v.DHCPHosts {
		have["h"+k] = true
	}
	for _, k := range v.DNSHosts {
		have["d"+k] = true
	}
	return have
}

// sharedNetworkProblems says why a network cannot take a lab's entries:
// missing, inactive, another bridge or address.
func sharedNetworkProblems(spec SharedSpec, st labNetState) []string {
	if !st.exists {
		return []string{"missing"}
	}
	var out []string
	if !st.active {
		out = append(out, "inactive")
	}
	if st.def.Bridge == nil || st.def.Bridge.Name != spec.Bridge {
		have := ""
		if st.def.Bridge != nil {
			have = st.def.Bridge.Name
		}
		out = append(out, fmt.Sprintf("bridge: the lab wants %s, the network has %s", spec.Bridge, orNetworkNone(have)))
	}
	found := false
	for _, ip := range st.def.IPs {
		if p, ok := ipPrefix(ip); ok && p.Masked() == spec.CIDR.Masked() && ip.DHCP != nil {
			found = true
		}
	}
	if !found {
		out = append(out, fmt.Sprintf("no address with DHCP in %s", spec.CIDR))
	}
	return out
}

// sharedProblems says how a shared network falls short of the lab's
// entries, in words; none means ensureShared would change nothing.
func sharedProblems(ctx context.Context, l *libvirt.Libvirt, spec SharedSpec) ([]string, error) {
	st, err := getLabNetState(ctx, l, spec.Network)
	if err != nil {
		return nil, err
	}
	if p := sharedNetworkProblems(spec, st); len(p) > 0 {
		return p, nil
	}
	return sharedEntryProblems(spec, st)
}

func sharedEntryProblems(spec SharedSpec, st labNetState) ([]string, error) {
	var out []string
	def, live := sharedPresence(st.def), sharedPresence(st.live)
	where := func(key string) string {
		switch {
		case !def[key] && !live[key]:
			return "missing"
		case !live[key]:
			return "missing from the running network"
		case !def[key]:
			return "missing from the persistent definition"
		}
		return ""
	}
	for _, h := range spec.Entries.Hosts {
		if w := where("h" + dhcpHostKey(h.xml())); w != "" {
			out = append(out, fmt.Sprintf("DHCP host %s %s %s: %s", h.Name, h.MAC, h.IP, w))
		}
	}
	for _, r := range spec.Entries.Records {
		if w := where("d" + dnsHostKey(r.xml())); w != "" {
			out = append(out, fmt.Sprintf("DNS host %s %s: %s", r.IP, strings.Join(r.Names, " "), w))
		}
	}
	labs, _, _, err := sharedLabs(metadataOf(st.def))
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(labs, func(e SharedEntries) bool { return e.Lab == spec.Entries.Lab })
	switch {
	case i < 0:
		out = append(out, "the lab's entries are not listed in the network's metadata (what down --lab reads)")
	case !sameEntries(labs[i], spec.Entries):
		out = append(out, "the network's metadata lists other entries for the lab than it has")
	}
	return out, nil
}

func sameEntries(a, b SharedEntries) bool {
	x, _ := xml.Marshal(a)
	y, _ := xml.Marshal(b)
	return string(x) == string(y)
}

// ensureShared adds the lab's entries the network lacks (live and
// persistent), removes the ones of the lab's earlier list it no longer
// wants, and records the list in the network's metadata. It never defines,
// starts or restarts the network: a missing or stopped network, or one on
// another bridge or address, is an error that says so.
func ensureShared(ctx context.Context, l *libvirt.Libvirt, spec SharedSpec) ([]string, error) {
	st, err := getLabNetState(ctx, l, spec.Network)
	if err != nil {
		return nil, err
	}
	if p := sharedNetworkProblems(spec, st); len(p) > 0 {
		return nil, fmt.Errorf("shared libvirt network %q: %s; the lab adds entries to it and never makes or starts it (network.shared, network.libvirtBridge and cluster.machineNetwork must describe it)", spec.Network, strings.Join(p, "; "))
	}
	problems, err := sharedEntryProblems(spec, st)
	if err != nil || len(problems) == 0 {
		return nil, err
	}
	var done []string
	labs, _, _, err := sharedLabs(metadataOf(st.def))
	if err != nil {
		return nil, err
	}
	// What the lab's earlier list has and the spec no longer wants goes.
	if i := slices.IndexFunc(labs, func(e SharedEntries) bool { return e.Lab == spec.Entries.Lab }); i >= 0 {
		stale := minusEntries(labs[i], spec.Entries)
		if err := sharedUpdate(l, st, stale, libvirt.NetworkUpdateCommandDelete, false); err != nil {
			return done, err
		}
		if n := len(stale.Hosts) + len(stale.Records); n > 0 {
			done = append(done, fmt.Sprintf("libvirt network %s: removed %d entries the lab no longer has", spec.Network, n))
		}
		if st, err = getLabNetState(ctx, l, spec.Network); err != nil {
			return done, err
		}
	}
	if err := sharedUpdate(l, st, spec.Entries, libvirt.NetworkUpdateCommandAddLast, true); err != nil {
		return done, err
	}
	if st, err = getLabNetState(ctx, l, spec.Network); err != nil {
		return done, err
	}
	if err := setSharedLabs(l, st, spec.Entries.Lab, &spec.Entries); err != nil {
		return done, err
	}
	done = append(done, fmt.Sprintf("libvirt network %s (shared): %d DHCP reservations and %d DNS records of the lab, listed in its metadata", spec.Network, len(spec.Entries.Hosts), len(spec.Entries.Records)))
	if st, err = getLabNetState(ctx, l, spec.Network); err != nil {
		return done, err
	}
	if p, err := sharedEntryProblems(spec, st); err != nil || len(p) > 0 {
		return done, errors.Join(err, fmt.Errorf("shared libvirt network %q read back: %s", spec.Network, strings.Join(p, "; ")))
	}
	return done, nil
}

// minusEntries is what a has and b does not.
func minusEntries(a, b SharedEntries) SharedEntries {
	out := SharedEntries{Lab: a.Lab}
	for _, h := range a.Hosts {
		if !slices.ContainsFunc(b.Hosts, func(x SharedHost) bool { return dhcpHostKey(x.xml()) == dhcpHostKey(h.xml()) }) {
			out.Hosts = append(out.Hosts, h)
		}
	}
	for _, r := range a.Records {
		if !slices.ContainsFunc(b.Records, func(x SharedRecord) bool { return dnsHostKey(x.xml()) == dnsHostKey(r.xml()) }) {
			out.Records = append(out.Records, r)
		}
	}
	return out
}

// sharedUpdate adds (add true: where missing) or deletes (where present)
// each entry, in the running network and the persistent definition.
func sharedUpdate(l *libvirt.Libvirt, st labNetState, e SharedEntries, cmd libvirt.NetworkUpdateCommand, add bool) error {
	def, live := sharedPresence(st.def), sharedPresence(st.live)
	type item struct {
		key, what string
		section   libvirt.NetworkUpdateSection
		elem      any
	}
	var items []item
	for _, h := range e.Hosts {
		items = append(items, item{"h" + dhcpHostKey(h.xml()), "DHCP host " + h.Name, libvirt.NetworkSectionIPDhcpHost, h.xml()})
	}
	for _, r := range e.Records {
		items = append(items, item{"d" + dnsHostKey(r.xml()), "DNS host " + r.IP, libvirt.NetworkSectionDNSHost, r.xml()})
	}
	verb := "delete"
	if add {
		verb = "add"
	}
	for _, it := range items {
		var flags libvirt.NetworkUpdateFlags
		if def[it.key] != add {
			flags |= libvirt.NetworkUpdateAffectConfig
		}
		if st.active && live[it.key] != add {
			flags |= libvirt.NetworkUpdateAffectLive
		}
		if flags == 0 {
			continue
		}
		x, err := xml.Marshal(it.elem)
		if err != nil {
			return err
		}
		if err := l.NetworkUpdateCompat(st.net, cmd, it.section, -1, string(x), flags); err != nil {
			return fmt.Errorf("%s %s in libvirt network %q: %w", verb, it.what, st.net.Name, err)
		}
	}
	return nil
}

// setSharedLabs sets (e non-nil) or removes (nil) lab's list in the
// network's metadata, by redefining its persistent definition as it is.
func setSharedLabs(l *libvirt.Libvirt, st labNetState, lab string, e *SharedEntries) error {
	labs, _, _, err := sharedLabs(metadataOf(st.def))
	if err != nil {
		return err
	}
	labs = slices.DeleteFunc(labs, func(x SharedEntries) bool { return x.Lab == lab })
	if e != nil {
		labs = append(labs, *e)
	}
	inner, err := withSharedLabs(metadataOf(st.def), labs)
	if err != nil {
		return err
	}
	if inner == metadataOf(st.def) {
		return nil
	}
	def := *st.def
	def.Metadata = &libvirtxml.NetworkMetadata{XML: inner}
	if strings.TrimSpace(inner) == "" {
		def.Metadata = nil
	}
	x, err := def.Marshal()
	if err != nil {
		return err
	}
	if _, err := l.NetworkDefineXML(x); err != nil {
		return fmt.Errorf("record the lab's entries in libvirt network %q's metadata: %w", st.net.Name, err)
	}
	return nil
}

// removeShared removes what the network's metadata lists as lab's, live
// and persistent, then the list. A missing network or list is no error.
func removeShared(ctx context.Context, l *libvirt.Libvirt, network, lab string) (bool, error) {
	st, err := getLabNetState(ctx, l, network)
	if err != nil || !st.exists {
		return false, err
	}
	labs, _, _, err := sharedLabs(metadataOf(st.def))
	if err != nil {
		return false, err
	}
	i := slices.IndexFunc(labs, func(e SharedEntries) bool { return e.Lab == lab })
	if i < 0 {
		return false, nil
	}
	if err := sharedUpdate(l, st, labs[i], libvirt.NetworkUpdateCommandDelete, false); err != nil {
		return false, err
	}
	if st, err = getLabNetState(ctx, l, network); err != nil {
		return false, err
	}
	if err := setSharedLabs(l, st, lab, nil); err != nil {
		return false, err
	}
	return true, nil
}

// sharedOthers are the labs other than the owner that have entries in a
// network's definition.
func sharedOthers(def *libvirtxml.Network, owner string) []string {
	labs, _, _, _ := sharedLabs(metadataOf(def))
	var out []string
	for _, e := range labs {
		if e.Lab != owner {
			out = append(out, e.Lab)
		}
	}
	return out
}
