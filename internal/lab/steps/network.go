package steps

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/plan"
)

// Network is the one owner of the lab's host network, in dependency order:
// the lab's NAT network (its bridge is the veth's far end), the bridges and
// veths, a libvirt network named like each lab bridge (what the installer's
// bridge check accepts), the LLDP sender (the switches' frames on the
// nodes' taps, unless network.lldp is off), and NetworkManager's
// unmanaged-devices snippet where NetworkManager is. `labctl net check|repair|down` are views over
// CheckNetwork, EnsureNetwork and RemoveNetwork, the functions this action
// runs: there is no second implementation.
type Network struct{}

func (Network) Name() string { return "network" }

func (Network) Ensure(ctx context.Context, e *lab.Env) (bool, error) {
	done, err := EnsureNetwork(ctx, e)
	for _, d := range done {
		// What asks for the user's hand (a resolver or NetworkManager to
		// reload) is said; the rest is the tick.
		if strings.Contains(d, "applies it now") {
			e.Rep.Note("network", d)
		}
	}
	return len(done) > 0, err
}

func (Network) Delete(ctx context.Context, e *lab.Env) error {
	_, err := RemoveNetwork(ctx, e)
	return err
}

// CheckNetwork lists every difference between the host's network and the
// plan, in the order EnsureNetwork repairs them. It changes nothing.
func CheckNetwork(ctx context.Context, e *lab.Env) ([]lab.Difference, error) {
	p := e.Plan
	out := []lab.Difference{}
	foreign := func(name string) (bool, error) {
		found, owner, err := e.Host.Owner(ctx, lab.KindNetwork, name)
		return found && owner != p.Lab, err
	}
	clear := func(name string) string {
		return fmt.Sprintf("the lab never changes a network it does not own: virsh net-destroy %s; virsh net-undefine %s, if it is stale", name, name)
	}
	if nat := p.Network.NAT; nat != nil {
		problems, err := e.Host.Differences(ctx, NATObject(p))
		if err != nil {
			return nil, err
		}
		if len(problems) > 0 {
			d := lab.Difference{Object: "libvirt network " + nat.Name, Kind: "nat-network",
				Want: "active NAT network " + nat.MachineNetwork.String() + " on " + nat.Bridge, Got: join(gots(problems)), Fix: "define, correct or start it"}
			if d.Blocking, err = foreign(nat.Name); err != nil {
				return nil, err
			} else if d.Blocking {
				d.Fix = clear(nat.Name)
			}
			out = append(out, d)
		}
	}
	if sh := p.Network.Shared; sh != nil {
		problems, err := e.Host.Differences(ctx, lab.SharedEntries{Lab: p.Lab, Shared: *sh})
		if err != nil {
			return nil, err
		}
		for _, pr := range problems {
			out = append(out, lab.Difference{Object: "libvirt network " + sh.Network + " (shared)", Kind: "shared-entry",
				Want: "the lab's reservations and DNS records, listed as its own", Got: pr.Got,
				Fix: "add the lab's entries live (the network is not restarted): labctl net repair"})
		}
	}
	links, err := e.Host.Differences(ctx, lab.Links{Lab: p.Lab, Topology: p.HubTopology()})
	if err != nil {
		return nil, err
	}
	out = append(out, links...)
	for _, name := range p.Network.BridgeNetworks {
		problems, err := e.Host.Differences(ctx, lab.BridgeNetwork{Lab: p.Lab, Name: name})
		if err != nil {
			return nil, err
		}
		if len(problems) == 0 {
			continue
		}
		d := lab.Difference{Object: "libvirt network " + name, Kind: "libvirt-network", Want: "active, bridge " + name,
			Got: join(gots(problems)), Fix: "define and start it"}
		if d.Blocking, err = foreign(name); err != nil {
			return nil, err
		} else if d.Blocking {
			d.Fix = clear(name)
		}
		out = append(out, d)
	}
	nics, err := checkNICs(ctx, e)
	if err != nil {
		return nil, err
	}
	out = append(out, nics...)
	procs, err := checkProcesses(ctx, e)
	if err != nil {
		return nil, err
	}
	out = append(out, procs...)
	nm, err := e.Host.Differences(ctx, unmanaged(p))
	if err != nil {
		return nil, err
	}
	for _, d := range nm {
		out = append(out, lab.Difference{Object: "NetworkManager", Kind: "unmanaged-missing", Want: d.Object,
			Fix: "write the unmanaged-devices snippet for the lab's links"})
	}
	if d := resolverDropIn(p); d != nil {
		problems, err := e.Host.Differences(ctx, *d)
		if err != nil {
			return nil, err
		}
		for _, pr := range problems {
			diff := lab.Difference{Object: d.Path, Kind: "host-resolver", Want: "the " + d.Kind + " drop-in sending " + d.Domain + " to " + d.DNS.String(), Got: pr.Got,
				Fix: "write it again: labctl net repair (" + d.ApplyHint() + ")"}
			if pr.Blocking {
				diff.Blocking, diff.Fix = true, "the lab never changes a file without its mark: move it away, or set network.hostResolver: hosts"
			}
			out = append(out, diff)
		}
	}
	return out, nil
}

