package agentmode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/bmlab/bmlab/internal/agent"
	"github.com/bmlab/bmlab/internal/ipi"
	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/lab/bmcclient"
	"github.com/bmlab/bmlab/internal/lab/steps"
	"github.com/bmlab/bmlab/internal/plan"
)

// AddWorkers adds count workers to the running cluster of an agent-mode
// lab, as on real servers: it records them (the plan then has them, so
// status, net and down see them), builds their domains and BMCs, has the
// cluster make their ISO (`oc adm node-image create`), boots each from it
// through its BMC, and waits until they join (`oc adm node-image
// monitor`). reload resolves the plan again once the new count is
// recorded. Run again after a failure, it carries on with the nodes that
// have not joined; with count 0 it only does that.
func AddWorkers(ctx context.Context, e *lab.Env, count int, reload func() (*plan.Plan, error)) error {
	p := e.Plan
	switch {
	case p.Mode != Name:
		return fmt.Errorf("add-node: lab %q is a %s lab; adding nodes to a running cluster is the agent mode's (--mode agent)", p.Lab, p.Mode)
	case len(p.Hosts) > 0:
		return fmt.Errorf("add-node: lab %q is spread over hosts; add-node works on a lab on one host", p.Lab)
	case count < 0:
		return fmt.Errorf("--count %d: want 1 or more", count)
	case !lab.Exists(p.Paths.InstallComplete):
		return fmt.Errorf("add-node: the cluster of lab %q is not installed yet (no install-complete): run `labctl up --mode agent` first", p.Lab)
	}
	if count > 0 {
		added, err := plan.ReadAdded(p.Paths.AddedNodes)
		if err != nil {
			return err
		}
		b, _ := json.Marshal(plan.Added{Workers: added + count})
		if err := lab.WriteAtomic(p.Paths.AddedNodes, append(b, '\n'), 0o644); err != nil {
			return err
		}
		if e.Plan, err = reload(); err != nil {
			return err
		}
		p = e.Plan
	}
	var pending []plan.Node
	for _, n := range p.Nodes {
		if n.Added && !lab.Exists(joinedMarker(p, n)) {
			pending = append(pending, n)
		}
	}
	if len(pending) == 0 {
		e.Rep.Note("add-node", "every added node has joined")
		return nil
	}
	// The new nodes' network reservations, disks, domains and BMCs: the
	// up steps, which change only what is missing.
	for _, a := range []lab.Action{steps.Network{}, steps.Storage{}, steps.Nodes{}, steps.BMCs{}} {
		e.Rep.Start(a.Name())
		changed, err := a.Ensure(ctx, e)
		e.Rep.Done(a.Name(), changed, err)
		if err != nil {
			return fmt.Errorf("%s: %w", a.Name(), err)
		}
	}
	steps := []struct {
		name string
		run  func() (bool, error)
	}{
		{"node-image", func() (bool, error) { return nodeImage(ctx, e, pending) }},
		{"media", func() (bool, error) { return bootPending(ctx, e, pending) }},
		{"join", func() (bool, error) { return monitorJoin(ctx, e, pending) }},
	}
	for _, s := range steps {
		e.Rep.Start(s.name)
		changed, err := s.run()
		if errors.Is(err, ipi.ErrOCNotFound) {
			e.Rep.Note(s.name, err.Error())
			e.Rep.Done(s.name, false, err)
			return nil
		}
		e.Rep.Done(s.name, changed, err)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return nil
}

func joinedMarker(p *plan.Plan, n plan.Node) string {
	return filepath.Join(p.Paths.NodeImageDir, "joined-"+n.Name)
}

func ocOptions(p *plan.Plan) ipi.OCOptions {
	return ipi.OCOptions{Binary: p.Installer.OC, Dir: p.Paths.NodeImageDir, Kubeconfig: p.Paths.Kubeconfig}
}

// nodeImage writes nodes-config.yaml for the pending nodes and has the
// cluster make their ISO (`oc adm node-image create`), unless it made it
// for the same nodes already.
func nodeImage(ctx context.Context, e *lab.Env, pending []plan.Node) (bool, error) {
	p := e.Plan
	dir := p.Paths.NodeImageDir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	// The added workers are the workers' pool's: nodes of another
	// architecture than the cluster's get their own ISO.
	nc := agent.NodesConfig{Hosts: []agent.Host{}}
	if a := p.Cluster.Arch; a.Mixed() {
		nc.CPUArchitecture = a.Workers
	}
	for _, n := range pending {
		h := agent.HostSpec{MAC: n.MAC, Bond: n.Bond}
		h.NICs, h.MACs = n.BondPorts()
		host := agent.Host{Hostname: n.Name, Role: n.Role, Interfaces: h.Interfaces(),
			RootDeviceHints: &ipi.RootDeviceHints{DeviceName: ipi.DefaultRootDevice}}
		host.NetworkConfig = steps.BondConfig(p, n) // the bond, its addresses from DHCP

		nc.Hosts = append(nc.Hosts, host)
	}
	want, err := ipi.MarshalOrdered(nc, agent.NodesConfigName)
	if err != nil {
		return false, err
	}
	cfg := filepath.Join(dir, agent.NodesConfigName)
	iso := filepath.Join(dir, agent.NodeISOName(p.Cluster.Arch.Workers))
	if have, err := os.ReadFile(cfg + ".made"); err == nil && string(have) == string(want) && lab.Exists(iso) {
		return false, nil
	}
	_ = os.Remove(iso)
	if err := os.WriteFile(cfg, want, 0o644); err != nil {
		return false, err
	}
	if err := ipi.RunOC(ctx, ocOptions(p), []string{"adm", "node-image", "create", "--dir", dir}, func(l string) { e.Rep.Note("node-image", l) }); err != nil {
		return false, err
	}
	if !lab.Exists(iso) {
		return true, fmt.Errorf("oc adm node-image create finished but wrote no %s", iso)
	}
	return true, os.WriteFile(cfg+".made", want, 0o644)
}

// bootPending boots each pending node from the node ISO through its BMC.
func bootPending(ctx context.Context, e *lab.Env, pending []plan.Node) (bool, error) {
	p := e.Plan
	iso := filepath.Join(p.Paths.NodeImageDir, agent.NodeISOName(p.Cluster.Arch.Workers))
	c, stop, err := serveISO(p, iso)
	if err != nil {
		return false, err
	}
	defer stop()
	url := "http://" + p.Agent.MediaAddr + "/" + filepath.Base(iso)
	for _, n := range pending {
		if _, err := c.BootFromISO(ctx, n.BMC.SystemURL, url); err != nil {
			return true, fmt.Errorf("node %s: %w", n.Name, err)
		}
		e.Rep.Note("media", fmt.Sprintf("%s: node ISO inserted, boot override Cd once, powered on", n.Name))
	}
	return true, nil
}

// monitorJoin waits until the pending nodes have joined (`oc adm
// node-image monitor`), then ejects their ISO.
func monitorJoin(ctx context.Context, e *lab.Env, pending []plan.Node) (bool, error) {
	p := e.Plan
	var ips []string
	for _, n := range pending {
		ips = append(ips, n.IP.String())
	}
	if err := ipi.RunOC(ctx, ocOptions(p), []string{"adm", "node-image", "monitor", "--ip-addresses", strings.Join(ips, ",")},
		func(l string) { e.Rep.Note("join", l) }); err != nil {
		return false, fmt.Errorf("%w\nthe nodes are kept; `labctl add-node` again carries on", err)
	}
	c, err := bmcclient.New(p)
	if err != nil {
		return true, err
	}
	for _, n := range pending {
		if err := c.Eject(ctx, n.BMC.SystemURL); err != nil {
			return true, fmt.Errorf("eject the ISO of %s: %w", n.Name, err)
		}
		if err := os.WriteFile(joinedMarker(p, n), nil, 0o644); err != nil {
			return true, err
		}
		e.Rep.Note("join", n.Name+" joined the cluster")
	}
	return true, nil
}
