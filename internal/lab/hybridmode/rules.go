package hybridmode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/lab/steps"
	"github.com/bmlab/bmlab/internal/ocp"
	"github.com/bmlab/bmlab/internal/plan"
)

// The hybrid mode's rules (its preflight's hooks), its storage's hooks and
// what its nodes' marks tell other labs.

// check refuses what the hybrid mode cannot do with this lab file: a lab
// over several hosts (its ignition files and backing image are on the hub
// only), a single node whose image is not the live ISO.
func check(e *lab.Env) error {
	if len(e.Plan.Hosts) > 0 {
		return errors.New("hosts: the hybrid mode runs on one host for now (its ignition files and backing image are on the hub only); use --mode ipi-baremetal, or remove the lab file's hosts section")
	}
	return checkLiveISO(e.Plan)
}

// inputs checks the hybrid mode's install-config (platform none).
func inputs(e *lab.Env) error {
	_, err := HybridInstallConfig(e)
	return err
}

// clashes are the VIPs and router IDs another hybrid cluster on the same
// segment holds; a single node has neither.
func clashes(ctx context.Context, e *lab.Env) ([]string, error) {
	if e.Plan.Hybrid.SingleNode {
		return nil, nil
	}
	return segmentClashes(ctx, e)
}

// image makes the nodes' image available where their clones find it (a
// URL downloaded once).
func image(ctx context.Context, e *lab.Env) (bool, error) {
	h := e.Plan.Hybrid
	return steps.EnsureImage(ctx, e, "storage", h.Image, h.Backing)
}

// removed leaves out the bootstrap's disks once it is removed.
func removed(p *plan.Plan, n plan.Node) bool {
	return n.Role == ocp.RoleBootstrap && lab.Exists(p.Paths.BootstrapRemoved)
}

// machines are the nodes' machines: with the mark's attributes other labs
// read, and a single node's live ISO in its CD drive.
func machines(p *plan.Plan, list []plan.Node) []lab.Machine {
	var out []lab.Machine
	for _, n := range list {
		m := steps.MachineOf(p, n)
		m.Attrs = markAttrs(p)
		if h := p.Hybrid; h.SingleNode {
			// As kcli's sno VM: the live ISO with the embedded ignition
			// in the CD drive, behind the blank disk the ISO installs
			// onto; the firmware passes the blank disk over, and the
			// installed one once it boots.
			m.CDROM = h.BootISO
		}
		out = append(out, m)
	}
	return out
}

// segmentClashes: clusters on one layer-2 segment must not share a VIP or
// a keepalived router ID (VRRP would make them fight for the address).
func segmentClashes(ctx context.Context, e *lab.Env) ([]string, error) {
	p := e.Plan
	k := p.Cluster
	sv, err := e.Host.Survey(ctx, lab.KindDomain)
	if err != nil {
		return nil, err
	}
	marks := sv.Marks
	mine := map[string]string{
		"apiVIP": k.APIVIP.String(), "ingressVIP": k.IngressVIP.String(),
		"apiRouterID": strconv.Itoa(p.Hybrid.APIRouterID), "ingressRouterID": strconv.Itoa(p.Hybrid.IngressRouterID),
	}
	settings := map[string]string{"apiVIP": "cluster.apiVIP", "ingressVIP": "cluster.ingressVIP",
		"apiRouterID": "cluster.hybrid.apiRouterID", "ingressRouterID": "cluster.hybrid.ingressRouterID",
		"apiVIPV6": "cluster.apiVIPV6", "ingressVIPV6": "cluster.ingressVIPV6"}
	keys := []string{"apiVIP", "ingressVIP", "apiRouterID", "ingressRouterID", "apiVIPV6", "ingressVIPV6"}
	if f := k.Secondary; !f.IsZero() {
		mine["apiVIPV6"], mine["ingressVIPV6"] = f.APIVIP.String(), f.IngressVIP.String()
	}
	seen := map[string]bool{}
	var msgs []string
	for _, m := range marks {
		if m["name"] == p.Lab || m["segment"] != p.Hybrid.Segment || seen[m["name"]] {
			continue
		}
		seen[m["name"]] = true
		for _, key := range keys {
			for _, other := range keys {
				isVIP := func(k string) bool { return strings.Contains(k, "VIP") }
				if isVIP(key) != isVIP(other) || mine[key] == "" || m[other] == "" || m[other] == "invalid IP" {
					continue
				}
				if mine[key] == m[other] {
					msgs = append(msgs, fmt.Sprintf("lab %q on the same network %s holds %s %s: give this lab another (%s)", m["name"], p.Hybrid.Segment, other, m[other], settings[key]))
				}
			}
		}
	}
	slices.Sort(msgs)
	return msgs, nil
}

// checkLiveISO refuses a single-node hybrid cluster whose image (a local
// file; a URL is checked once downloaded, by the embedding) is not an ISO
// 9660 image: it boots the live ISO, not the qcow2 the bootstrap flow
// clones.
func checkLiveISO(p *plan.Plan) error {
	if !p.Hybrid.SingleNode || plan.IsURL(p.Hybrid.Image) {
		return nil
	}
	f, err := os.Open(p.Hybrid.Backing)
	if err != nil {
		return fmt.Errorf("cluster.image: %w", err)
	}
	defer f.Close()
	// The primary volume descriptor at sector 16: type 1, "CD001" (ECMA-119 8.4).
	b := make([]byte, 6)
	if _, err := f.ReadAt(b, 16*2048); err != nil || string(b[1:]) != "CD001" {
		return fmt.Errorf("cluster.image: %s is not an ISO 9660 image; a single-node hybrid cluster (masters 1, no workers) boots the RHCOS live ISO (rhcos-live.x86_64.iso) as kcli's sno does: name it, or give the cluster workers (or 3 masters) for the bootstrap flow, which clones the qcow2", p.Hybrid.Image)
	}
	return nil
}

// markAttrs are what a hybrid lab's domains tell other labs: the segment
// and the VIPs and router IDs the cluster holds on it; and what its down
// needs without the lab file: the hosts file that has the lab's entries.
func markAttrs(p *plan.Plan) []string {
	k := p.Cluster
	if p.Hybrid.SingleNode {
		// No VIP and no VRRP: nothing another lab on the segment could
		// clash with.
		return []string{"segment", p.Hybrid.Segment, "hostsFile", p.Paths.HostsFile}
	}
	attrs := []string{
		"segment", p.Hybrid.Segment,
		"apiVIP", k.APIVIP.String(), "ingressVIP", k.IngressVIP.String(),
		"apiRouterID", strconv.Itoa(p.Hybrid.APIRouterID), "ingressRouterID", strconv.Itoa(p.Hybrid.IngressRouterID),
		"hostsFile", p.Paths.HostsFile,
	}
	if f := k.Secondary; !f.IsZero() {
		attrs = append(attrs, "apiVIPV6", f.APIVIP.String(), "ingressVIPV6", f.IngressVIP.String())
	}
	return attrs
}