// checkNICs compares every defined node's NICs with the plan's: each on
// its network, in its place (the first is the one it network-boots from).
// A node defined before its lab had a provisioning network keeps its one
// NIC until it is defined again; net repair leaves domains alone, so the
// fix is down and up. Nothing is checked without libvirt (--no-libvirt).
func checkNICs(ctx context.Context, e *lab.Env) ([]lab.Difference, error) {
	p := e.Plan
	if p.LinksOnly {
		return nil, nil
	}
	var out []lab.Difference
	for _, n := range p.Nodes {
		problems, err := e.Host.Differences(ctx, MachineOf(p, n))
		if err != nil {
			return nil, err
		}
		if len(problems) == 0 {
			continue
		}
		var want []string
		for _, nic := range n.NICs {
			want = append(want, nic.Name+" "+nic.MAC+" on "+nic.Network+nic.Bridge)
		}
		out = append(out, lab.Difference{Object: "domain " + n.Name, Kind: "node-nics", Want: strings.Join(want, ", "), Got: join(gots(problems)),
			Fix: "labctl down, then labctl up: a node's NICs are set when its domain is defined (net repair leaves domains alone)"})
	}
	return out, nil
}

// resolverDropIn is the plan's host resolver drop-in, nil for hosts or none.
func resolverDropIn(p *plan.Plan) *lab.ResolverDropIn {
	r := p.Network.Resolver
	if r == nil {
		return nil
	}
	return &lab.ResolverDropIn{ResolverDropIn: netplumb.ResolverDropIn{Kind: r.Kind, Path: r.Path, Lab: p.Lab, Domain: r.Domain, DNS: r.DNS, Apps: r.Apps}}
}

// unmanaged is the plan's NetworkManager snippet for the hub's links.
func unmanaged(p *plan.Plan) lab.Unmanaged {
	return lab.Unmanaged{Unmanaged: netplumb.Unmanaged{ConfDir: p.Network.NMConfDir, Lab: p.Lab, Links: p.HubTopology().Names()}}
}

// EnsureNetwork makes what is missing and corrects what differs, and says
// what it changed, one line each (none: nothing to do).
func EnsureNetwork(ctx context.Context, e *lab.Env) ([]string, error) {
	p := e.Plan
	var done []string
	if nat := p.Network.NAT; nat != nil {
		c, err := e.Host.Ensure(ctx, NATObject(p))
		if err != nil {
			return done, err
		}
		if len(c) > 0 {
			done = append(done, fmt.Sprintf("libvirt network %s: NAT network %s on %s, defined, active, autostarted", nat.Name, nat.MachineNetwork, nat.Bridge))
		}
	}
	if p.Network.Shared != nil {
		steps, err := e.Host.Ensure(ctx, lab.SharedEntries{Lab: p.Lab, Shared: *p.Network.Shared})
		done = append(done, steps...)
		if err != nil {
			return done, err
		}
	}
	steps, err := e.Host.Ensure(ctx, lab.Links{Lab: p.Lab, Topology: p.HubTopology()})
	done = append(done, steps...)
	if err != nil {
		return done, err
	}
	// The NAT bridge's IPv6 address is tentative until its veth gives it a
	// carrier and duplicate address detection has run: vbmcd cannot bind
	// it, nor dnsmasq answer on it, before.
	if nat := p.Network.NAT; nat != nil {
		for _, gw := range []netip.Addr{nat.HostAddress, secondaryGateway(nat)} {
			if gw.Is6() {
				if _, err := e.Host.Ensure(ctx, lab.LinkAddress{Link: nat.Bridge, Addr: gw}); err != nil {
					return done, fmt.Errorf("the lab's NAT bridge: %w; its veth %s should give it a carrier (labctl net check)", err, vethOn(p, nat.Bridge))
				}
			}
		}
	}
	for _, name := range p.Network.BridgeNetworks {
		c, err := e.Host.Ensure(ctx, lab.BridgeNetwork{Lab: p.Lab, Name: name})
		if err != nil {
			return done, err
		}
		if len(c) > 0 {
			done = append(done, fmt.Sprintf("libvirt network %s: defined, active, autostarted on bridge %s", name, name))
		}
	}
	procs, err := ensureProcesses(ctx, e)
	done = append(done, procs...)
	if err != nil {
		return done, err
	}
	wrote, err := e.Host.Ensure(ctx, unmanaged(p))
	if err != nil {
		return done, err
	}
	for _, path := range wrote {
		done = append(done, "NetworkManager found: wrote "+path+" so it leaves the lab's links alone; `nmcli general reload conf` applies it now")
	}
	if d := resolverDropIn(p); d != nil {
		wrote, err := e.Host.Ensure(ctx, *d)
		if err != nil {
			return done, err
		}
		for _, path := range wrote {
			done = append(done, fmt.Sprintf("host resolver: wrote %s, %s and every name under it to %s; %s", path, d.Domain, d.DNS, d.ApplyHint()))
		}
	}
	return done, nil
}

