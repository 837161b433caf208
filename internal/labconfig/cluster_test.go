package labconfig

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/netaddr"
)

func intp(n int) *int { return &n }

func TestClusterDefaultsAreTheSeed(t *testing.T) {
	yes := true
	want := Cluster{
		Name:           "seed",
		BaseDomain:     "bmlab.test",
		Masters:        Role{Count: intp(3), VCPUs: 4, MemoryMiB: 16384, DiskGiB: 120, Arch: ArchX86_64},
		Workers:        Role{Count: intp(2), VCPUs: 2, MemoryMiB: 8192, DiskGiB: 120, Arch: ArchX86_64},
		IPFamily:       "v4",
		MachineNetwork: netip.MustParsePrefix("192.168.111.0/24"),
		DHCPRange:      netaddr.Range{Start: netip.MustParseAddr("192.168.111.20"), End: netip.MustParseAddr("192.168.111.60")},
		APIVIP:         netip.MustParseAddr("192.168.111.5"),
		IngressVIP:     netip.MustParseAddr("192.168.111.4"),
		BMC: BMC{Kind: "redfish-virtualmedia", Address: "192.168.111.1", RedfishPort: 8000, IPMIPortBase: 6230,
			Username: "admin", Password: "password", TLS: &yes},
		PullSecret: "pull-secret.json",
		Hybrid: Hybrid{HybridImages: HybridImages{KeepalivedImage: DefaultKeepalivedImage, CoreDNSImage: DefaultCoreDNSImage, HAProxyImage: DefaultHAProxyImage,
			ApproverImage: DefaultApproverImage}, HostsFile: "/etc/hosts"},
		Agent: Agent{MediaPort: DefaultMediaPort},
	}
	if d := cmp.Diff(want, Default().Cluster, netips); d != "" {
		t.Errorf("default cluster (-want +got):\n%s", d)
	}
}

func TestParseCluster(t *testing.T) {
	no := false
	tests := []struct {
		name string
		yaml string
		want func(*Cluster)
	}{{
		name: "compact cluster, ipmi, managed provisioning",
		yaml: `network: {provisioningNetwork: Managed}
cluster:
  clusterName: c1
  workers: {count: 0}
  masters: {extraDisks: [10, 20], personality: ilo6, personalities: [idrac9, '', generic]}
  bmc: {kind: ipmi, tls: false}
`,
		want: func(c *Cluster) {
			c.Name = "c1"
			c.Workers.Count = intp(0)
			c.Masters.ExtraDisks = []int{10, 20}
			c.Masters.Personality, c.Masters.Personalities = "ilo6", []string{"idrac9", "", "generic"}
			c.BMC.Kind = "ipmi"
			c.BMC.TLS = &no
			c.ProvisioningNetworkCIDR = netip.MustParsePrefix("172.22.0.0/24")
			// The installer's defaults: .2 and .3, the range from .10 to
			// the last but one.
			c.ProvisioningDHCPRange = netaddr.Range{Start: netip.MustParseAddr("172.22.0.10"), End: netip.MustParseAddr("172.22.0.253")}
			c.BootstrapProvisioningIP, c.ClusterProvisioningIP = netip.MustParseAddr("172.22.0.2"), netip.MustParseAddr("172.22.0.3")
		},
	}, {
		name: "an IPv6 provisioning network, its addresses given, a BMC network routed to it",
		yaml: `network: {provisioningNetwork: Unmanaged}
cluster:
  ipFamily: v6
  provisioningDHCPRange: {start: "fd00:1101::100", end: "fd00:1101::1ff"}
  clusterProvisioningIP: "fd00:1101::9"
  bmc: {network: "fd2e:6f44:5dd8:c957::/120", routes: [machine, provisioning]}
`,
		want: func(c *Cluster) {
			c.IPFamily = IPFamilyV6
			c.MachineNetwork, c.DHCPRange, c.APIVIP, c.IngressVIP = DefaultMachineNetworkV6, DefaultDHCPRangeV6, DefaultAPIVIPV6, DefaultIngressVIPV6
			c.BMC.Address = "fd2e:6f44:5dd8:c956::1"
			c.BMC.Network, c.BMC.Routes = netip.MustParsePrefix("fd2e:6f44:5dd8:c957::/120"), []string{"machine", "provisioning"}
			c.ProvisioningNetworkCIDR = DefaultProvisioningNetworkCIDRV6
			c.ProvisioningDHCPRange = netaddr.Range{Start: netip.MustParseAddr("fd00:1101::100"), End: netip.MustParseAddr("fd00:1101::1ff")}
			c.BootstrapProvisioningIP, c.ClusterProvisioningIP = netip.MustParseAddr("fd00:1101::2"), netip.MustParseAddr("fd00:1101::9")
		},
	}, {
		name: "a BMC network alone is routed to the machine network",
		yaml: "cluster: {bmc: {network: 192.168.125.0/24}}\n",
		want: func(c *Cluster) {
			c.BMC.Network, c.BMC.Routes = netip.MustParsePrefix("192.168.125.0/24"), []string{"machine"}
		},
	}, {
		name: "another machine network takes none of the seed's addresses",
		yaml: `cluster:
  machineNetwork: 10.10.0.0/24
  apiVIP: 10.10.0.5
  ingressVIP: 10.10.0.6
`,
		want: func(c *Cluster) {
			c.MachineNetwork = netip.MustParsePrefix("10.10.0.0/24")
			c.DHCPRange = netaddr.Range{}
			c.APIVIP = netip.MustParseAddr("10.10.0.5")
			c.IngressVIP = netip.MustParseAddr("10.10.0.6")
			c.BMC.Address = "10.10.0.1"
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.yaml))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			want := Default().Cluster
			tt.want(&want)
			if d := cmp.Diff(want, got.Cluster, netips); d != "" {
				t.Errorf("cluster (-want +got):\n%s", d)
			}
		})
	}
}

