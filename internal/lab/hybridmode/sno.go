package hybridmode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/plan"
	"github.com/bmlab/bmlab/internal/upi"
)

// The hybrid mode's single-node cluster (plan.Hybrid.SingleNode) follows
// kcli's sno: `create single-node-ignition-config`, the bootstrap-in-place
// ignition embedded into the RHCOS live ISO, one VM booting that ISO
// behind its blank disk, then `wait-for install-complete`. No bootstrap
// node, no VIPs, no static pods: the lab network's DNS gives api, api-int
// and *.apps the node's address. The multi-node actions (manifests,
// ignition, control-plane, bootstrap-complete, remove-bootstrap, workers)
// do not apply to it, nor these to them.

// singleNode marks the actions of the single-node flow.
type singleNode struct{}

func (singleNode) Applies(p *plan.Plan) bool { return p.Hybrid != nil && p.Hybrid.SingleNode }

// multiNode marks the actions of the multi-node flow.
type multiNode struct{}

func (multiNode) Applies(p *plan.Plan) bool { return p.Hybrid == nil || !p.Hybrid.SingleNode }

// snoIgnition runs `openshift-install create single-node-ignition-config`,
// merges the node's hostname and SSH key into the bootstrap-in-place
// config (the installer's entries win, as for every hybrid node) and
// embeds it into the live ISO (upi.EmbedIgnition): the ISO the node boots.
type snoIgnition struct{ singleNode }

func (snoIgnition) Name() string { return "ignition" }

func (snoIgnition) Ensure(ctx context.Context, e *lab.Env) (bool, error) {
	p := e.Plan
	h := p.Hybrid
	src := filepath.Join(p.Installer.Dir, upi.BootstrapInPlaceIgnition)
	changed, err := createOnce(ctx, e, "ignition", src, (*upi.Installer).CreateSingleNodeIgnitionConfig)
	if err != nil {
		return false, err
	}
	if changed && !lab.Exists(src) {
		return true, fmt.Errorf("openshift-install create single-node-ignition-config finished but wrote no %s", src)
	}
	raw, err := os.ReadFile(src)
	if err != nil {
		return changed, err
	}
	c, err := clusterOf(e)
	if err != nil {
		return changed, err
	}
	n := p.Nodes[0]
	merged, err := upi.MergeIgnition(upi.BootstrapInPlaceIgnition, raw, c.Nodes[0], c, nil)
	if err != nil {
		return changed, err
	}
	if err := os.MkdirAll(p.Paths.IgnitionDir, 0o755); err != nil {
		return changed, err
	}
	have, herr := os.ReadFile(n.Ignition)
	if herr == nil && string(have) == string(merged) && lab.Exists(h.BootISO) {
		return changed, nil
	}
	if err := lab.WriteAtomic(n.Ignition, merged, 0o644); err != nil {
		return changed, err
	}
	// qemu reads the ISO (its CD drive); it holds the cluster's secrets as
	// the merged ignition does (see the ignition action).
	if err := upi.EmbedIgnition(ctx, h.Backing, merged, h.BootISO); err != nil {
		return true, fmt.Errorf("cluster.image %s: %w", h.Image, err)
	}
	e.Rep.Note("ignition", "wrote "+h.BootISO+" (the live ISO with "+upi.BootstrapInPlaceIgnition+" embedded)")
	return true, nil
}

// Delete removes the merged config and the ISO.
func (snoIgnition) Delete(_ context.Context, e *lab.Env) error {
	return lab.RemoveFiles(nil, e.Plan.Paths.IgnitionDir)
}

// snoNode defines the node with the ISO in its CD drive behind its blank
// disk, and starts it (a node up started and that was shut off since stays
// off, as in the multi-node flow).
type snoNode struct{ singleNode }

func (snoNode) Name() string { return "node" }

func (snoNode) Ensure(ctx context.Context, e *lab.Env) (bool, error) {
	if !lab.Exists(e.Plan.Hybrid.BootISO) {
		return false, errors.New("the node's ISO " + e.Plan.Hybrid.BootISO + " is missing: `labctl up` again makes it")
	}
	return startNodes(ctx, e, "node", e.Plan.Nodes)
}

// Delete is the nodes action's, and the list of the nodes up started.
func (snoNode) Delete(ctx context.Context, e *lab.Env) error {
	return (controlPlane{}).Delete(ctx, e)
}