// NetworkRemoval is what RemoveNetwork removed, and what it left because it
// is not the lab's.
type NetworkRemoval struct {
	// Shared are the networks the lab shared, whose entries of the lab
	// were removed.
	Shared   []string `json:"sharedNetworks"`
	Networks []string `json:"libvirtNetworks"`
	Links    []string `json:"links"`
	// Rules are the routing rules removed (the BMC network's routes).
	Rules []string `json:"rules,omitempty"`
	// LLDPSenders are the PIDs of the lab's LLDP senders stopped,
	// DHCPServers of its provisioning DHCP servers.
	LLDPSenders []string `json:"lldpSenders"`
	DHCPServers []string `json:"dhcpServers,omitempty"`
	Foreign     []string `json:"foreign"`
	Snippet     string   `json:"networkManagerSnippet,omitempty"`
	// ResolverDropIns are the host resolver drop-ins removed.
	ResolverDropIns []string `json:"resolverDropIns"`
}

// RemoveNetwork removes the lab's entries from the networks it shares,
// then its libvirt networks (bridge-named, then the NAT network: the bridge
// networks' veth is on its bridge), then its links, then the
// NetworkManager snippet and the host resolver drop-ins that bear the
// lab's mark (the plan's, and the lab's name at the default places): the plan's and everything else that
// bears the lab's mark. It fails while any of it is left.
func RemoveNetwork(ctx context.Context, e *lab.Env) (NetworkRemoval, error) {
	p := e.Plan
	objs := e.Host
	rm := NetworkRemoval{Shared: []string{}, Networks: []string{}, Links: []string{}, LLDPSenders: []string{}, Foreign: []string{}, ResolverDropIns: []string{}}
	// The lab's processes first: they send on the taps, and listen on
	// the bridges, of the networks below.
	for _, lp := range labProcesses(p) {
		stopped, err := stopProcesses(ctx, e, lp.kind)
		if lp.kind == lab.KindLLDP {
			rm.LLDPSenders = append(rm.LLDPSenders, stopped...)
		} else {
			rm.DHCPServers = append(rm.DHCPServers, stopped...)
		}
		if err != nil {
			return rm, err
		}
	}
	// The lab's entries in shared networks first, found by the lists the
	// networks keep, whether or not the plan names the network (down
	// --lab has no lab file).
	sv, err := e.Host.Survey(ctx, lab.KindNetwork)
	if err != nil {
		return rm, err
	}
	for _, n := range sv.Networks {
		if !slices.ContainsFunc(n.Labs, func(x lab.Entries) bool { return x.Lab == p.Lab }) {
			continue
		}
		if err := e.Host.Delete(ctx, lab.KindShared, n.Name, p.Lab); err != nil {
			return rm, err
		}
		rm.Shared = append(rm.Shared, n.Name)
	}
	marked, err := objs.Marked(ctx, lab.KindNetwork, p.Lab)
	if err != nil {
		return rm, err
	}
	names := p.Network.BridgeNetworks
	if p.Network.NAT != nil {
		names = append(names[:len(names):len(names)], p.Network.NAT.Name)
	}
	var errs []error
	remove := func(kind lab.Kind, name string, into *[]string) {
		found, owner, err := objs.Owner(ctx, kind, name)
		switch {
		case err != nil:
			errs = append(errs, err)
		case !found && kind == lab.KindLink:
			// A veth's peer goes with it: listed as the lab's, now gone.
			*into = append(*into, name)
		case !found:
		case owner != p.Lab:
			rm.Foreign = append(rm.Foreign, string(kind)+" "+name)
			e.Rep.Note("remove network", "left "+name+" alone: it has a lab name but is not the lab's")
		default:
			if err := objs.Delete(ctx, kind, name, p.Lab); err != nil {
				errs = append(errs, err)
			} else {
				*into = append(*into, name)
			}
		}
	}
	for _, name := range lab.Union(names, marked) {
		remove(lab.KindNetwork, name, &rm.Networks)
	}
	links, err := objs.Marked(ctx, lab.KindLink, p.Lab)
	if err != nil {
		return rm, errors.Join(append(errs, err)...)
	}
	for _, name := range links {
		remove(lab.KindLink, name, &rm.Links)
	}
	// The BMC network's routing rules (ip rule), found by the lab's mark.
	rules, err := objs.Marked(ctx, lab.KindRule, p.Lab)
	if err != nil {
		return rm, errors.Join(append(errs, err)...)
	}
	for _, r := range rules {
		if err := objs.Delete(ctx, lab.KindRule, r, p.Lab); err != nil {
			errs = append(errs, err)
		} else {
			rm.Rules = append(rm.Rules, r)
		}
	}
	// The host's files: the NetworkManager snippet (its name is the
	// lab's), the resolver drop-ins that bear the lab's mark.
	var snippet []string
	remove(lab.KindUnmanaged, unmanaged(p).Path(), &snippet)
	if len(snippet) > 0 {
		rm.Snippet = snippet[0]
	}
	for _, path := range p.Network.ResolverDropIns {
		switch found, owner, err := objs.Owner(ctx, lab.KindResolver, path); {
		case err != nil:
			errs = append(errs, err)
		case !found:
		case owner != p.Lab:
			if p.Network.Resolver != nil && path == p.Network.Resolver.Path {
				rm.Foreign = append(rm.Foreign, "file "+path)
				e.Rep.Note("remove network", "left "+path+" alone: it is not the lab's")
			}
		default:
			if err := objs.Delete(ctx, lab.KindResolver, path, p.Lab); err != nil {
				errs = append(errs, err)
			} else {
				rm.ResolverDropIns = append(rm.ResolverDropIns, path)
			}
		}
	}
	if len(errs) > 0 {
		return rm, errors.Join(errs...)
	}
	left := []error{lab.Remaining(ctx, e, lab.KindNetwork), lab.Remaining(ctx, e, lab.KindLink), lab.Remaining(ctx, e, lab.KindRule)}
	if p.Spoke == "" && !p.LinksOnly {
		left = append(left, lab.Remaining(ctx, e, lab.KindLLDP), lab.Remaining(ctx, e, lab.KindDHCP))
	}
	return rm, errors.Join(left...)
}

