package steps

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/netaddr"
	"github.com/bmlab/bmlab/internal/plan"
)

// Preflight checks the whole lab before anything is made: that the host can
// carry the plan (memory, CPUs, disk, qemu's access to the lab's
// directory), every rule of the installer files the run will write, and
// that no object the plan names belongs to someone else. A mode asks for
// its own rules through the hooks; each is optional.
type Preflight struct {
	// Check applies the mode's rules on the lab file that no installer
	// file shows, first.
	Check func(e *lab.Env) error
	// Inputs builds the mode's installer files from the plan and applies
	// the installer's rules to them: an ipi.ErrorList is worded with the
	// lab file's fields (CheckInputs).
	Inputs func(e *lab.Env) error
	// Clashes are what the mode cannot share with other labs on the host,
	// each a line worded for the lab file; they join the common ones.
	Clashes func(ctx context.Context, e *lab.Env) ([]string, error)
	// Strict refuses a lab that joins another libvirt network's bridge
	// without sharing it (its nodes get no reservation and no DNS record
	// there): the mode assumes the planned addresses. Other modes are told.
	Strict bool
}

func (Preflight) Name() string { return "preflight" }

func (pf Preflight) Ensure(ctx context.Context, e *lab.Env) (bool, error) {
	p := e.Plan
	if pf.Check != nil {
		if err := pf.Check(e); err != nil {
			return false, err
		}
	}
	if err := CheckInputs(e, pf.Inputs); err != nil {
		return false, err
	}
	// What the platform would refuse in a node (an architecture's
	// firmware missing), before any object exists.
	var archs []string
	for _, n := range p.Nodes {
		if err := e.Host.Validate(MachineOf(p, n)); err != nil {
			return false, fmt.Errorf("node %s would be refused; nothing was created:\n  %w (cluster.masters.arch, cluster.workers.arch)", n.Name, err)
		}
		if !slices.Contains(archs, n.Arch) {
			archs = append(archs, n.Arch)
		}
	}
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		return false, fmt.Errorf("lab directory: %w", err)
	}
	info, err := e.Host.Info(ctx, p.Dir)
	if err != nil {
		return false, fmt.Errorf("the lab's host: %w", err)
	}
	if !info.KVM {
		e.Rep.Note("preflight", "no /dev/kvm: the VMs run under TCG (software emulation), much slower than KVM")
	}
	if slices.Contains(archs, plan.ArchAArch64) && info.Arch != "arm64" {
		e.Rep.Note("preflight", "aarch64 nodes on this "+info.Arch+" host: qemu-system-aarch64 emulates them under TCG, many times slower than an x86_64 node (docs/performance.md)")
	}
	var mem, cpus, disk uint
	for _, n := range p.Nodes {
		mem += n.MemoryMiB
		cpus += n.VCPUs
		for _, d := range n.Disks {
			disk += d.SizeGiB
		}
	}
	if total := info.MemoryMiB; total > 0 {
		ratio := float64(mem) / float64(total)
		msg := fmt.Sprintf("memory: %d MiB planned of %d MiB (%.0f%%)", mem, total, 100*ratio)
		if ratio > 1 {
			msg += fmt.Sprintf(": overcommitted %.1fx; VMs that touch it all will swap or be killed", ratio)
		}
		e.Rep.Note("preflight", msg)
	}
	if n := uint(info.CPUs); n > 0 && cpus > n {
		e.Rep.Note("preflight", fmt.Sprintf("CPU: %d vCPUs planned on %d host CPUs (overcommitted %.1fx)", cpus, n, float64(cpus)/float64(n)))
	}
	if info.FreeKnown {
		free := info.FreeGiB
		e.Rep.Note("preflight", fmt.Sprintf("disk: %d GiB of thin disks planned, %d GiB free in %s (thin: space is used as the VMs write)", disk, free, p.Dir))
		if free < 1 {
			return false, fmt.Errorf("less than 1 GiB free in %s", p.Dir)
		}
	}
	if info.Unreachable != nil {
		return false, info.Unreachable
	}
	return false, pf.Clash(ctx, e)
}

func (Preflight) Delete(context.Context, *lab.Env) error { return nil }

// CreatesNothing implements lab.NothingToDelete.
func (Preflight) CreatesNothing() {}

// clash is an object the plan names that is not the lab's, and the lab
// file setting that gives the lab another one.
type clash struct {
	kind    lab.Kind
	name    string
	owner   string
	setting string
}

// Clashes is Preflight{}.Clash: the clashes every mode checks.
func Clashes(ctx context.Context, e *lab.Env) error { return Preflight{}.Clash(ctx, e) }