func TestParseClusterErrorsNameTheField(t *testing.T) {
	tests := []struct{ yaml, want string }{
		{"cluster:\n  mastrs: {}\n", `cluster.mastrs (line 2): unknown key; did you mean "masters"?`},
		{"cluster:\n  masters: {count: 0}\n", "cluster.masters.count: 0 is less than 1"},
		{"cluster:\n  workers: {vcpus: -1}\n", "cluster.workers: vcpus -1, memoryMiB 8192 and diskGiB 120 must all be positive"},
		{"cluster:\n  workers: {extraDisks: [0]}\n", "cluster.workers.extraDisks[0]: 0 GiB must be positive"},
		{"cluster:\n  machineNetwork: 10.0.0.1/24\n  apiVIP: 10.0.0.5\n  ingressVIP: 10.0.0.6\n", "cluster.machineNetwork: 10.0.0.1/24 has host bits set; use 10.0.0.0/24"},
		{"cluster:\n  machineNetwork: 10.0.0.0/24\n", "cluster.apiVIP and ingressVIP: both must be set"},
		{"cluster:\n  dhcpRange: {start: 192.168.111.60, end: 192.168.111.20}\n", "cluster.dhcpRange: end 192.168.111.20 is before start 192.168.111.60"},
		{"cluster:\n  dhcpRange: {start: 192.168.112.2, end: 192.168.112.9}\n", "cluster.dhcpRange: 192.168.112.2-192.168.112.9 is not inside machineNetwork 192.168.111.0/24"},
		{"cluster:\n  provisioningNetworkCIDR: 172.22.0.0/24\n", "cluster.provisioningNetworkCIDR: 172.22.0.0/24 is set but network.provisioningNetwork is Disabled"},
		{"cluster:\n  apiVIP: 192.168.111.30\n", "cluster.apiVIP: 192.168.111.30 is inside dhcpRange 192.168.111.20-192.168.111.60, where DHCP may lease it to a node"},
		{"cluster:\n  apiVIP: 10.1.1.1\n", "cluster.apiVIP: 10.1.1.1 is outside machineNetwork 192.168.111.0/24"},
		{"cluster:\n  ingressVIP: 192.168.111.5\n", "cluster.ingressVIP: 192.168.111.5 is the apiVIP too"},
		{"cluster:\n  apiVIP: 192.168.111.1\n", "cluster.apiVIP: 192.168.111.1 is the lab host's own address on machineNetwork"},
		{"network: {provisioningNetwork: Managed}\ncluster:\n  provisioningNetworkCIDR: 192.168.111.128/25\n", "cluster.provisioningNetworkCIDR: 192.168.111.128/25 overlaps machineNetwork 192.168.111.0/24"},
		{"cluster:\n  masters: {count: 2}\n", "cluster.masters.count: 2 control-plane nodes are valid in OpenShift only with fencing through their BMCs or an arbiter node; set cluster.fencing: true or cluster.arbiter: {count: 1}"},
		{"cluster:\n  masters: {count: 2}\n  fencing: true\n  arbiter: {count: 1}\n", "cluster.fencing: a two-node control plane has fencing or an arbiter, not both"},
		{"cluster:\n  arbiter: {count: 1}\n", "cluster.arbiter.count: an arbiter goes with exactly 2 masters (masters.count is 3)"},
		{"cluster:\n  fencing: true\n", "cluster.fencing: fencing goes with exactly 2 masters (masters.count is 3)"},
		{"cluster:\n  bmc: {address: 192.168.111.300}\n", `cluster.bmc.address: "192.168.111.300" is not an IP address`},
		{"cluster:\n  bmc: {address: -bad-.lab}\n", `cluster.bmc.address: "-bad-.lab" is neither an IP address nor a DNS name`},
		{"cluster:\n  bmc: {kind: idrac}\n", `cluster.bmc.kind: "idrac" is not one of`},
		{"cluster:\n  workers: {arch: arm64}\n", `cluster.workers.arch: "arm64" is install-config's name; the lab file names an architecture as libvirt does: x86_64 or aarch64 (arm64 is aarch64)`},
		{"cluster:\n  masters: {arch: riscv64}\n", `cluster.masters.arch: "riscv64" is not one of x86_64 (default), aarch64`},
		{"cluster:\n  bmc: {redfishPort: 70000}\n", "cluster.bmc.redfishPort: 70000 is not a port"},
		{"cluster:\n  masters: {personality: idrac7}\n", `cluster.masters.personality: personality "idrac7": want one of generic, idrac9, idrac10, ilo6, supermicro-x13`},
		{"cluster:\n  masters: {personalities: [idrac9, '', dell]}\n", `cluster.masters.personalities[2]: personality "dell": want one of generic, idrac9, idrac10, ilo6, supermicro-x13`},
		{"cluster:\n  workers: {count: 1, personalities: [ilo6, ilo6]}\n", "cluster.workers.personalities: 2 personalities for 1 nodes; give one per node at most (an empty entry, or a node past the list, takes workers.personality)"},
		{"cluster:\n  masters: {count: 2}\n  arbiter: {count: 1, personality: hpe}\n", `cluster.arbiter.personality: personality "hpe": want one of`},
		{"cluster:\n  bmc: {kind: redfish, network: 192.168.125.0/24}\n  masters: {personalities: [ilo6]}\n", "cluster.masters.personalities[0]: ilo6 with bmc.kind redfish is enrolled as ilo5://ADDR (the vendor's network boot driver), which boots the node from the provisioning network, and network.provisioningNetwork is Disabled; set network.provisioningNetwork: Managed (or Unmanaged), or use bmc.kind: redfish-virtualmedia"},
		{"network: {provisioningNetwork: Managed}\ncluster:\n  bmc: {kind: redfish}\n  workers: {count: 1, personality: ilo6}\n", "cluster.workers.personality: ilo6 with bmc.kind redfish is enrolled as ilo5://ADDR (the vendor's network boot driver), which reaches the BMC at an address of its own, and the lab has no BMC network; set cluster.bmc.network"},
		{"network: {provisioningNetwork: Managed}\ncluster:\n  bmc: {kind: redfish, tls: false, network: 192.168.125.0/24}\n  masters: {personality: ilo6}\n", "cluster.masters.personality: ilo6 with bmc.kind redfish is enrolled as ilo5://ADDR (the vendor's network boot driver), which speaks HTTPS only, and cluster.bmc.tls is false; drop tls: false"},
		{"cluster:\n  bmc: {kind: ipmi, ipmiPortBase: 65534}\n", "cluster.bmc.ipmiPortBase: 65534 leaves no port for every node (the last would be 65538)"},
		{"network: {provisioningNetwork: Managed}\ncluster:\n  provisioningDHCPRange: {start: 172.22.1.10, end: 172.22.1.20}\n", "cluster.provisioningDHCPRange: 172.22.1.10-172.22.1.20 is not inside provisioningNetworkCIDR 172.22.0.0/24 (the installer's rule"},
		{"network: {provisioningNetwork: Managed}\ncluster:\n  provisioningDHCPRange: {start: 172.22.0.30, end: 172.22.0.20}\n", "cluster.provisioningDHCPRange: end 172.22.0.20 is before start 172.22.0.30"},
		{"network: {provisioningNetwork: Managed}\ncluster:\n  provisioningDHCPRange: {start: 172.22.0.1, end: 172.22.0.20}\n", "cluster.provisioningDHCPRange: 172.22.0.1-172.22.0.20 holds 172.22.0.1, the lab host's address"},
		{"network: {provisioningNetwork: Managed}\ncluster:\n  provisioningDHCPRange: {start: 172.22.0.10}\n", "cluster.provisioningDHCPRange: set both start and end"},
		{"cluster:\n  provisioningDHCPRange: {start: 172.22.0.10, end: 172.22.0.20}\n", "cluster.provisioningDHCPRange: 172.22.0.10-172.22.0.20 is set but network.provisioningNetwork is Disabled"},
		{"network: {provisioningNetwork: Managed}\ncluster:\n  bootstrapProvisioningIP: 192.168.111.9\n", "cluster.bootstrapProvisioningIP: 192.168.111.9 is not in provisioningNetworkCIDR 172.22.0.0/24 (the installer's rule)"},
		{"network: {provisioningNetwork: Managed}\ncluster:\n  clusterProvisioningIP: 172.22.0.50\n", "cluster.clusterProvisioningIP: 172.22.0.50 is inside provisioningDHCPRange 172.22.0.10-172.22.0.253 (the installer's rule"},
		{"network: {provisioningNetwork: Managed}\ncluster:\n  bootstrapProvisioningIP: 172.22.0.1\n", "cluster.bootstrapProvisioningIP: 172.22.0.1 is the lab host's own address on the provisioning network"},
		{"network: {provisioningNetwork: Managed}\ncluster:\n  clusterProvisioningIP: 172.22.0.2\n", "cluster.clusterProvisioningIP: 172.22.0.2 is the bootstrapProvisioningIP too"},
		{"cluster:\n  bootstrapProvisioningIP: 172.22.0.2\n", "cluster.bootstrapProvisioningIP: 172.22.0.2 is outside machineNetwork 192.168.111.0/24; with network.provisioningNetwork Disabled"},
		{"cluster:\n  clusterProvisioningIP: 192.168.111.30\n", "cluster.clusterProvisioningIP: 192.168.111.30 is inside dhcpRange 192.168.111.20-192.168.111.60"},
		{"cluster:\n  clusterProvisioningIP: 192.168.111.5\n", "cluster.clusterProvisioningIP: 192.168.111.5 is a VIP"},
		{"cluster:\n  bootstrapProvisioningIP: 192.168.111.1\n", "cluster.bootstrapProvisioningIP: 192.168.111.1 is the lab host's own address on machineNetwork"},
		{"cluster:\n  bmc: {routes: [machine]}\n", "cluster.bmc.routes: [machine] is set but there is no BMC network (cluster.bmc.network)"},
		{"cluster:\n  bmc: {network: 192.168.125.0/24, routes: [provisioning]}\n", "cluster.bmc.routes: [0] \"provisioning\": the lab has no provisioning network"},
		{"network: {provisioningNetwork: Managed}\ncluster:\n  bmc: {network: 192.168.125.0/24, routes: [provisioning]}\n", "cluster.bmc.routes: [provisioning] leaves out machine"},
		{"cluster:\n  bmc: {network: 192.168.125.0/24, routes: [machine, internet]}\n", "cluster.bmc.routes: [1] \"internet\" is not one of machine, provisioning"},
		{"cluster:\n  bmc: {network: 192.168.125.0/24, routes: [machine, machine]}\n", "cluster.bmc.routes: [1] \"machine\" is listed twice"},
	}
	parseRefuses(t, tests)
}

