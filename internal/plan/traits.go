package plan

import (
	"fmt"
	"slices"
	"strings"
)

// Traits are what an install mode says of its labs. The plan reads them,
// never the mode's name, so a new mode that declares its traits resolves
// without an edit here. Each mode declares its own (lab.Mode.Traits, in
// its package); labctl hands the plan the list (Options.Modes).
type Traits struct {
	// BMCs: the mode's nodes have BMCs (vbmcd, cluster.bmc, bmc.address
	// in install-config); without, vbmcd is not run and cluster.bmc.network
	// is refused.
	BMCs bool `json:"bmcs,omitempty"`
	// ProvisioningNetwork: the nodes have a NIC on the provisioning
	// network when the lab has one (the installer's Ironic PXE-boots them
	// there), and a Disabled network keeps its provisioning addresses.
	ProvisioningNetwork bool `json:"provisioningNetwork,omitempty"`
	// SingleNode: the mode installs a single-node cluster (one master).
	SingleNode bool `json:"singleNode,omitempty"`
	// SingleNodeWorkers: a single node may have workers at install (else
	// they are added afterwards).
	SingleNodeWorkers bool `json:"singleNodeWorkers,omitempty"`
	// TwoNode: the mode installs a two-node control plane, with fencing or
	// an arbiter.
	TwoNode bool `json:"twoNode,omitempty"`
	// Bonds: the mode bonds a node's NICs (cluster.*.bond).
	Bonds bool `json:"bonds,omitempty"`
	// BootImage: the nodes boot from the lab file's RHCOS image
	// (cluster.image), configured by their ignition; the plan resolves its
	// Hybrid section, and a bootstrap node unless the cluster is a single
	// node.
	BootImage bool `json:"bootImage,omitempty"`
	// AgentISO: the nodes boot the agent ISO; the plan resolves its Agent
	// section, and an IPv6-only lab needs static addresses.
	AgentISO bool `json:"agentISO,omitempty"`
	// LLDP: the lab's LLDP sender runs unless the lab file turns it off
	// (network.lldp); without, only when it turns it on.
	LLDP bool `json:"lldp,omitempty"`
}

// ModeSpec is an install mode as the plan knows it: its name and its
// traits.
type ModeSpec struct {
	Name   string `json:"name"`
	Traits Traits `json:"traits"`
}

// traitsOf are the traits of the mode named name in modes (the zero
// Traits for a mode labctl does not know: opening the lab refuses it).
func traitsOf(modes []ModeSpec, name string) Traits {
	if i := slices.IndexFunc(modes, func(m ModeSpec) bool { return m.Name == name }); i >= 0 {
		return modes[i].Traits
	}
	return Traits{}
}

// modesWith names the modes, in the list's order, that have a trait.
func modesWith(modes []ModeSpec, has func(Traits) bool) []string {
	var names []string
	for _, m := range modes {
		if has(m.Traits) {
			names = append(names, m.Name)
		}
	}
	return names
}

// firstOr is the last of names, the others as an alternative in
// brackets: "agent (or hybrid)".
func firstOr(names []string) string {
	switch len(names) {
	case 0:
		return "no mode"
	case 1:
		return names[0]
	}
	return fmt.Sprintf("%s (or %s)", names[len(names)-1], strings.Join(names[:len(names)-1], ", "))
}
