// Package ipimode is the ipi-baremetal install mode: OpenShift's
// installer-provisioned bare-metal flow. It adds to the steps every mode
// shares (internal/lab/steps: preflight, hosts, network, storage, nodes,
// bmcs) its install-config (platform baremetal, every host's BMC and boot
// MAC, checked against the installer's rules before anything is built)
// and the installer run (`openshift-install create cluster`, streamed).
//
// What it does not do: generate or check install-config itself
// (internal/ipi), or reach the platform (the steps and the provider do).
package ipimode

import (
	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/lab/steps"
	"github.com/bmlab/bmlab/internal/plan"
)

// Mode is the ipi-baremetal mode.
func Mode() lab.Mode { return lab.Mode{Name: Name, Traits: Traits, Actions: Actions} }

// Traits are the IPI mode's: nodes with BMCs, on the provisioning network
// when the lab has one (the installer's Ironic boots them there); three
// masters at least; bonds; the LLDP sender on.
var Traits = plan.Traits{BMCs: true, ProvisioningNetwork: true, Bonds: true, LLDP: true}

// Name is the mode's name (--mode, the lab file's mode:).
const Name = "ipi-baremetal"

// Actions are its steps, in order.
func Actions() []lab.Action {
	return []lab.Action{
		steps.Preflight{Inputs: func(e *lab.Env) error { _, err := InstallConfig(e); return err }},
		steps.Hosts{}, steps.Network{}, steps.Storage{}, steps.Nodes{}, steps.BMCs{},
		&lab.Step{StepName: "install-config", EnsureFunc: ensureInstallConfig, DeleteFunc: deleteInstallConfig},
		&lab.Step{StepName: "installer", EnsureFunc: ensureInstaller},
	}
}
