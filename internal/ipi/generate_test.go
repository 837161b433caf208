package ipi

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/labconfig"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// testPullSecret and testSSHKey are well-formed and worthless.
const (
	testPullSecret = `{"auths":{"quay.io":{"auth":"dXNlcjpwYXNz","email":"lab@bmlab.test"}}}`
	testSSHKey     = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGq7ZJzDmUd0i7UO4u4Xc5xxdtMQdaC6N0HRwsZi0o7X lab@bmlab.test"
)

// labNodes are what the pipeline would hand over: one per master, then one
// per worker, with the UUIDs and MACs libvirt would have given them.
func labNodes(k labconfig.Cluster) []Node {
	var nodes []Node
	for _, r := range []struct {
		role string
		n    int
	}{{RoleMaster, k.Masters.N()}, {RoleWorker, k.Workers.N()}} {
		for i := range r.n {
			j := len(nodes)
			n := Node{
				Name:    fmt.Sprintf("%s-%s-%d", k.Name, r.role, i),
				Role:    r.role,
				UUID:    fmt.Sprintf("7d2bd0a4-5a4e-4c9b-9d0e-%012d", j),
				BootMAC: fmt.Sprintf("52:54:00:6b:3c:%02x", 0x10+j),
			}
			var err error
			if n.BMCAddress, err = BMCAddress(k.BMC, n.UUID, k.BMC.IPMIPortBase+j); err != nil {
				panic(err)
			}
			nodes = append(nodes, n)
		}
	}
	return nodes
}

func mustParse(t *testing.T, lab string) *labconfig.Config {
	t.Helper()
	cfg, err := labconfig.Parse([]byte(lab))
	if err != nil {
		t.Fatalf("labconfig.Parse: %v", err)
	}
	return cfg
}

// TestGenerateGolden renders the install-config of a few labs, checks that
// it passes Validate and compares it with testdata/NAME.yaml
// (go test ./internal/ipi -run Golden -update rewrites them).
func TestGenerateGolden(t *testing.T) {
	tests := []struct{ name, lab, profile string }{
		{name: "seed", lab: ""},
		{name: "ipmi-managed", lab: "network: {provisioningNetwork: Managed}\ncluster: {clusterName: ostest, bmc: {kind: ipmi}}\n"},
		{name: "redfish-http-managed", lab: "network: {provisioningNetwork: Managed}\ncluster: {bmc: {kind: redfish, tls: false, redfishPort: 8080}}\n"},
		{name: "tiny-compact", lab: "cluster: {workers: {count: 0}}\n", profile: labconfig.ProfileTiny},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustParse(t, tt.lab)
			if err := cfg.ApplyProfile(tt.profile); err != nil {
				t.Fatal(err)
			}
			ic, err := Generate(*cfg, labNodes(cfg.Cluster), testPullSecret, testSSHKey)
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			if errs := Validate(ic, cfg.Cluster.DHCPRange); len(errs) > 0 {
				t.Errorf("Validate(Generate()) = %v", errs)
			}
			got, err := Marshal(ic)
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", tt.name+".yaml")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if d := cmp.Diff(string(want), string(got)); d != "" {
				t.Errorf("%s (-want +got):\n%s", golden, d)
			}
			back, err := Parse(got)
			if err != nil {
				t.Fatalf("Parse(Marshal()) = %v", err)
			}
			if d := cmp.Diff(ic, back); d != "" {
				t.Errorf("Parse(Marshal()) differs (-generated +parsed):\n%s", d)
			}
		})
	}
}