// lldpSender is the plan's LLDP sender as the provider runs it (nil: the
// lab has none).
func lldpSender(p *plan.Plan) *lab.LLDPSender {
	if p.Network.LLDP == nil {
		return nil
	}
	return &lab.LLDPSender{Lab: p.Lab, Netns: p.Netns, Sender: *p.Network.LLDP}
}

// labProcess is a process the network step keeps for the lab, one of a
// kind: the LLDP sender, the provisioning DHCP server.
type labProcess struct {
	kind lab.Kind
	name string     // net check's kind of difference
	obj  lab.Object // nil: the plan wants none
	off  string     // why the plan wants none
	want string     // what it does
}

// labProcesses are the lab's processes as the plan wants them.
func labProcesses(p *plan.Plan) []labProcess {
	l := labProcess{kind: lab.KindLLDP, name: "lldp-sender", off: "network.lldp is off", want: "vbmcd lldp announcing the lab's switches on its nodes' taps"}
	if s := lldpSender(p); s != nil {
		l.obj = *s
	}
	d := labProcess{kind: lab.KindDHCP, name: "provisioning-dhcp", off: "the lab has no Unmanaged provisioning network",
		want: "dnsmasq handing out the provisioning network's addresses and its PXE boot"}
	if s := p.Network.ProvisioningDHCP; s != nil {
		d.obj = lab.DHCPServer{Lab: p.Lab, Netns: p.Netns, Server: *s}
	}
	return []labProcess{l, d}
}

