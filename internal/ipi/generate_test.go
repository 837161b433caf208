package ipi

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/netaddr"
	"github.com/bmlab/bmlab/internal/ocp"
)

// testPullSecret and testSSHKey are well-formed and worthless.
const (
	testPullSecret = `{"auths":{"quay.io":{"auth":"dXNlcjpwYXNz","email":"lab@bmlab.test"}}}`
	testSSHKey     = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGq7ZJzDmUd0i7UO4u4Xc5xxdtMQdaC6N0HRwsZi0o7X lab@bmlab.test"
)

// seed is the seed lab's cluster as the plan resolves it.
func seed() Cluster {
	return Cluster{
		Name: "seed", BaseDomain: "bmlab.test",
		Family: netaddr.Family{
			MachineNetwork: netip.MustParsePrefix("192.168.111.0/24"),
			DHCPRange:      netaddr.Range{Start: netip.MustParseAddr("192.168.111.20"), End: netip.MustParseAddr("192.168.111.60")},
			APIVIP:         netip.MustParseAddr("192.168.111.5"), IngressVIP: netip.MustParseAddr("192.168.111.4"),
		},
		Masters: 3, Workers: 2, ProvisioningNetwork: ocp.ProvisioningDisabled, ExternalBridge: "baremetal",
		BMCUsername: "admin", BMCPassword: "password", BMCInsecure: true,
	}
}

var seedBMC = ocp.BMCEndpoint{Kind: ocp.BMCRedfishVirtualMedia, Host: "192.168.111.1", RedfishPort: 8000, TLS: true}

// labNodes are what the pipeline would hand over: one per master, then one
// per worker, with the UUIDs and MACs libvirt would have given them.
func labNodes(k Cluster, b ocp.BMCEndpoint) []Node {
	var nodes []Node
	for _, r := range []struct {
		role string
		n    int
	}{{ocp.RoleMaster, k.Masters}, {ocp.RoleWorker, k.Workers}} {
		for i := range r.n {
			j := len(nodes)
			n := Node{
				Name:    fmt.Sprintf("%s-%s-%d", k.Name, r.role, i),
				Role:    r.role,
				UUID:    fmt.Sprintf("7d2bd0a4-5a4e-4c9b-9d0e-%012d", j),
				BootMAC: fmt.Sprintf("52:54:00:6b:3c:%02x", 0x10+j),
			}
			var err error
			if n.BMCAddress, err = ocp.BMCAddress(b, n.UUID, 6230+j); err != nil {
				panic(err)
			}
			nodes = append(nodes, n)
		}
	}
	return nodes
}

func TestGenerateIPMIPortsAndOverrides(t *testing.T) {
	k := seed()
	k.ProvisioningNetwork, k.ProvisioningBridge, k.BMCInsecure = ocp.ProvisioningManaged, "provisioning", false
	k.ProvisioningNetworkCIDR = netip.MustParsePrefix("172.22.0.0/24")
	nodes := labNodes(k, ocp.BMCEndpoint{Kind: ocp.BMCIPMI, Host: "192.168.111.1"})[:3]
	nodes[1].BMCAddress = "ipmi://192.168.111.1:7000"
	nodes[2].BMCAddress = "ipmi://10.0.0.9:623"
	nodes[2].RootDevice = "/dev/sda"
	ic, err := Generate(k, nodes, testPullSecret, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range ic.Platform.BareMetal.Hosts {
		got = append(got, h.BMC.Address+" "+h.RootDeviceHints.DeviceName+fmt.Sprint(" ", h.BMC.DisableCertificateVerification))
	}
	want := []string{"ipmi://192.168.111.1:6230 /dev/vda false", "ipmi://192.168.111.1:7000 /dev/vda false", "ipmi://10.0.0.9:623 /dev/sda false"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("hosts (-want +got):\n%s", d)
	}
	if _, err := Generate(k, []Node{{Name: "m", Role: "master"}}, "", ""); err == nil || !strings.Contains(err.Error(), `node "m": no BMC address`) {
		t.Errorf("Generate(no address) = %v", err)
	}
	if _, err := Generate(k, []Node{{Name: "n", Role: "bootstrap"}}, "", ""); err == nil || !strings.Contains(err.Error(), `node "n": role "bootstrap" is not master, arbiter or worker`) {
		t.Errorf("Generate(bootstrap) = %v", err)
	}
}

func TestWriteIsPrivate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ocp.InstallConfigFile)
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	ic := validLab(t)
	if err := Write(dir, ic); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	data, _ := os.ReadFile(path)
	want, _ := Marshal(ic)
	if string(data) != string(want) {
		t.Errorf("file is not Marshal(ic)")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("dir holds %d entries, want only %s", len(entries), ocp.InstallConfigFile)
	}
}
