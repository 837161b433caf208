package ipi_test

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/ipi"
	"github.com/bmlab/bmlab/internal/lab/steps"
	"github.com/bmlab/bmlab/internal/labconfig"
	"github.com/bmlab/bmlab/internal/netaddr"
	"github.com/bmlab/bmlab/internal/plan"
	"github.com/bmlab/bmlab/internal/plan/plantest"
	"github.com/bmlab/bmlab/internal/testenv"
)

// TestGenerateGolden renders the install-config of a few lab files, as the
// plan resolves them, checks that it passes Validate and compares it with
// testdata/NAME.yaml (go test ./internal/ipi -run Golden -update rewrites
// them).
func TestGenerateGolden(t *testing.T) {
	tests := []struct{ name, lab, profile string }{
		{name: "seed", lab: ""},
		{name: "ipmi-managed", lab: "network: {provisioningNetwork: Managed}\ncluster: {clusterName: ostest, bmc: {kind: ipmi}}\n"},
		{name: "redfish-http-managed", lab: "network: {provisioningNetwork: Managed}\ncluster: {bmc: {kind: redfish, tls: false, redfishPort: 8080}}\n"},
		{name: "tiny-compact", lab: "cluster: {workers: {count: 0}}\n", profile: labconfig.ProfileTiny},
		{name: "v6", lab: "cluster: {ipFamily: v6}\n"},
		{name: "v6-ipmi-managed", lab: "network: {provisioningNetwork: Managed}\ncluster: {ipFamily: v6, bmc: {kind: ipmi}}\n"},
		{name: "dual", lab: "cluster: {ipFamily: dual}\n"},
		{name: "unmanaged", lab: "network: {provisioningNetwork: Unmanaged}\ncluster: {workers: {count: 1}}\n"},
		{name: "bond-managed", lab: "network: {provisioningNetwork: Managed}\ncluster: {masters: {bond: active-backup}, workers: {count: 1}}\n"},
		{name: "bond-dual", lab: "cluster: {ipFamily: dual, masters: {bond: balance-rr}, workers: {count: 0}}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := labconfig.Parse([]byte(tt.lab))
			if err != nil {
				t.Fatal(err)
			}
			if err := cfg.ApplyProfile(tt.profile); err != nil {
				t.Fatal(err)
			}
			p, err := plan.Resolve(cfg, plan.Options{Modes: plantest.Modes(), Dir: "/labs/" + tt.name, Profile: tt.profile})
			if err != nil {
				t.Fatal(err)
			}
			ic, err := ipi.Generate(steps.IPICluster(p), steps.IPINodes(p), testenv.PullSecret, testenv.SSHKey)
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			ranges := []netaddr.Range{p.Cluster.DHCPRange}
			if f := p.Cluster.Secondary; !f.IsZero() {
				ranges = append(ranges, f.DHCPRange)
			}
			if errs := ipi.Validate(ic, ranges...); len(errs) > 0 {
				t.Errorf("Validate(Generate()) = %v", errs)
			}
			// Each host boots from the plan's boot MAC (its provisioning
			// NIC's, when it has one).
			for _, h := range ic.Platform.BareMetal.Hosts {
				if n, _ := p.Node(h.Name); h.BootMACAddress != n.BootMAC {
					t.Errorf("install-config's %s boots from %s, the plan's node from %s", h.Name, h.BootMACAddress, n.BootMAC)
				}
			}
			got, err := ipi.Marshal(ic)
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", tt.name+".yaml")
			testenv.Golden(t, golden, got)
			back, err := ipi.Parse(got)
			if err != nil {
				t.Fatalf("Parse(Marshal()) = %v", err)
			}
			if d := cmp.Diff(ic, back); d != "" {
				t.Errorf("Parse(Marshal()) differs (-generated +parsed):\n%s", d)
			}
		})
	}
}