// checkProcesses says whether each of the lab's processes runs as the
// plan invokes it, or, when the plan wants none, that none runs.
func checkProcesses(ctx context.Context, e *lab.Env) ([]lab.Difference, error) {
	if e.Plan.Spoke != "" || e.Plan.LinksOnly {
		return nil, nil // the hub's (its host may be this machine), or left out with libvirt
	}
	var out []lab.Difference
	for _, lp := range labProcesses(e.Plan) {
		obj := string(lp.kind)
		if lp.kind == lab.KindLLDP {
			obj = "LLDP sender"
		}
		if lp.obj == nil {
			running, err := e.Host.Marked(ctx, lp.kind, e.Plan.Lab)
			if err != nil {
				return nil, err
			}
			if len(running) > 0 {
				out = append(out, lab.Difference{Object: obj, Kind: lp.name, Want: "none (" + lp.off + ")",
					Got: "running: pid " + join(running), Fix: "stop it: labctl net repair"})
			}
			continue
		}
		problems, err := e.Host.Differences(ctx, lp.obj)
		if err != nil {
			return nil, err
		}
		if len(problems) > 0 {
			out = append(out, lab.Difference{Object: obj, Kind: lp.name, Want: lp.want, Got: join(gots(problems)),
				Fix: "start it: labctl net repair"})
		}
	}
	return out, nil
}

// ensureProcesses starts each of the lab's processes unless it runs as
// the plan invokes it, or stops it when the plan wants none.
func ensureProcesses(ctx context.Context, e *lab.Env) ([]string, error) {
	if e.Plan.Spoke != "" || e.Plan.LinksOnly {
		return nil, nil
	}
	var done []string
	for _, lp := range labProcesses(e.Plan) {
		if lp.obj == nil {
			stopped, err := stopProcesses(ctx, e, lp.kind)
			for _, pid := range stopped {
				done = append(done, fmt.Sprintf("%s: stopped pid %s (%s)", lp.kind, pid, lp.off))
			}
			if err != nil {
				return done, err
			}
			continue
		}
		d, err := e.Host.Ensure(ctx, lp.obj)
		done = append(done, d...)
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// stopProcesses stops every process of a kind that bears the lab's mark
// and returns their PIDs; on another host than the hub, none (they are the
// hub's, and that host may be this machine), nor with libvirt left out.
func stopProcesses(ctx context.Context, e *lab.Env, kind lab.Kind) ([]string, error) {
	if e.Plan.Spoke != "" || e.Plan.LinksOnly {
		return nil, nil
	}
	running, err := e.Host.Marked(ctx, kind, e.Plan.Lab)
	if err != nil {
		return nil, err
	}
	var stopped []string
	var errs []error
	for _, pid := range running {
		if err := e.Host.Delete(ctx, kind, pid, e.Plan.Lab); err != nil {
			errs = append(errs, err)
		} else {
			stopped = append(stopped, pid)
		}
	}
	return stopped, errors.Join(errs...)
}

func join(s []string) string { return strings.Join(s, ", ") }

// secondaryGateway is the NAT network's IPv6 address in a dual-stack lab
// (invalid otherwise).
func secondaryGateway(nat *plan.NAT) netip.Addr {
	if !nat.Secondary.IsZero() {
		return nat.Secondary.HostAddress
	}
	return netip.Addr{}
}

// vethOn names the lab's veth end on a bridge ("" when none is).
func vethOn(p *plan.Plan, bridge string) string {
	for _, v := range p.HubTopology().Veths {
		if v.PeerMaster == bridge {
			return v.Peer
		}
	}
	return ""
}

// gots are the differences' Got fields.
func gots(ds []lab.Difference) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Got
	}
	return out
}

// NATObject is the plan's NAT network as the provider makes it.
func NATObject(p *plan.Plan) lab.NATNetwork {
	return lab.NATNetwork{Lab: p.Lab, NAT: *p.Network.NAT, Nodes: p.Nodes, NodeHoldsVIPs: p.SingleNode()}
}