// Clash lists every object the plan would create that exists and bears
// another mark (or none), a machine network that overlaps another libvirt
// network's, and the mode's own clashes; one error names them all, with
// the settings that avoid them. Nothing has been created when it fails.
func (pf Preflight) Clash(ctx context.Context, e *lab.Env) error {
	p := e.Plan
	var found []clash
	check := func(kind lab.Kind, name, setting string) error {
		ok, owner, err := e.Host.Owner(ctx, kind, name)
		if err != nil {
			return err
		}
		if ok && owner != p.Lab {
			found = append(found, clash{kind, name, owner, setting})
		}
		return nil
	}
	var err error
	for _, n := range p.Nodes {
		err = firstErr(err, check(lab.KindDomain, n.Name, "name (the nodes are named <name>-<role>-N)"))
	}
	for _, b := range p.Network.Topology.Bridges {
		err = firstErr(err, check(lab.KindLink, b.Name, "network.bridges[].name"))
	}
	for _, v := range p.Network.Topology.Veths {
		err = firstErr(err, check(lab.KindLink, v.Name, "network.veths[].name"))
		err = firstErr(err, check(lab.KindLink, v.Peer, "network.veths[].peer"))
	}
	for _, name := range p.Network.BridgeNetworks {
		err = firstErr(err, check(lab.KindNetwork, name, "network.bridges[].name (each gets a libvirt network of its name)"))
	}
	if nat := p.Network.NAT; nat != nil {
		err = firstErr(err, check(lab.KindNetwork, nat.Name, "name"))
		// libvirt makes the NAT bridge (no alias): it is the lab's when the
		// lab's NAT network is there, and a clash when it is there alone.
		if nfound, owner, nerr := e.Host.Owner(ctx, lab.KindNetwork, nat.Name); nerr != nil {
			err = firstErr(err, nerr)
		} else if !nfound || owner != p.Lab {
			if bfound, _, berr := e.Host.Owner(ctx, lab.KindLink, nat.Bridge); berr != nil {
				err = firstErr(err, berr)
			} else if bfound {
				found = append(found, clash{lab.KindLink, nat.Bridge, "", "name (the NAT bridge is bmnat-<name>)"})
			}
		}
	}
	err = firstErr(err, check(lab.KindPool, p.Storage.Pool, "name"))
	if err != nil {
		return err
	}
	var msgs []string
	for _, c := range found {
		whose := "has no lab's mark"
		if c.owner != "" {
			whose = fmt.Sprintf("belongs to lab %q", c.owner)
		}
		msgs = append(msgs, fmt.Sprintf("%s %s %s: give this lab its own (%s)", c.kind, c.name, whose, c.setting))
	}
	if nat := p.Network.NAT; nat != nil {
		sv, err := e.Host.Survey(ctx, lab.KindNetwork)
		if err != nil {
			return err
		}
		cidrs := sv.Addresses
		families := []struct {
			cidr netip.Prefix
			fix  string
		}{{nat.MachineNetwork, "cluster.machineNetwork, with dhcpRange, apiVIP, ingressVIP and bmc.address"}}
		if f := nat.Secondary; !f.IsZero() {
			families = append(families, struct {
				cidr netip.Prefix
				fix  string
			}{f.MachineNetwork, "cluster.machineNetworkV6, with dhcpRangeV6, apiVIPV6 and ingressVIPV6"})
		}
		for name, list := range cidrs {
			if name == nat.Name {
				continue
			}
			for _, c := range list {
				for _, f := range families {
					if c.Overlaps(f.cidr) {
						msgs = append(msgs, fmt.Sprintf("libvirt network %s has %s, which overlaps the machine network %s: give this lab another (%s)", name, c, f.cidr, f.fix))
					}
				}
			}
		}
	}
	if d := resolverDropIn(p); d != nil {
		if _, foreign, err := d.State(); err != nil {
			return err
		} else if foreign {
			msgs = append(msgs, fmt.Sprintf("file %s has no lab's mark (its first line): move it away, or give this lab another place (network.hostResolverDir) or none (network.hostResolver: hosts)", d.Path))
		}
	}
	if p.Network.Shared != nil {
		m, err := sharedClashes(ctx, e)
		if err != nil {
			return err
		}
		msgs = append(msgs, m...)
	}
	if p.Network.NAT == nil && p.Network.Shared == nil {
		m, err := borrowedNetwork(ctx, e, pf.Strict)
		if err != nil {
			return err
		}
		msgs = append(msgs, m...)
	}
	if pf.Clashes != nil {
		m, err := pf.Clashes(ctx, e)
		if err != nil {
			return err
		}
		msgs = append(msgs, m...)
	}
	if len(msgs) == 0 {
		return nil
	}
	return fmt.Errorf("lab %q would clash with what is on this host; nothing was created:\n  %s", p.Lab, strings.Join(msgs, "\n  "))
}

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// sharedClashes: a lab joining a shared network finds it as the lab file
// says (there, running, with DHCP, on the lab's bridge, with the machine
// network), and no address, MAC or name of its own is another lab's on it,
// or the network's own: each lab's addresses are a block of their own
// (cluster.dhcpRange), its VIPs outside every other lab's.
func sharedClashes(ctx context.Context, e *lab.Env) ([]string, error) {
	p := e.Plan
	sh := p.Network.Shared
	sv, err := e.Host.Survey(ctx, lab.KindNetwork)
	if err != nil {
		return nil, err
	}
	nets := sv.Networks
	i := slices.IndexFunc(nets, func(n lab.SharedNetwork) bool { return n.Name == sh.Network })
	if i < 0 {
		var names []string
		for _, n := range nets {
			names = append(names, n.Name)
		}
		return []string{fmt.Sprintf("network.shared: libvirt network %q does not exist, and a lab never makes a network it shares; define and start it, or name one there is (%s)", sh.Network, strings.Join(names, ", "))}, nil
	}
	n := nets[i]
	var msgs []string
	if !n.Active {
		msgs = append(msgs, fmt.Sprintf("network.shared: libvirt network %q is not running, and a lab never starts a network it shares; start it (virsh net-start %s)", n.Name, n.Name))
	}
	if n.Bridge != sh.Bridge {
		msgs = append(msgs, fmt.Sprintf("network.libvirtBridge: %q, but the shared network %q is on bridge %q; write libvirtBridge: %s", sh.Bridge, n.Name, n.Bridge, n.Bridge))
	}
	if !slices.ContainsFunc(n.CIDRs, func(c netip.Prefix) bool { return c.Masked() == sh.CIDR.Masked() }) {
		msgs = append(msgs, fmt.Sprintf("cluster.machineNetwork: %s, but the shared network %q has %v; write its network as machineNetwork, with dhcpRange, apiVIP, ingressVIP and bmc.address inside it", sh.CIDR, n.Name, n.CIDRs))
	} else if len(n.Ranges) == 0 {
		msgs = append(msgs, fmt.Sprintf("network.shared: libvirt network %q serves no DHCP, so the lab's nodes would get no address; give it a DHCP range (virsh net-edit %s), or share another", n.Name, n.Name))
	}
	// What this lab would add, by address, MAC and name, with the setting
	// that gives each.
	ipField := map[string]string{}
	for _, r := range sh.Reservations {
		ipField[r.IP.String()] = "cluster.dhcpRange (the nodes' addresses)"
	}
	if sh.APIVIP.IsValid() {
		ipField[sh.APIVIP.String()] = "cluster.apiVIP"
	}
	if sh.IngressVIP.IsValid() {
		ipField[sh.IngressVIP.String()] = "cluster.ingressVIP"
	}
	for _, f := range []struct {
		ip    netip.Addr
		field string
	}{{p.Cluster.BootstrapProvisioningIP, "cluster.bootstrapProvisioningIP"}, {p.Cluster.ClusterProvisioningIP, "cluster.clusterProvisioningIP"}} {
		if f.ip.IsValid() && sh.CIDR.Contains(f.ip) {
			ipField[f.ip.String()] = f.field
		}
	}
	macs := map[string]string{}
	for _, r := range sh.Reservations {
		macs[strings.ToLower(r.MAC)] = r.Name
	}
	names := map[string]bool{}
	for _, r := range sh.Records {
		for _, nm := range r.Names {
			names[strings.ToLower(nm)] = true
		}
	}
	own := sh.Block()
	against := func(who string, hosts []plan.Reservation, records []plan.Record, blk netaddr.Range) {
		seen := map[string]bool{}
		add := func(m string) {
			if !seen[m] {
				seen[m] = true
				msgs = append(msgs, m)
			}
		}
		if blk.Start.IsValid() && blk.End.IsValid() {
			if own.Overlaps(blk) {
				add(fmt.Sprintf("cluster.dhcpRange: %s overlaps %s's addresses %s on the shared network %s; give this lab a range of its own", own, who, blk, sh.Network))
			}
			for _, f := range []struct {
				ip    netip.Addr
				field string
			}{{sh.APIVIP, "cluster.apiVIP"}, {sh.IngressVIP, "cluster.ingressVIP"}} {
				if f.ip.IsValid() && blk.Contains(f.ip) {
					add(fmt.Sprintf("%s: %s is inside %s's addresses %s on the shared network %s; pick an address no lab on it uses", f.field, f.ip, who, blk, sh.Network))
				}
			}
		}
		for _, h := range hosts {
			if f, ok := ipField[h.IP.String()]; ok {
				add(fmt.Sprintf("%s: %s is %s's (%s) on the shared network %s; pick an address no lab on it uses", f, h.IP, who, h.Name, sh.Network))
			} else if h.IP.IsValid() && own.Contains(h.IP) {
				add(fmt.Sprintf("cluster.dhcpRange: %s holds %s, %s's (%s) on the shared network %s; give this lab a range of its own", own, h.IP, who, h.Name, sh.Network))
			}
			if node, ok := macs[strings.ToLower(h.MAC)]; ok {
				add(fmt.Sprintf("name: node %s's MAC %s is %s's (%s) on the shared network %s; give this lab another name (MACs derive from it)", node, h.MAC, who, h.Name, sh.Network))
			}
		}
		for _, r := range records {
			if f, ok := ipField[r.IP.String()]; ok {
				add(fmt.Sprintf("%s: %s has a DNS record of %s (%s) on the shared network %s; pick an address no lab on it uses", f, r.IP, who, strings.Join(r.Names, " "), sh.Network))
			}
			for _, nm := range r.Names {
				if names[strings.ToLower(nm)] {
					add(fmt.Sprintf("cluster.clusterName: %s is already a name of %s on the shared network %s; give this cluster another clusterName or baseDomain (or the lab another name)", nm, who, sh.Network))
				}
			}
		}
	}
	for _, l := range n.Labs {
		if l.Lab != p.Lab {
			against(fmt.Sprintf("lab %q", l.Lab), l.Hosts, l.Records, l.Block)
		}
	}
	// A machine holding one of the lab's addresses by a lease (the
	// dynamic range of libvirt's default covers its whole subnet).
	mine := map[string]string{}
	for _, r := range sh.Reservations {
		mine[r.IP.String()] = strings.ToLower(r.MAC)
	}
	for _, le := range n.Leases {
		if f, ok := ipField[le.IP.String()]; ok && le.MAC != mine[le.IP.String()] {
			msgs = append(msgs, fmt.Sprintf("%s: %s is leased to %s (%s) on the shared network %s; pick an address nothing holds (virsh net-dhcp-leases %s)", f, le.IP, le.MAC, orNone(le.Name), sh.Network, sh.Network))
		}
	}
	who := "the network"
	if n.Owner != "" && n.Owner != p.Lab {
		who = fmt.Sprintf("lab %q (the network's owner)", n.Owner)
	}
	if n.Owner != p.Lab {
		// A lab's NAT network hands out its range to its own nodes (and
		// workers added later): the range is that lab's block.
		var blk netaddr.Range
		if n.Owner != "" && len(n.Ranges) > 0 {
			blk = n.Ranges[0]
		}
		against(who, n.Hosts, n.Records, blk)
	}
	return msgs, nil
}

