package steps

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/plan"
)

// Graph draws the lab in Graphviz's DOT language from its plan and what is
// really there: the host's bridges and NAT network, the veths between
// them, the VXLAN links to other hosts, every node with its role, boot
// MAC, IP and power and a line per NIC to its bridge (the provisioning
// network's with its addresses), and the BMC daemon with each node's
// endpoint. An object that
// `labctl net check` finds missing or different is drawn dashed in red,
// with what net check says about it; a node whose domain is absent too.
func Graph(ctx context.Context, e *lab.Env) (string, error) {
	diffs, err := CheckNetwork(ctx, e)
	if err != nil {
		return "", err
	}
	power := map[string]string{}
	for _, n := range e.Plan.Nodes {
		if power[n.Name], err = e.Host.Power(ctx, n.Name); err != nil {
			return "", err
		}
	}
	return GraphDOT(e.Plan, diffs, power), nil
}

// GraphDOT is Graph's drawing, pure: the plan, net check's differences and
// each node's power state ("absent" for a missing domain).
func GraphDOT(p *plan.Plan, diffs []lab.Difference, power map[string]string) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	drift := map[string]lab.Difference{}
	for _, d := range diffs {
		drift[strings.TrimPrefix(d.Object, "libvirt network ")] = d
	}
	style := func(name string) string {
		d, ok := drift[name]
		if !ok {
			return ""
		}
		what := d.Kind
		if d.Got != "" {
			what += ": " + d.Got
		}
		return fmt.Sprintf(`, style="dashed,filled", color="#c0392b", fontcolor="#c0392b", xlabel=%s, tooltip=%s`, q(what), q(d.Fix))
	}
	w("digraph %s {", q(p.Lab))
	w(`  graph [rankdir=LR, fontname="Helvetica", fontsize=11, label=%s, labelloc=t, nodesep=0.3, ranksep=0.8];`,
		q(fmt.Sprintf("lab %s (%s) — %s", p.Lab, p.Mode, graphSummary(diffs, power))))
	w(`  node [fontname="Helvetica", fontsize=10, shape=box, style="rounded,filled", fillcolor="#ffffff"];`)
	w(`  edge [fontname="Helvetica", fontsize=9, arrowhead=none];`)
	host := "labctl's host"
	if p.Netns != "" {
		host += " (netns " + p.Netns + ")"
	}
	w("  subgraph cluster_host {")
	w(`    label=%s; style="rounded,dashed"; color="#7f8c8d";`, q(host))
	if nat := p.Network.NAT; nat != nil {
		w(`    %s [label=%s, fillcolor="#eaf2f8"%s];`, q("br:"+nat.Bridge),
			q(fmt.Sprintf("NAT network %s\nbridge %s\n%s, gateway %s\nDHCP %s–%s", nat.Name, nat.Bridge, nat.MachineNetwork, nat.HostAddress, nat.DHCPRange.Start, nat.DHCPRange.End)), style(nat.Name))
	}
	if sh := p.Network.Shared; sh != nil {
		w(`    %s [label=%s, fillcolor="#eaf2f8"%s];`, q("br:"+sh.Bridge),
			q(fmt.Sprintf("shared network %s\nbridge %s\n%s, gateway %s\nthis lab: %s–%s, %d reservations", sh.Network, sh.Bridge, sh.CIDR, sh.Gateway, sh.BlockStart, sh.BlockEnd, len(sh.Reservations))), style(sh.Network+" (shared)"))
	}
	top := p.HubTopology()
	for _, br := range top.Bridges {
		label := "bridge " + br.Name
		if slices.Contains(p.Network.BridgeNetworks, br.Name) {
			label += "\n+ libvirt network " + br.Name
		}
		if c := p.Cluster; br.Name == c.ProvisioningBridge && c.ProvisioningHostAddress.IsValid() && len(br.Addresses) > 0 {
			label += fmt.Sprintf("\nprovisioning network %s (%s)\nlab host %s, bootstrap %s, cluster %s", c.ProvisioningNetworkCIDR, c.ProvisioningNetwork,
				c.ProvisioningHostAddress, c.BootstrapProvisioningIP, c.ClusterProvisioningIP)
		}
		if br.Name == p.BMC.Bridge && p.BMC.Network.IsValid() {
			label = fmt.Sprintf("BMC network %s\nbridge %s, lab host %s\n%d BMCs, one address each", p.BMC.Network, br.Name, p.BMC.HostAddress, len(br.Addresses)-1)
		}
		w(`    %s [label=%s, fillcolor="#fef9e7"%s];`, q("br:"+br.Name), q(label), style(br.Name)+style("libvirt network "+br.Name))
	}
	w("  }")
	known := map[string]bool{}
	for _, br := range top.Bridges {
		known[br.Name] = true
	}
	if p.Network.NAT != nil {
		known[p.Network.NAT.Bridge] = true
	}
	if p.Network.Shared != nil {
		known[p.Network.Shared.Bridge] = true
	}
	for _, v := range top.Veths {
		if !known[v.PeerMaster] {
			known[v.PeerMaster] = true
			w(`  %s [label=%s, fillcolor="#f2f3f4", style="rounded,filled,dotted"];`, q("br:"+v.PeerMaster), q("bridge "+v.PeerMaster+"\n(not the lab's)"))
		}
	}
	for _, v := range top.Veths {
		label, attrs := "veth "+v.Name+" / "+v.Peer, ""
		for _, end := range []string{v.Name, v.Peer} {
			if d, ok := drift[end]; ok {
				label += "\n" + end + ": " + d.Kind
				attrs = fmt.Sprintf(`, style=dashed, color="#c0392b", fontcolor="#c0392b", tooltip=%s`, q(d.Fix))
			}
		}
		w(`  %s -> %s [label=%s%s];`, q("br:"+v.Master), q("br:"+v.PeerMaster), q(label), attrs)
	}
	for _, x := range top.VXLANs {
		w(`  %s [shape=ellipse, label=%s, fillcolor="#f4ecf7"];`, q("remote:"+x.Remote.String()), q("host "+x.Remote.String()))
		w(`  %s -> %s [label=%s, style=dashed%s];`, q("br:"+x.Master), q("remote:"+x.Remote.String()), q(fmt.Sprintf("vxlan %s (VNI %d)", x.Name, x.ID)), style(x.Name))
	}
	if p.Vbmcd.Serves() {
		w(`  vbmcd [shape=component, label=%s, fillcolor="#e8f8f5"];`, q(fmt.Sprintf("vbmcd\n%s://%s:%d", p.BMC.Scheme, p.BMC.Host, p.BMC.RedfishPort)))
		if p.BMC.Network.IsValid() {
			w(`  vbmcd -> %s [label="a listener per BMC address", color="#16a085"];`, q("br:"+p.BMC.Bridge))
		}
	}
	for _, n := range p.Nodes {
		pw := power[n.Name]
		fill := map[string]string{"On": "#d5f5e3", "Off": "#f2f3f4"}[pw]
		extra := ""
		if fill == "" {
			fill = "#fdedec"
		}
		if pw == "absent" || pw == "" {
			extra = `, style="dashed,rounded,filled", color="#c0392b", xlabel="domain absent"`
		}
		label := fmt.Sprintf("%s\n%s · %s\nboots %s\n%s", n.Name, n.Role, pw, n.BootMAC, n.IP)
		if n.Host != "" {
			label += "\non " + n.Host
		}
		w(`  %s [label=%s, fillcolor=%s%s];`, q("vm:"+n.Name), q(label), q(fill), extra)
		// A line per NIC, to its bridge, named as the guest names it.
		for _, nic := range n.NICs {
			w(`  %s -> %s [label=%s];`, q("vm:"+n.Name), q("br:"+nic.Network+nic.Bridge), q(nic.Name+" "+nic.MAC))
		}
		if len(n.NICs) == 0 {
			w(`  %s -> %s;`, q("vm:"+n.Name), q("br:"+p.Network.NodeNetwork))
		}
		if n.BMC.SystemURL != "" {
			if n.BMC.Addr.IsValid() {
				w(`  vbmcd -> %s [style=dotted, color="#16a085", label=%s, tooltip=%s];`, q("vm:"+n.Name), q("BMC "+n.BMC.Addr.String()), q(n.BMC.Address))
			} else {
				w(`  vbmcd -> %s [style=dotted, color="#16a085", tooltip=%s];`, q("vm:"+n.Name), q(n.BMC.Address))
			}
		}
	}
	w("}")
	return b.String()
}

// graphSummary is the picture's title line: in sync or not, power counts.
func graphSummary(diffs []lab.Difference, power map[string]string) string {
	counts := map[string]int{}
	for _, p := range power {
		counts[p]++
	}
	var parts []string
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
	}
	net := "network in sync"
	if len(diffs) > 0 {
		net = fmt.Sprintf("%d network difference(s): labctl net repair", len(diffs))
	}
	return net + "; nodes " + strings.Join(parts, ", ")
}

// q quotes a DOT string.
func q(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}
