package plan

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/testenv"
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
		{"managed", "network: {provisioningNetwork: Managed}\n", modeIPI, []nic{{"enp1s0", "provisioning"}, {"enp2s0", "baremetal"}},
			true, "enp1s0", "172.22.0.2", "172.22.0.3", "172.22.0.10-172.22.0.253", "172.22.0.1", "172.22.0.1/24"},
		{"unmanaged", "network: {provisioningNetwork: Unmanaged}\ncluster: {provisioningNetworkCIDR: 172.23.4.0/24, bootstrapProvisioningIP: 172.23.4.5}\n", modeIPI,
			[]nic{{"enp1s0", "provisioning"}, {"enp2s0", "baremetal"}}, true, "enp1s0", "172.23.4.5", "172.23.4.3", "172.23.4.10-172.23.4.253", "172.23.4.1", "172.23.4.1/24"},
		{"managed-v6", "network: {provisioningNetwork: Managed}\ncluster: {ipFamily: v6}\n", modeIPI, []nic{{"enp1s0", "provisioning"}, {"enp2s0", "baremetal"}},
			true, "enp1s0", "fd00:1101::2", "fd00:1101::3", "fd00:1101::a-fd00:1101::ffff:ffff:ffff:fffe", "fd00:1101::1", "fd00:1101::1/64"},
		{"disabled", "", modeIPI, []nic{{"enp1s0", "baremetal"}}, false, "", "192.168.111.7", "192.168.111.8", "", "", ""},
		{"agent-managed", "network: {provisioningNetwork: Managed}\n", modeAgent, []nic{{"enp1s0", "baremetal"}}, false, "", "172.22.0.2", "172.22.0.3", "172.22.0.10-172.22.0.253", "172.22.0.1", ""},
		{"hybrid", "cluster: {image: /i.qcow2}\n", modeHybrid, []nic{{"enp1s0", "baremetal"}}, false, "", "", "", "", "", ""},
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
		})
	}
}

// TestProvisioningDHCPConfig: an Unmanaged lab's DHCP server hands out
// provisioningDHCPRange on the provisioning bridge and PXE-boots the
// control plane from bootstrapProvisioningIP and the workers from
// clusterProvisioningIP (iPXE to the boot script, PXE firmware to iPXE by
// TFTP), in IPv4 and IPv6; Debian's dnsmasq accepts both configurations
// (dnsmasq --test). Managed and Disabled labs, and spokes, have none.
func TestProvisioningDHCPConfig(t *testing.T) {
	for _, tt := range []struct {
		name, lab string
		want      []string
	}{
		{"v4", "network: {provisioningNetwork: Unmanaged}\ncluster: {workers: {count: 1}}\n", []string{
			"interface=provisioning\n", "dhcp-range=172.22.0.10,172.22.0.253,255.255.255.0,1h\n",
			"dhcp-boot=tag:control-plane,tag:ipxe,http://172.22.0.2:6180/boot.ipxe\n",
			"dhcp-boot=tag:!control-plane,tag:ipxe,http://172.22.0.3:6180/boot.ipxe\n",
			"dhcp-boot=tag:control-plane,tag:!ipxe,tag:efi,/snponly-x86_64.efi,provisioning,172.22.0.2\n",
			"dhcp-boot=tag:!control-plane,tag:!ipxe,tag:!efi,/undionly.kpxe,provisioning,172.22.0.3\n"}},
		{"v6", "network: {provisioningNetwork: Unmanaged}\ncluster: {ipFamily: v6, workers: {count: 1}}\n", []string{
			"dhcp-range=fd00:1101::a,fd00:1101::ffff:ffff:ffff:fffe,64,1h\n",
			"dhcp-option=tag:control-plane,tag:ipxe6,option6:bootfile-url,http://[fd00:1101::2]:6180/boot.ipxe\n",
			"dhcp-option=tag:!control-plane,tag:!ipxe6,tag:pxe6,option6:bootfile-url,tftp://[fd00:1101::3]/snponly-x86_64.efi\n"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := resolve(t, tt.lab, "tiny", modeIPI)
			d := p.Network.ProvisioningDHCP
			if d == nil {
				t.Fatal("no DHCP server")
			}
			for _, w := range tt.want {
				if !strings.Contains(d.Config, w) {
					t.Errorf("configuration lacks %q:\n%s", w, d.Config)
				}
			}
			for _, n := range p.Nodes {
				host := "dhcp-host=" + n.BootMAC + ",set:control-plane\n"
				if strings.Contains(d.Config, host) != (n.Role == "master") {
					t.Errorf("%s (%s): control-plane tag %v:\n%s", n.Name, n.Role, strings.Contains(d.Config, host), d.Config)
				}
			}
			conf := filepath.Join(t.TempDir(), "dhcp.conf")
			if err := os.WriteFile(conf, []byte(d.Config), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(testenv.Command(t, "dnsmasq"), "--test", "-C", conf).CombinedOutput(); err != nil {
				t.Errorf("dnsmasq --test: %v: %s", err, out)
			}
		})
	}
	for _, lab := range []string{"network: {provisioningNetwork: Managed}\n", ""} {
		if p := resolve(t, lab, "tiny", modeIPI); p.Network.ProvisioningDHCP != nil {
			t.Errorf("%q: a DHCP server of the lab's own", lab)
		}
	}
	p := resolve(t, "network: {provisioningNetwork: Unmanaged}\nhosts:\n- {name: a, libvirtURI: 'qemu:///system', underlay: 10.254.0.1}\n- {name: b, libvirtURI: 'qemu+tcp://10.254.0.2/system', underlay: 10.254.0.2}\n", "tiny", modeIPI)
	if s, err := p.ForSpoke("b"); err != nil || s.Network.ProvisioningDHCP != nil || p.Network.ProvisioningDHCP == nil {
		t.Errorf("a spoke's plan: %v, DHCP server %v (the hub's %v)", err, s.Network.ProvisioningDHCP, p.Network.ProvisioningDHCP)
	}
}
