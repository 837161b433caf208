package labconfig

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
)

// Host is one libvirt host of a lab spread over several. The first host
// listed is the hub: it runs vbmcd and the installer, holds the lab's NAT
// network, and every other host's bridges are joined to its bridges by
// VXLAN over the underlay (a star: a full mesh of bridges would be a loop).
type Host struct {
	// Name names the host in node placements, link names and vbmcd's
	// --libvirt-uri NAME=URI; 1 to 11 lower-case letters, digits, dashes.
	Name string `json:"name"`
	// LibvirtURI is how labctl and vbmcd on the hub reach the host's
	// libvirtd (qemu+tls://, qemu+ssh://, qemu+tcp://; qemu:///system for
	// the hub itself).
	LibvirtURI string `json:"libvirtURI"`
	// Underlay is the host's address on the network that carries the VXLAN
	// traffic (UDP 4789) between the hosts.
	Underlay netip.Addr `json:"underlay"`
	// Exec is the argv prefix that runs a command on the host, such as
	// ["ssh", "root@beta"]: labctl on the hub runs its own host-local work
	// there (links, storage pool directory, volumes, domains, serial logs)
	// as `<exec> <labctl> up|down|net ... --host NAME -f -`. Without it,
	// that work is the user's: labctl says what to run on the host.
	Exec []string `json:"exec,omitempty"`
	// Labctl is the labctl program on the host (default: labctl, on the
	// PATH of the command Exec runs).
	Labctl string `json:"labctl,omitempty"`
}

var hostName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,9}[a-z0-9])?$`)

// validateHosts checks hosts: and the nodes' placement.
func (c *Config) validateHosts() []error {
	var errs []error
	seen := map[string]bool{}
	addrs := map[netip.Addr]bool{}
	for i, h := range c.Hosts {
		if !hostName.MatchString(h.Name) {
			errs = append(errs, fmt.Errorf("hosts[%d].name: %q must be 1 to 11 lower-case letters, digits and inner dashes (it goes into link names)", i, h.Name))
		}
		if seen[h.Name] {
			errs = append(errs, fmt.Errorf("hosts[%d].name: %q is listed twice", i, h.Name))
		}
		seen[h.Name] = true
		if h.LibvirtURI == "" {
			errs = append(errs, fmt.Errorf("hosts[%d].libvirtURI: must be set", i))
		}
		if len(c.Hosts) > 1 && !h.Underlay.IsValid() {
			errs = append(errs, fmt.Errorf("hosts[%d].underlay: the address VXLAN reaches %s at must be set", i, h.Name))
		}
		if h.Underlay.IsValid() && addrs[h.Underlay] {
			errs = append(errs, fmt.Errorf("hosts[%d].underlay: %s is another host's too", i, h.Underlay))
		}
		addrs[h.Underlay] = true
		if i == 0 && (len(h.Exec) > 0 || h.Labctl != "") {
			errs = append(errs, fmt.Errorf("hosts[0]: %s is the hub, where labctl runs; exec and labctl are for the other hosts", h.Name))
		}
		if len(h.Exec) > 0 && h.Exec[0] == "" {
			errs = append(errs, fmt.Errorf("hosts[%d].exec: the first word is a program (such as ssh), not empty", i))
		}
	}
	for _, r := range []struct {
		field string
		role  Role
	}{{"masters", c.Cluster.Masters}, {"workers", c.Cluster.Workers}} {
		if len(r.role.Placement) > 0 && len(r.role.Placement) != r.role.N() {
			errs = append(errs, fmt.Errorf("cluster.%s.placement: %d hosts for %d nodes; name one host per node or none (spread round-robin)", r.field, len(r.role.Placement), r.role.N()))
		}
		for j, h := range r.role.Placement {
			if !slices.ContainsFunc(c.Hosts, func(x Host) bool { return x.Name == h }) {
				errs = append(errs, fmt.Errorf("cluster.%s.placement[%d]: %q is not in hosts", r.field, j, h))
			}
		}
	}
	return errs
}
