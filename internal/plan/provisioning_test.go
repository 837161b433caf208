package plan

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestProvisioningWiring: the nodes of an IPI lab with a provisioning
// network have their NIC on it first, and boot from it (bootMACAddress);
// install-config's provisioning fields follow the profile (dev-scripts'
// and the installer's defaults); a Disabled lab's nodes have their one
// NIC on the machine network and the provisioning IPs are its 7th and
// 8th; the agent and hybrid modes add no provisioning NIC.
func TestProvisioningWiring(t *testing.T) {
	type nic struct{ Name, Network string }
	for _, tt := range []struct {
		name, lab, mode   string
		nics              []nic
		bootFirst         bool
		iface, bootstrap  string
		cluster, dhcp     string
		hostAddr, bridgeA string
	}{
		{"managed", "network: {provisioningNetwork: Managed}\n", ModeIPI, []nic{{"enp1s0", "provisioning"}, {"enp2s0", "baremetal"}},
			true, "enp1s0", "172.22.0.2", "172.22.0.3", "172.22.0.10-172.22.0.253", "172.22.0.1", "172.22.0.1/24"},
		{"unmanaged", "network: {provisioningNetwork: Unmanaged}\ncluster: {provisioningNetworkCIDR: 172.23.4.0/24, bootstrapProvisioningIP: 172.23.4.5}\n", ModeIPI,
			[]nic{{"enp1s0", "provisioning"}, {"enp2s0", "baremetal"}}, true, "enp1s0", "172.23.4.5", "172.23.4.3", "172.23.4.10-172.23.4.253", "172.23.4.1", "172.23.4.1/24"},
		{"managed-v6", "network: {provisioningNetwork: Managed}\ncluster: {ipFamily: v6}\n", ModeIPI, []nic{{"enp1s0", "provisioning"}, {"enp2s0", "baremetal"}},
			true, "enp1s0", "fd00:1101::2", "fd00:1101::3", "fd00:1101::a-fd00:1101::ffff:ffff:ffff:fffe", "fd00:1101::1", "fd00:1101::1/64"},
		{"disabled", "", ModeIPI, []nic{{"enp1s0", "baremetal"}}, false, "", "192.168.111.7", "192.168.111.8", "", "", ""},
		{"agent-managed", "network: {provisioningNetwork: Managed}\n", ModeAgent, []nic{{"enp1s0", "baremetal"}}, false, "", "172.22.0.2", "172.22.0.3", "172.22.0.10-172.22.0.253", "172.22.0.1", ""},
		{"hybrid", "cluster: {image: /i.qcow2}\n", ModeHybrid, []nic{{"enp1s0", "baremetal"}}, false, "", "", "", "", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := resolve(t, tt.lab, "tiny", tt.mode)
			for _, n := range p.Nodes {
				var got []nic
				for _, x := range n.NICs {
					got = append(got, nic{x.Name, x.Network + x.Bridge})
				}
				if d := cmp.Diff(tt.nics, got); d != "" {
					t.Errorf("%s's NICs (-want +got):\n%s", n.Name, d)
				}
				last := n.NICs[len(n.NICs)-1]
				if last.MAC != n.MAC || n.BootMAC != n.NICs[0].MAC || tt.bootFirst != (n.BootMAC != n.MAC) || tt.bootFirst != n.NICs[0].Provisioning {
					t.Errorf("%s: MAC %s, boot MAC %s, NICs %+v", n.Name, n.MAC, n.BootMAC, n.NICs)
				}
			}
			c := p.Cluster
			str := func(a netip.Addr) string {
				if !a.IsValid() {
					return ""
				}
				return a.String()
			}
			dhcp := ""
			if c.ProvisioningDHCPRange.Start.IsValid() {
				dhcp = c.ProvisioningDHCPRange.String()
			}
			got := []string{c.ProvisioningNetworkInterface, str(c.BootstrapProvisioningIP), str(c.ClusterProvisioningIP), dhcp, str(c.ProvisioningHostAddress)}
			want := []string{tt.iface, tt.bootstrap, tt.cluster, tt.dhcp, tt.hostAddr}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("cluster's provisioning facts (-want +got):\n%s", d)
			}
			var addrs []string
			for _, b := range p.Network.Topology.Bridges {
				if b.Name == c.ProvisioningBridge {
					for _, a := range b.Addresses {
						addrs = append(addrs, a.String())
					}
				}
			}
			if want := []string{tt.bridgeA}; (tt.bridgeA == "" && len(addrs) > 0) || (tt.bridgeA != "" && !cmp.Equal(want, addrs)) {
				t.Errorf("the provisioning bridge's addresses: %v, want %v", addrs, tt.bridgeA)
			}
			for _, h := range p.IPINodes() {
				if n, _ := p.Node(h.Name); h.BootMAC != n.BootMAC {
					t.Errorf("install-config's %s boots from %s, the plan's node from %s", h.Name, h.BootMAC, n.BootMAC)
				}
			}
		})
	}
}
