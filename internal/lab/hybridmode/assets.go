package hybridmode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/ocp"
	"github.com/bmlab/bmlab/internal/upi"
)

// manifests runs `openshift-install create manifests` and edits them for
// the hybrid flow (upi.EditManifests): no Machine, MachineSet or
// ControlPlaneMachineSet, schedulable masters when there are no workers,
// the ingress controller's replicas and placement, a CSR auto-approver.
type manifests struct{ multiNode }

func (manifests) Name() string { return "manifests" }

func (manifests) Ensure(ctx context.Context, e *lab.Env) (bool, error) {
	dir := e.Plan.Installer.Dir
	if lab.Exists(filepath.Join(dir, "bootstrap.ign")) {
		return false, nil // the ignition configs consumed the manifests
	}
	changed, err := createOnce(ctx, e, "manifests", filepath.Join(dir, "manifests"), (*upi.Installer).CreateManifests)
	if err != nil {
		return false, err
	}
	c, err := clusterOf(e)
	if err != nil {
		return changed, err
	}
	edited, err := upi.EditManifests(dir, c, upi.ManifestOptions{ApproverImage: e.Plan.Hybrid.ApproverImage})
	if err != nil {
		return changed, err
	}
	if len(edited) > 0 {
		e.Rep.Note("manifests", "edited "+strings.Join(edited, ", "))
	}
	return changed || len(edited) > 0, nil
}

func (manifests) Delete(context.Context, *lab.Env) error { return nil }
func (manifests) CreatesNothing()                        {}

// ignition runs `openshift-install create ignition-configs`, then writes
// each node's config: the installer's for its role (bootstrap, master,
// worker) merged with the node's static pods, hostname, SSH key and
// resolv.conf dispatcher, in the installer's spec version, where qemu
// reads it (fw_cfg).
type ignition struct{ multiNode }

func (ignition) Name() string { return "ignition" }

func (ignition) Ensure(ctx context.Context, e *lab.Env) (bool, error) {
	p := e.Plan
	dir := p.Installer.Dir
	changed, err := createOnce(ctx, e, "ignition", filepath.Join(dir, "bootstrap.ign"), (*upi.Installer).CreateIgnitionConfigs)
	if err != nil {
		return false, err
	}
	c, err := clusterOf(e)
	if err != nil {
		return changed, err
	}
	if err := os.MkdirAll(p.Paths.IgnitionDir, 0o755); err != nil {
		return changed, err
	}
	for _, n := range p.Nodes {
		if n.Role == ocp.RoleBootstrap && lab.Exists(p.Paths.BootstrapRemoved) {
			continue
		}
		file := n.Role + ".ign"
		raw, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			return changed, fmt.Errorf("the installer's %s: %w", file, err)
		}
		node := c.Nodes[nodeIndex(c, n.Name)]
		pods, err := upi.StaticPodFiles(c, node)
		if err != nil {
			return changed, err
		}
		merged, err := upi.MergeIgnition(file, raw, node, c, pods)
		if err != nil {
			return changed, err
		}
		if have, err := os.ReadFile(n.Ignition); err == nil && string(have) == string(merged) {
			continue
		}
		// qemu (libvirt-qemu) reads it; it holds the cluster's secrets
		// as the installer's own file does, so 0644 in a lab directory
		// only root and qemu reach is the trade-off (see README).
		if err := lab.WriteAtomic(n.Ignition, merged, 0o644); err != nil {
			return changed, err
		}
		changed = true
	}
	return changed, nil
}

// Delete removes the merged configs.
func (ignition) Delete(_ context.Context, e *lab.Env) error {
	return lab.RemoveFiles(nil, e.Plan.Paths.IgnitionDir)
}

func nodeIndex(c upi.Cluster, name string) int {
	for i, n := range c.Nodes {
		if n.Name == name {
			return i
		}
	}
	return -1
}