func TestBMCAddress(t *testing.T) {
	yes, no := true, false
	const uuid = "7d2bd0a4-5a4e-4c9b-9d0e-000000000001"
	tests := []struct {
		bmc  labconfig.BMC
		port int
		want string
	}{
		{labconfig.BMC{Kind: "redfish-virtualmedia", Address: "192.168.111.1", RedfishPort: 8000, TLS: &yes}, 0,
			"redfish-virtualmedia+https://192.168.111.1:8000/redfish/v1/Systems/" + uuid},
		{labconfig.BMC{Kind: "redfish", Address: "bmc.lab", RedfishPort: 8080, TLS: &no}, 0,
			"redfish+http://bmc.lab:8080/redfish/v1/Systems/" + uuid},
		{labconfig.BMC{Kind: "redfish-virtualmedia", Address: "fd00::1", RedfishPort: 8000}, 0,
			"redfish-virtualmedia+https://[fd00::1]:8000/redfish/v1/Systems/" + uuid},
		{labconfig.BMC{Kind: "ipmi", Address: "192.168.111.1"}, 6231, "ipmi://192.168.111.1:6231"},
	}
	for _, tt := range tests {
		got, err := BMCAddress(tt.bmc, uuid, tt.port)
		if err != nil || got != tt.want {
			t.Errorf("BMCAddress(%+v, %d) = %q, %v; want %q", tt.bmc, tt.port, got, err, tt.want)
		}
	}
	for _, tt := range []struct {
		bmc  labconfig.BMC
		uuid string
		port int
		want string
	}{
		{labconfig.BMC{Kind: "redfish"}, "", 0, "needs the node's UUID"},
		{labconfig.BMC{Kind: "ipmi"}, uuid, 70000, "IPMI port 70000 is not a port"},
		{labconfig.BMC{Kind: "idrac"}, uuid, 0, `unknown BMC kind "idrac"`},
	} {
		if _, err := BMCAddress(tt.bmc, tt.uuid, tt.port); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("BMCAddress(%+v) = %v, want an error containing %q", tt.bmc, err, tt.want)
		}
	}
}

func TestGenerateIPMIPortsAndOverrides(t *testing.T) {
	cfg := mustParse(t, "network: {provisioningNetwork: Managed}\ncluster: {bmc: {kind: ipmi}}\n")
	nodes := labNodes(cfg.Cluster)[:3]
	nodes[1].BMCAddress = "ipmi://192.168.111.1:7000"
	nodes[2].BMCAddress = "ipmi://10.0.0.9:623"
	nodes[2].RootDevice = "/dev/sda"
	ic, err := Generate(*cfg, nodes, testPullSecret, "")
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
	if _, err := Generate(*cfg, []Node{{Name: "m", Role: "master"}}, "", ""); err == nil || !strings.Contains(err.Error(), `node "m": no BMC address`) {
		t.Errorf("Generate(no address) = %v", err)
	}
	if _, err := Generate(*cfg, []Node{{Name: "n", Role: "arbiter"}}, "", ""); err == nil || !strings.Contains(err.Error(), `node "n": role "arbiter" is not master or worker`) {
		t.Errorf("Generate(arbiter) = %v", err)
	}
}

func TestWriteIsPrivate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
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
		t.Errorf("dir holds %d entries, want only %s", len(entries), FileName)
	}
}

func TestPrecheck(t *testing.T) {
	if err := Precheck(*labconfig.Default(), testPullSecret, testSSHKey); err != nil {
		t.Errorf("Precheck(seed) = %v", err)
	}
	cfg := mustParse(t, "cluster: {bmc: {kind: ipmi}, apiVIP: 192.168.111.30}\n")
	err := Precheck(*cfg, `{"auths":{}}`, "")
	for _, want := range []string{
		`platform.baremetal.apiVIPs: Invalid value: "192.168.111.30": IP is inside the machine network's DHCP range 192.168.111.20-192.168.111.60`,
		`platform.baremetal.hosts[0].bmc: Invalid value: "ipmi://192.168.111.1:6230": driver ipmi requires provisioning network`,
		`pullSecret: Invalid value: "<redacted>": auths required`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Precheck = %v\nwant it to contain %s", err, want)
		}
	}
}
