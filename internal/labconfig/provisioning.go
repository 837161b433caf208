package labconfig

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/bmlab/bmlab/internal/netaddr"
	"github.com/bmlab/bmlab/internal/ocp"
)

// The provisioning network's addresses, as the installer defaults them
// (openshift/installer pkg/types/baremetal/defaults/platform.go,
// SetPlatformDefaults): the bootstrap's provisioning IP is the CIDR's 2nd
// host, the cluster's its 3rd, and a Managed network's DHCP range runs
// from its 10th host to its last but one. With Disabled, dev-scripts
// takes the provisioning IPs from the external (machine) network: its
// 7th and 8th hosts (openshift-metal3/dev-scripts network.sh,
// BOOTSTRAP_PROVISIONING_IP and CLUSTER_PROVISIONING_IP).
const (
	bootstrapProvisioningHost = 2
	clusterProvisioningHost   = 3
	provisioningDHCPFirstHost = 10
	// DisabledBootstrapHost and DisabledClusterHost are the hosts of the
	// machine network that take the provisioning IPs with Disabled.
	DisabledBootstrapHost = 7
	DisabledClusterHost   = 8
)

// NthHost is the n-th address of p after its network address (p's .n in
// IPv4); invalid when p is too small.
func NthHost(p netip.Prefix, n int) netip.Addr {
	a := p.Masked().Addr()
	for range n {
		a = a.Next()
	}
	if !p.Contains(a) {
		return netip.Addr{}
	}
	return a
}

// lastHost is p's last address a host may have: the one before IPv4's
// broadcast address, IPv6's last.
func lastHost(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As16()
	bits := p.Bits()
	if p.Addr().Is4() {
		bits += 96
	}
	for i := bits; i < 128; i++ {
		a[i/8] |= 1 << (7 - i%8)
	}
	last := netip.AddrFrom16(a)
	if p.Addr().Is4() {
		last = last.Unmap().Prev()
	}
	return last
}

// DefaultProvisioningDHCPRange is the installer's default DHCP range of a
// provisioning network: its 10th host to the one before its last.
func DefaultProvisioningDHCPRange(p netip.Prefix) netaddr.Range {
	start, end := NthHost(p, provisioningDHCPFirstHost), lastHost(p).Prev()
	if !start.IsValid() || !p.Contains(end) || end.Less(start) {
		return netaddr.Range{}
	}
	return netaddr.Range{Start: start, End: end}
}

// setProvisioningDefaults fills in a provisioning network's addresses, as
// the installer would, unless the lab file gives them. With Disabled the
// provisioning IPs come from the machine network, which only the IPI
// mode uses; the plan defaults them there.
func (c *Config) setProvisioningDefaults() {
	k := &c.Cluster
	p := k.ProvisioningNetworkCIDR
	if c.Network.ProvisioningNetwork == ocp.ProvisioningDisabled || !p.IsValid() {
		return
	}
	if !k.ProvisioningDHCPRange.Start.IsValid() && !k.ProvisioningDHCPRange.End.IsValid() {
		k.ProvisioningDHCPRange = DefaultProvisioningDHCPRange(p)
	}
	if !k.BootstrapProvisioningIP.IsValid() {
		k.BootstrapProvisioningIP = NthHost(p, bootstrapProvisioningHost)
	}
	if !k.ClusterProvisioningIP.IsValid() {
		k.ClusterProvisioningIP = NthHost(p, clusterProvisioningHost)
	}
}