// borrowedNetwork: a lab that joins the bridge of a libvirt network with
// DHCP on its machine network, without sharing it (network.shared), gets
// no reservation and no DNS record there: its nodes take whatever lease
// comes. A strict mode (the hybrid mode's ignition assumes the planned
// addresses: keepalived's unicast peers, coredns's hosts) stops; the other
// modes are told.
func borrowedNetwork(ctx context.Context, e *lab.Env, strict bool) ([]string, error) {
	p := e.Plan
	own := map[string]bool{}
	for _, b := range p.Network.Topology.Bridges {
		own[b.Name] = true
	}
	peers := map[string]bool{}
	for _, v := range p.Network.Topology.Veths {
		if v.PeerMaster != "" && !own[v.PeerMaster] {
			peers[v.PeerMaster] = true
		}
	}
	if len(peers) == 0 || !p.Cluster.MachineNetwork.IsValid() {
		return nil, nil
	}
	sv, err := e.Host.Survey(ctx, lab.KindNetwork)
	if err != nil {
		return nil, err
	}
	var msgs []string
	for _, n := range sv.Networks {
		if !peers[n.Bridge] || len(n.Ranges) == 0 || !slices.ContainsFunc(n.CIDRs, func(c netip.Prefix) bool { return c.Masked() == p.Cluster.MachineNetwork.Masked() }) {
			continue
		}
		msg := fmt.Sprintf("network.shared: the lab joins bridge %s of libvirt network %q, whose DHCP and DNS would know nothing of its nodes (no reservation, no api record); write shared: %s to add the lab's entries to it", n.Bridge, n.Name, n.Name)
		if strict {
			msgs = append(msgs, msg+" (the "+p.Mode+" mode's ignition assumes the planned addresses)")
		} else {
			e.Rep.Note("preflight", msg)
		}
	}
	return msgs, nil
}

func orNone(s string) string {
	if s == "" {
		return "no hostname"
	}
	return s
}
