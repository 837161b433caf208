package hybridmode

import (
	"context"
	"github.com/bmlab/bmlab/internal/ipi"
	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/lab/steps"
	"github.com/bmlab/bmlab/internal/ocp"
	"github.com/bmlab/bmlab/internal/plan"
	"github.com/bmlab/bmlab/internal/upi"
)

// Mode is the hybrid mode.
func Mode() lab.Mode { return lab.Mode{Name: Name, Traits: Traits, Actions: Actions} }

// Traits are the hybrid mode's: nodes without BMCs, booted from the lab's
// RHCOS image with their ignition (which has no bond); a single node, with
// workers or not; the LLDP sender only when the lab file turns it on.
var Traits = plan.Traits{SingleNode: true, SingleNodeWorkers: true, BootImage: true}

// Name is the mode's name (--mode, the lab file's mode:).
const Name = "hybrid"

// Actions are the kcli-style UPI flow on the lab's host: the installer's
// own ignition, merged with static pods for the cluster's VIPs
// (keepalived), DNS (coredns) and ingress load balancer (haproxy), so the
// lab needs no DNS or PXE control. A single-node cluster takes the
// bootstrap-in-place path instead (sno.go): each plan runs the actions
// that apply to it.
func Actions() []lab.Action {
	return []lab.Action{
		steps.Preflight{Check: check, Inputs: inputs, Clashes: clashes, Strict: true},
		&lab.Step{StepName: "install-config", EnsureFunc: ensureInstallConfig, DeleteFunc: deleteInstallConfig},
		steps.Network{}, steps.Storage{Image: image, Skip: removed},
		manifests{}, ignition{}, snoIgnition{}, controlPlane{}, snoNode{}, bootstrapComplete{},
		removeBootstrap{}, workers{},
		&lab.Step{StepName: "install-complete", EnsureFunc: ensureInstallComplete, DeleteFunc: deleteInstallComplete},
	}
}

// HybridInstallConfig builds the hybrid mode's install-config: platform
// none, the lab network as machine network, replicas from the lab.
func HybridInstallConfig(e *lab.Env) (*ipi.InstallConfig, error) {
	p := e.Plan
	pull, key, err := steps.Inputs(e)
	if err != nil {
		return nil, err
	}
	k := p.Cluster
	ic := &ipi.InstallConfig{
		APIVersion: "v1",
		BaseDomain: k.BaseDomain,
		Metadata:   ipi.Metadata{Name: k.Name},
		Networking: ipi.ClusterNetworking(k.MachineNetwork, k.Secondary.MachineNetwork),
		// UPI: the installer makes no machines; compute replicas are 0
		// and the workers join by their CSRs.
		Compute:      []ipi.MachinePool{{Name: ocp.RoleWorker, Replicas: 0, Architecture: ipi.Architecture(k.Arch.Workers)}},
		ControlPlane: ipi.MachinePool{Name: ocp.RoleMaster, Replicas: k.Masters, Architecture: ipi.Architecture(k.Arch.Masters)},
		Platform:     ipi.Platform{None: &ipi.None{}},
		PullSecret:   pull,
		SSHKey:       key,
	}
	if p.Hybrid.SingleNode {
		ic.BootstrapInPlace = &ipi.BootstrapInPlace{InstallationDisk: p.Hybrid.InstallationDisk}
	}
	if errs := steps.ValidateInstallConfig(e, ic); len(errs) > 0 {
		return nil, errs
	}
	return ic, nil
}

// Cluster is the plan's cluster as the static pods and the ignition merge
// see it; sshKey is the key the nodes accept.
func Cluster(p *plan.Plan, sshKey string) upi.Cluster {
	k := p.Cluster
	h := p.Hybrid
	c := upi.Cluster{
		Name: k.Name, BaseDomain: k.BaseDomain, Family: k.Family, Secondary: k.Secondary,
		APIRouterID: h.APIRouterID, IngressRouterID: h.IngressRouterID,
		Upstream: h.Upstream, SSHKey: sshKey, SingleNode: h.SingleNode,
		Images: upi.Images{Keepalived: h.KeepalivedImage, CoreDNS: h.CoreDNSImage, HAProxy: h.HAProxyImage},
	}
	for _, n := range p.Nodes {
		c.Nodes = append(c.Nodes, upi.Node{Name: n.Name, Role: n.Role, IP: n.IP, SecondaryIP: n.SecondaryIP, MAC: n.MAC})
	}
	return c
}

// clusterOf is Cluster with the lab's SSH key (steps.Inputs).
func clusterOf(e *lab.Env) (upi.Cluster, error) {
	_, key, err := steps.Inputs(e)
	if err != nil {
		return upi.Cluster{}, err
	}
	return Cluster(e.Plan, key), nil
}

// installerFor runs openshift-install in the plan's installer directory,
// its lines under the action's status line.
func installerFor(e *lab.Env, step string) *upi.Installer {
	return &upi.Installer{
		Options: ipi.InstallerOptions{Binary: e.Plan.Installer.Binary, Dir: e.Plan.Installer.Dir},
		OnLine:  func(line string) { e.Rep.Note(step, line) },
	}
}

// createOnce runs an openshift-install create command (create) for the
// step unless what it writes (made) is there; changed: it ran.
func createOnce(ctx context.Context, e *lab.Env, step, made string, create func(*upi.Installer, context.Context) error) (changed bool, err error) {
	if lab.Exists(made) {
		return false, nil
	}
	if err := create(installerFor(e, step), ctx); err != nil {
		return false, steps.StopIfMissing(err)
	}
	return true, nil
}

// nodesOf returns the plan's nodes with one of the roles.
func nodesOf(p *plan.Plan, roles ...string) []plan.Node {
	var out []plan.Node
	for _, n := range p.Nodes {
		for _, r := range roles {
			if n.Role == r {
				out = append(out, n)
			}
		}
	}
	return out
}