// validateProvisioning checks the provisioning network's addresses with
// the installer's rules (openshift/installer
// pkg/types/baremetal/validation/platform.go: ValidateProvisioning and
// validateDHCPRange), worded for the lab file, and the lab's own: the
// lab host takes the provisioning network's first address (as
// dev-scripts' provisioning host does), and with Disabled the
// provisioning IPs are free addresses of the machine network (outside
// its DHCP range, not a VIP, not the lab host's).
func (c *Config) validateProvisioning() []error {
	k := &c.Cluster
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf("cluster."+format, a...)) }
	r := k.ProvisioningDHCPRange
	ips := []struct {
		field string
		ip    netip.Addr
	}{{"bootstrapProvisioningIP", k.BootstrapProvisioningIP}, {"clusterProvisioningIP", k.ClusterProvisioningIP}}
	if k.BootstrapProvisioningIP.IsValid() && k.BootstrapProvisioningIP == k.ClusterProvisioningIP {
		add("clusterProvisioningIP: %s is the bootstrapProvisioningIP too; the bootstrap's and the cluster's provisioning services need an address each", k.ClusterProvisioningIP)
	}
	if c.Network.ProvisioningNetwork == ocp.ProvisioningDisabled {
		if r.Start.IsValid() || r.End.IsValid() {
			add("provisioningDHCPRange: %s is set but network.provisioningNetwork is Disabled, which has no provisioning network to hand addresses out on; drop it, or set provisioningNetwork: Managed", r)
		}
		mn, host := k.MachineNetwork, k.MachineNetwork.Masked().Addr().Next()
		for _, f := range ips {
			switch ip := f.ip; {
			case !ip.IsValid():
			case !mn.Contains(ip):
				add("%s: %s is outside machineNetwork %s; with network.provisioningNetwork Disabled the provisioning services run on the machine network (the installer's rule), so pick a free address there, outside dhcpRange", f.field, ip, mn)
			case k.DHCPRange.Contains(ip):
				add("%s: %s is inside dhcpRange %s, where DHCP may lease it to a node; pick one outside the range", f.field, ip, k.DHCPRange)
			case ip == k.APIVIP || ip == k.IngressVIP:
				add("%s: %s is a VIP; pick another free address of machineNetwork", f.field, ip)
			case ip == host:
				add("%s: %s is the lab host's own address on machineNetwork (its first); pick another", f.field, ip)
			}
		}
		return errs
	}
	p := k.ProvisioningNetworkCIDR
	if !p.IsValid() {
		return errs
	}
	if r.Start.IsValid() != r.End.IsValid() {
		add("provisioningDHCPRange: set both start and end")
	} else if r.Start.IsValid() {
		switch {
		case r.End.Less(r.Start):
			add("provisioningDHCPRange: end %s is before start %s", r.End, r.Start)
		case !p.Contains(r.Start) || !p.Contains(r.End):
			add("provisioningDHCPRange: %s is not inside provisioningNetworkCIDR %s (the installer's rule: every address of the range is in the provisioning network); write a range inside it, such as %s", r, p, DefaultProvisioningDHCPRange(p))
		case r.Contains(p.Masked().Addr().Next()):
			add("provisioningDHCPRange: %s holds %s, the lab host's address on the provisioning network; start the range after it", r, p.Masked().Addr().Next())
		}
	}
	for _, f := range ips {
		switch ip := f.ip; {
		case !ip.IsValid():
		case !p.Contains(ip):
			add("%s: %s is not in provisioningNetworkCIDR %s (the installer's rule); pick a free address inside it, outside provisioningDHCPRange", f.field, ip, p)
		case r.Contains(ip):
			add("%s: %s is inside provisioningDHCPRange %s (the installer's rule: it overlaps with the allocated DHCP range); pick one outside the range", f.field, ip, r)
		case ip == p.Masked().Addr().Next():
			add("%s: %s is the lab host's own address on the provisioning network (its first, as dev-scripts' provisioning host has); pick another", f.field, ip)
		}
	}
	return errs
}

// validateBMCRoutes checks cluster.bmc.routes: names of the lab's
// networks, the machine network among them, only with a BMC network.
func (c *Config) validateBMCRoutes() []error {
	b := c.Cluster.BMC
	if len(b.Routes) == 0 {
		return nil
	}
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf("cluster.bmc.routes: "+format, a...)) }
	if !b.Network.IsValid() {
		return append(errs, fmt.Errorf("cluster.bmc.routes: %v is set but there is no BMC network (cluster.bmc.network); set one, or drop the routes", b.Routes))
	}
	seen := map[string]bool{}
	for i, r := range b.Routes {
		switch {
		case seen[r]:
			add("[%d] %q is listed twice", i, r)
		case r == RouteProvisioning && c.Network.ProvisioningNetwork == ocp.ProvisioningDisabled:
			add("[%d] %q: the lab has no provisioning network (network.provisioningNetwork is Disabled); drop it, or set provisioningNetwork: Managed", i, r)
		case r != RouteMachine && r != RouteProvisioning:
			add("[%d] %q is not one of %s, %s (the lab's networks a BMC network can be routed to)", i, r, RouteMachine, RouteProvisioning)
		}
		seen[r] = true
	}
	if !slices.Contains(b.Routes, RouteMachine) {
		add("%v leaves out %s: the installer's Ironic, and the nodes, reach the BMCs from the machine network, and the BMCs answer them there; list %s", b.Routes, RouteMachine, RouteMachine)
	}
	return errs
}
