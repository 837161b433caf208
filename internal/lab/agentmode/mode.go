package agentmode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/bmlab/bmlab/internal/agent"
	"github.com/bmlab/bmlab/internal/ipi"
	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/lab/steps"
	"github.com/bmlab/bmlab/internal/ocp"
	"github.com/bmlab/bmlab/internal/personality"
	"github.com/bmlab/bmlab/internal/plan"
)

// Mode is the agent mode.
func Mode() lab.Mode { return lab.Mode{Name: Name, Traits: Traits, Actions: Actions} }

// Traits are the agent mode's: nodes with BMCs, booted from the agent ISO
// through their virtual media over the machine network; a single node (its
// workers added afterwards), a two-node control plane (fencing, arbiter)
// and bonds; the LLDP sender on.
var Traits = plan.Traits{BMCs: true, SingleNode: true, TwoNode: true, Bonds: true, AgentISO: true, LLDP: true}

// Name is the mode's name (--mode, the lab file's mode:).
const Name = "agent"

// Actions are OpenShift's agent-based installer on the lab: the nodes and
// their BMCs as for IPI, then install-config and agent-config, the ISO
// (`agent create image`), every node booted from it through its BMC's
// virtual media, and the installer's waits.
func Actions() []lab.Action {
	return []lab.Action{
		steps.Preflight{Check: check, Inputs: func(e *lab.Env) error { _, _, err := AgentConfigs(e); return err }},
		steps.Hosts{}, steps.Network{}, steps.Storage{}, steps.Nodes{}, steps.BMCs{},
		&lab.Step{StepName: "install-config", EnsureFunc: ensureConfigs, DeleteFunc: deleteConfigs},
		&lab.Step{StepName: "image", EnsureFunc: ensureImage},
		&lab.Step{StepName: "media", EnsureFunc: ensureMedia, DeleteFunc: deleteMedia},
		&lab.Step{StepName: "bootstrap-complete", EnsureFunc: ensureBootstrap, DeleteFunc: deleteBootstrap},
		&lab.Step{StepName: "install-complete", EnsureFunc: ensureInstallComplete, DeleteFunc: deleteInstallComplete},
	}
}

// check is the agent mode's own input rules: the workers' architecture
// and where each node's BMC hangs its virtual media.
func check(e *lab.Env) error {
	if err := workersArch(e); err != nil {
		return err
	}
	return mediaPlaces(e)
}

// workersArch is the agent mode's rule that no installer file shows: `agent
// create image` makes one ISO, for the control plane's architecture
// (InfraEnv's cpuArchitecture is controlPlane.architecture), so workers of
// another architecture cannot boot it at install time; they join on day 2
// with the ISO the cluster makes for them (nodes-config.yaml's
// cpuArchitecture).
func workersArch(e *lab.Env) error {
	k := e.Plan.Cluster
	if k.Arch.Mixed() && k.Workers > 0 {
		return fmt.Errorf("cluster.workers.arch: %d %s workers cannot boot the agent ISO, which `agent create image` makes for the control plane's architecture (%s) only; install with cluster.workers.count: 0, then add them on day 2: labctl add-node --count %d (their ISO is made for %s: nodes-config.yaml's cpuArchitecture)",
			k.Workers, k.Arch.Workers, k.Arch.Masters, k.Workers, k.Arch.Workers)
	}
	return nil
}

// mediaPlaces refuses nodes whose BMC personality hangs no virtual media
// under the System: the media step inserts the agent ISO there.
func mediaPlaces(e *lab.Env) error {
	for _, n := range e.Plan.Nodes {
		p, err := personality.Lookup(n.BMC.Personality)
		if err != nil {
			return err
		}
		if !p.MediaUnder(false) {
			return fmt.Errorf("%s: %s serves virtual media under the Manager only, and the agent mode inserts its ISO through the System's VirtualMedia; use idrac10 or generic for node %s, or another mode", n.BMC.PersonalityField, p.Name, n.Name)
		}
	}
	return nil
}

// AgentConfigs builds and validates the agent mode's install-config and
// agent-config from the plan (Configs, with the lab's inputs and CA).
func AgentConfigs(e *lab.Env) (*ipi.InstallConfig, *agent.Config, error) {
	p := e.Plan
	pull, key, err := steps.Inputs(e)
	if err != nil {
		return nil, nil, err
	}
	ic, ac, err := Configs(p, steps.InstallCluster(p), pull, key)
	if err != nil {
		return nil, nil, err
	}
	errs := steps.ValidateInstallConfig(e, ic)
	for _, fe := range agent.Validate(ac, p.Cluster.MachineNetwork) {
		fe.Field = "agent-config " + fe.Field
		errs = append(errs, fe)
	}
	if len(errs) > 0 {
		return nil, nil, errs
	}
	return ic, ac, nil
}

