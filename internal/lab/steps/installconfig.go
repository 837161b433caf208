package steps

import (
	"bytes"
	"os"
	"path/filepath"

	"github.com/bmlab/bmlab/internal/ipi"
	"github.com/bmlab/bmlab/internal/ocp"
	"github.com/bmlab/bmlab/internal/plan"
)

// The adapter from the plan's facts to install-config generation's
// inputs (internal/ipi), and the writing of the files the installer reads,
// which the ipi, hybrid and agent modes share: the plan itself imports no
// installer.

// IPICluster is the plan's cluster as install-config generation takes it.
func IPICluster(p *plan.Plan) ipi.Cluster {
	c := p.Cluster
	return ipi.Cluster{
		Name: c.Name, BaseDomain: c.BaseDomain, Family: c.Family, Masters: c.Masters, Workers: c.Workers,
		ProvisioningNetwork: c.ProvisioningNetwork, ProvisioningNetworkCIDR: c.ProvisioningNetworkCIDR,
		ExternalBridge: c.ExternalBridge, ProvisioningBridge: c.ProvisioningBridge,
		ProvisioningNetworkInterface: c.ProvisioningNetworkInterface, ProvisioningDHCPRange: c.ProvisioningDHCPRange,
		BootstrapProvisioningIP: c.BootstrapProvisioningIP, ClusterProvisioningIP: c.ClusterProvisioningIP,
		BMCUsername: p.BMC.Username, BMCPassword: p.BMC.Password,
		// vbmcd's certificate is self-signed.
		BMCInsecure:      p.BMC.Kind != ocp.BMCIPMI && p.BMC.Scheme == "https" && !p.BMC.LabCA,
		Arbiters:         c.Arbiters,
		ControlPlaneArch: c.Arch.Masters, ComputeArch: c.Arch.Workers, ArbiterArch: c.Arch.Arbiter,
		Fencing:      p.Agent != nil && p.Agent.Fencing,
		PlatformNone: p.Agent != nil && p.Agent.Platform == "none",
		Secondary:    c.Secondary,
	}
}

// IPINodes are the nodes with a BMC, as install-config lists them.
func IPINodes(p *plan.Plan) []ipi.Node {
	var out []ipi.Node
	for _, n := range p.Nodes {
		if !n.Added && (n.Role == ocp.RoleMaster || n.Role == ocp.RoleWorker || n.Role == ocp.RoleArbiter) {
			out = append(out, ipi.Node{Name: n.Name, Role: n.Role, UUID: n.UUID, BootMAC: n.BootMAC, BMCAddress: n.BMC.Address,
				BMCUsername: n.BMC.Username, BMCPassword: n.BMC.Password, NetworkConfig: BondConfig(p, n)})
		}
	}
	return out
}

// BondConfig is a bonded node's nmstate state (install-config's hosts, a
// day-2 node's nodes-config): its
// NICs on the machine network bonded, the bond's addresses from the lab
// network's DHCP (its reservation is the first NIC's MAC, the bond's);
// nil without a bond.
func BondConfig(p *plan.Plan, n plan.Node) *ipi.NetworkConfig {
	if n.Bond == "" {
		return nil
	}
	names, macs := n.BondPorts()
	return ipi.DHCPBond(n.Bond, names, macs, p.Cluster.HasIPv4(), p.Cluster.HasIPv6())
}

// WriteFiles writes an installer file's data to each path (0600,
// atomically, its directory made 0750 when missing) unless every one holds
// it already: the file the installer reads and the lab's copy of what it
// read. It says whether it wrote.
func WriteFiles(data []byte, paths ...string) (bool, error) {
	same := true
	for _, p := range paths {
		if have, err := os.ReadFile(p); err != nil || !bytes.Equal(have, data) {
			same = false
		}
	}
	if same {
		return false, nil
	}
	for _, p := range paths {
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			return false, err
		}
		if err := ipi.WriteFile(p, data); err != nil {
			return false, err
		}
	}
	return true, nil
}
