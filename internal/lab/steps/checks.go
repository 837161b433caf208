package steps

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/bmlab/bmlab/internal/ipi"
	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/ocp"
	"github.com/bmlab/bmlab/internal/plan"
)

// CheckInputs applies, before anything is built, every rule the run's
// installer files must pass: the installer's own checks of what the mode
// will write (inputs: install-config and the mode's other files, with the
// plan's real nodes, MACs, UUIDs and BMC addresses, and the input files,
// pull secret and SSH key), and what the platform would refuse in the
// lab's own network. Every problem is reported at once, each named by the
// lab file's field and worded with what to write instead; the installer's
// own field name follows. A spoke of a lab over several hosts writes no
// installer file.
func CheckInputs(e *lab.Env, inputs func(*lab.Env) error) error {
	p := e.Plan
	if p.Spoke != "" {
		return nil
	}
	if err := installerInputs(e, inputs); err != nil {
		return err
	}
	if p.Network.NAT != nil {
		// What libvirt would be given for the lab's own network.
		if err := e.Host.Validate(NATObject(p)); err != nil {
			return fmt.Errorf("the lab's NAT network would be refused; nothing was created:\n  %w (cluster.machineNetwork, dhcpRange, apiVIP, ingressVIP)", err)
		}
	}
	return nil
}

// installerInputs is CheckInputs' check of the installer's files.
func installerInputs(e *lab.Env, inputs func(*lab.Env) error) error {
	p := e.Plan
	if inputs == nil {
		return nil
	}
	err := inputs(e)
	if err == nil {
		return nil
	}
	var list ipi.ErrorList
	if !errors.As(err, &list) {
		return fmt.Errorf("the lab file's inputs; nothing was created:\n  %w", err)
	}
	// One message for a rule that several nodes break alike.
	var msgs []string
	var counts []int
	seen := map[string]int{}
	for _, fe := range list {
		key := hostIndex.ReplaceAllString(fe.Field, "hosts[]") + "\x00" + fe.Detail
		if i, ok := seen[key]; ok && fe.Detail != "" {
			counts[i]++
			continue
		}
		seen[key] = len(msgs)
		msgs, counts = append(msgs, labMessage(p, fe)), append(counts, 1)
	}
	for i, n := range counts {
		if n > 1 {
			msgs[i] += fmt.Sprintf(" (%d nodes alike)", n)
		}
	}
	return fmt.Errorf("the lab file would give the installer files it refuses; nothing was created:\n  %s", strings.Join(msgs, "\n  "))
}

var hostIndex = regexp.MustCompile(`^platform\.baremetal\.hosts\[(\d+)\]`)

// labMessage words one installer error for the lab file: the field that
// sets the value, the installer's rule, and the fix.
func labMessage(p *plan.Plan, fe *ipi.FieldError) string {
	field, fix := fe.Field, ""
	switch f := fe.Field; {
	case f == "platform.baremetal.apiVIPs":
		field, fix = "cluster.apiVIP", "pick a free address inside cluster.machineNetwork, outside cluster.dhcpRange"
	case f == "platform.baremetal.ingressVIPs":
		field, fix = "cluster.ingressVIP", "pick a free address inside cluster.machineNetwork, outside cluster.dhcpRange"
	case strings.HasSuffix(f, ".bmc") && hostIndex.MatchString(f) && strings.Contains(fe.Detail, "requires provisioning network"):
		field, fix = "cluster.bmc.kind", "use redfish-virtualmedia (boots from virtual media), or set network.provisioningNetwork: Managed"
	case hostIndex.MatchString(f) && strings.Contains(f, ".bmc"):
		field, fix = "cluster.bmc", "check cluster.bmc.kind, address and port"
	case hostIndex.MatchString(f):
		field = "the nodes (" + f + ")"
	case f == "platform.baremetal.hosts":
		field, fix = "cluster.masters.count and cluster.workers.count", "every replica needs a node"
	case f == "platform.baremetal.provisioningNetwork":
		field = "network.provisioningNetwork"
	case f == "platform.baremetal.provisioningNetworkCIDR":
		field, fix = "cluster.provisioningNetworkCIDR", "pick a subnet apart from cluster.machineNetwork"
	case f == "platform.baremetal.bootstrapProvisioningIP" || f == "platform.baremetal.clusterProvisioningIP":
		field = "cluster." + strings.TrimPrefix(f, "platform.baremetal.")
		fix = "set " + field + " to a free address of cluster.provisioningNetworkCIDR outside cluster.provisioningDHCPRange (the defaults are its .2 and .3)"
		if p.Cluster.ProvisioningNetwork == ocp.ProvisioningDisabled {
			fix = "set " + field + " to a free address of cluster.machineNetwork outside cluster.dhcpRange and off the VIPs (the defaults are its 7th and 8th addresses, dev-scripts'), or move cluster.dhcpRange"
		}
	case f == "platform.baremetal.provisioningDHCPRange":
		field, fix = "cluster.provisioningDHCPRange", "a range inside cluster.provisioningNetworkCIDR"
	case f == "platform.baremetal.provisioningBridge":
		field, fix = "network.bridges", "add a bridge named provisioning"
	case f == "platform.baremetal.externalBridge":
		field = "network.bridges"
	case f == "controlPlane.replicas":
		field = "cluster.masters.count"
	case f == "controlPlane.architecture":
		field, fix = "cluster.masters.arch", "an installer whose release payload has this architecture, or a multi-arch one (openshift-install version: release architecture)"
	case f == "arbiter.architecture":
		field = "cluster.arbiter.arch"
	case strings.HasPrefix(f, "compute") && strings.HasSuffix(f, ".architecture"):
		field = "cluster.workers.arch"
		switch {
		case strings.Contains(fe.Detail, "release payload"):
			fix = "a multi-arch release payload (openshift-install version says release architecture multi), or workers of the control plane's architecture"
		case strings.Contains(fe.Detail, "heteregeneous"):
			fix = "workers of the masters' architecture (cluster.masters.arch): this platform has no mixed clusters"
		default:
			fix = "x86_64 masters with aarch64 workers, or one architecture for both"
		}
	case strings.HasPrefix(f, "compute"):
		field = "cluster.workers.count"
	case f == "pullSecret":
		field, fix = "cluster.pullSecret (or --pull-secret), the file "+p.Cluster.PullSecret, "save the pull secret from "+ipi.PullSecretURL+" there, as it is downloaded (JSON)"
	case f == "sshKey":
		field, fix = "cluster.sshKey (or --ssh-key)", "name a public key file (ssh-ed25519 … or ssh-rsa …)"
	case f == "metadata.name":
		field, fix = "cluster.clusterName", "lower-case letters, digits and inner dashes"
	case f == "baseDomain" || strings.HasPrefix(f, "baseDomain"):
		field = "cluster.baseDomain"
	case strings.HasPrefix(f, "networking.machineNetwork"):
		field = "cluster.machineNetwork"
	}
	msg := fmt.Sprintf("%s: %s", field, strings.TrimPrefix(fe.Error(), fe.Field+": "))
	if field != fe.Field {
		msg += " (install-config's " + fe.Field + ")"
	}
	if fix != "" {
		msg += "; fix: " + fix
	}
	return msg
}