// Configs are the install-config and agent-config the agent mode writes
// for the plan, unvalidated: install-config for the installer's cluster k
// (steps.InstallCluster, or steps.IPICluster without the lab CA's file)
// with no provisioning network and no host network, which agent-config
// carries. The golden files of internal/agent pin its output.
func Configs(p *plan.Plan, k ipi.Cluster, pull, key string) (*ipi.InstallConfig, *agent.Config, error) {
	ic, err := ipi.Generate(k, steps.IPINodes(p), pull, key)
	if err != nil {
		return nil, nil, err
	}
	if bm := ic.Platform.BareMetal; bm != nil {
		// The agent boots the hosts itself: no provisioning network, and
		// Ironic only for day 2 (the BMCs stay in the hosts).
		bm.ProvisioningNetwork = ocp.ProvisioningDisabled
		bm.ProvisioningBridge, bm.ProvisioningNetworkCIDR = "", ""
		bm.ProvisioningNetworkInterface, bm.ProvisioningDHCPRange = "", ""
		bm.BootstrapProvisioningIP, bm.ClusterProvisioningIP = "", ""
		// A host's network (a bond) is agent-config's, which the agent
		// applies before anything else.
		for i := range bm.Hosts {
			bm.Hosts[i].NetworkConfig = nil
		}
	}
	return ic, agent.Generate(Cluster(p)), nil
}

// ensureConfigs writes install-config.yaml and agent-config.yaml into the
// installer's directory, and copies in the lab's state directory: the
// installer consumes both, the copies say what it consumed.
func ensureConfigs(_ context.Context, e *lab.Env) (bool, error) {
	p := e.Plan
	ic, ac, err := AgentConfigs(e)
	if err != nil {
		return false, err
	}
	icData, err := ipi.Marshal(ic)
	if err != nil {
		return false, err
	}
	acData, err := agent.Marshal(ac)
	if err != nil {
		return false, err
	}
	changed := false
	for _, f := range []struct{ file, copy string }{{p.Paths.InstallConfig, p.Paths.InstallConfigCopy}, {p.Paths.AgentConfig, p.Paths.AgentConfigCopy}} {
		want := icData
		if f.file == p.Paths.AgentConfig {
			want = acData
		}
		if lab.Exists(p.Paths.AgentISO) {
			// The image holds what the installer consumed: it cannot change.
			if have, err := os.ReadFile(f.copy); err != nil || string(have) != string(want) {
				return changed, fmt.Errorf("the lab file changed after openshift-install made the agent image from %s (%v); the image cannot take a new one: `labctl down`, then up again", filepath.Base(f.file), err)
			}
			continue
		}
		wrote, err := steps.WriteFiles(want, f.file, f.copy)
		if err != nil {
			return changed, err
		}
		if wrote {
			e.Rep.Note("install-config", "wrote "+f.file)
			changed = true
		}
	}
	return changed, nil
}

// deleteConfigs removes the installer's directory (its image, auth/ and state
// belong to the cluster down removes) and the copies.
func deleteConfigs(_ context.Context, e *lab.Env) error {
	p := e.Plan
	dir := ""
	if p.Mode == Name {
		dir = p.Installer.Dir
	}
	return errors.Join(lab.RemoveFiles([]string{p.Paths.AgentConfigCopy, p.Paths.AgentConfig, p.Paths.MediaBooted, p.Paths.AddedNodes}, dir),
		lab.RemoveFiles(nil, p.Paths.NodeImageDir))
}

// ensureImage runs `openshift-install agent create image` once: the ISO
// every node boots.
func ensureImage(ctx context.Context, e *lab.Env) (bool, error) {
	if lab.Exists(e.Plan.Paths.AgentISO) {
		return false, nil
	}
	if err := agentInstaller(e, "image").Run(ctx, agent.CreateImage); err != nil {
		return false, steps.StopIfMissing(err)
	}
	if !lab.Exists(e.Plan.Paths.AgentISO) {
		return true, fmt.Errorf("openshift-install agent create image finished but wrote no %s", e.Plan.Paths.AgentISO)
	}
	e.Rep.Note("image", "wrote "+e.Plan.Paths.AgentISO)
	return true, nil
}

func agentInstaller(e *lab.Env, step string) *agent.Installer {
	return &agent.Installer{
		Options: ipi.InstallerOptions{Binary: e.Plan.Installer.Binary, Dir: e.Plan.Installer.Dir},
		OnLine:  func(line string) { e.Rep.Note(step, line) },
	}
}