func TestApplyProfile(t *testing.T) {
	c, err := Parse([]byte("cluster:\n  workers: {count: 1, extraDisks: [50]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyProfile(ProfileTiny); err != nil {
		t.Fatal(err)
	}
	want := Default().Cluster
	want.Masters = Role{Count: intp(3), VCPUs: 1, MemoryMiB: 512, DiskGiB: 2, Arch: ArchX86_64}
	want.Workers = Role{Count: intp(1), VCPUs: 1, MemoryMiB: 256, DiskGiB: 2, Arch: ArchX86_64}
	if d := cmp.Diff(want, c.Cluster, netips); d != "" {
		t.Errorf("tiny (-want +got):\n%s", d)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate after tiny: %v", err)
	}
	d := Default()
	if err := d.ApplyProfile(""); err != nil || !cmp.Equal(d, Default(), netips) {
		t.Errorf(`ApplyProfile("") = %v or changed the config`, err)
	}
	if err := d.ApplyProfile("huge"); err == nil || !strings.Contains(err.Error(), `profile: "huge" is not one of default, tiny`) {
		t.Errorf(`ApplyProfile("huge") = %v`, err)
	}
}

// TestIPFamilyDefaults: an IPv6-only lab gets dev-scripts' unique local
// network in the primary fields (and its BMC address there); a dual-stack
// lab keeps the IPv4 seed first and gets the IPv6 network second.
func TestIPFamilyDefaults(t *testing.T) {
	v6, err := Parse([]byte("cluster: {ipFamily: v6}\n"))
	if err != nil {
		t.Fatal(err)
	}
	k := v6.Cluster
	if k.MachineNetwork != DefaultMachineNetworkV6 || k.DHCPRange != DefaultDHCPRangeV6 || k.APIVIP != DefaultAPIVIPV6 ||
		k.IngressVIP != DefaultIngressVIPV6 || k.BMC.Address != "fd2e:6f44:5dd8:c956::1" || k.MachineNetworkV6.IsValid() {
		t.Errorf("v6 defaults: %+v", k)
	}
	dual, err := Parse([]byte("cluster: {ipFamily: dual}\n"))
	if err != nil {
		t.Fatal(err)
	}
	k = dual.Cluster
	if k.MachineNetwork != DefaultMachineNetwork || k.MachineNetworkV6 != DefaultMachineNetworkV6 || k.DHCPRangeV6 != DefaultDHCPRangeV6 ||
		k.APIVIPV6 != DefaultAPIVIPV6 || k.IngressVIPV6 != DefaultIngressVIPV6 || k.BMC.Address != "192.168.111.1" {
		t.Errorf("dual defaults: %+v", k)
	}
	managed, err := Parse([]byte("network: {provisioningNetwork: Managed}\ncluster: {ipFamily: v6}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := managed.Cluster.ProvisioningNetworkCIDR; got != DefaultProvisioningNetworkCIDRV6 {
		t.Errorf("v6 provisioning network: %s, want %s", got, DefaultProvisioningNetworkCIDRV6)
	}
}
