package agent_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmlab/bmlab/internal/agent"
	"github.com/bmlab/bmlab/internal/ipi"
	"github.com/bmlab/bmlab/internal/lab/agentmode"
	"github.com/bmlab/bmlab/internal/lab/steps"
	"github.com/bmlab/bmlab/internal/labconfig"
	"github.com/bmlab/bmlab/internal/netaddr"
	"github.com/bmlab/bmlab/internal/plan"
	"github.com/bmlab/bmlab/internal/plan/plantest"
	"github.com/bmlab/bmlab/internal/testenv"
)

// TestTopologiesGolden renders install-config and agent-config of each
// topology the agent mode installs, as the plan resolves the lab file and
// the agent mode writes them (agentmode.Configs),
// checks that both pass the installer's rules, and compares them with
// testdata/<topology>.yaml (-update rewrites them).
func TestTopologiesGolden(t *testing.T) {
	for _, tt := range []struct{ name, lab string }{
		{"sno-static", "name: sno\ncluster: {masters: {count: 1}, agent: {staticIPs: true}}\n"},
		{"compact", "name: cmp\ncluster: {workers: {count: 0}}\n"},
		{"ha", "name: ha\n"},
		{"two-node-fencing", "name: tnf\ncluster: {masters: {count: 2}, fencing: true}\n"},
		{"two-node-arbiter", "name: arb\ncluster: {masters: {count: 2}, arbiter: {count: 1}, workers: {count: 0}}\n"},
		{"v6-static", "name: six\ncluster: {ipFamily: v6, workers: {count: 0}, agent: {staticIPs: true}}\n"},
		{"dual-static", "name: dual\ncluster: {ipFamily: dual, agent: {staticIPs: true}}\n"},
		{"sno-dual-static", "name: snod\ncluster: {ipFamily: dual, masters: {count: 1}, agent: {staticIPs: true}}\n"},
		{"compact-bond-static", "name: bnd\ncluster: {workers: {count: 0}, masters: {bond: active-backup}, agent: {staticIPs: true}}\n"},
		{"ha-bond-dhcp", "name: bnh\ncluster: {workers: {count: 2, bond: balance-alb}, masters: {bond: active-backup}}\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := labconfig.Parse([]byte(tt.lab))
			if err != nil {
				t.Fatal(err)
			}
			p, err := plan.Resolve(cfg, plan.Options{Modes: plantest.Modes(), Dir: "/labs/" + tt.name, Mode: plantest.Agent})
			if err != nil {
				t.Fatal(err)
			}
			ic, ac, err := agentmode.Configs(p, steps.IPICluster(p), testenv.PullSecret, testenv.SSHKey)
			if err != nil {
				t.Fatal(err)
			}
			if errs := ipi.Validate(ic, p.Cluster.DHCPRanges()...); len(errs) > 0 {
				t.Errorf("install-config fails the installer's rules: %v", errs)
			}
			if errs := agent.Validate(ac, p.Cluster.MachineNetwork); len(errs) > 0 {
				t.Errorf("agent-config fails the installer's rules: %v", errs)
			}
			icData, err := ipi.Marshal(ic)
			if err != nil {
				t.Fatal(err)
			}
			acData, err := agent.Marshal(ac)
			if err != nil {
				t.Fatal(err)
			}
			got := "# install-config.yaml\n" + string(icData) + "---\n# agent-config.yaml\n" + string(acData)
			golden := filepath.Join("testdata", tt.name+".yaml")
			testenv.Golden(t, golden, []byte(got))
		})
	}
}

// TestValidate: the installer's agent-config rules, each failing alone.
func TestValidate(t *testing.T) {
	base := func() *agent.Config {
		return agent.Generate(agent.Cluster{Name: "x", RendezvousIP: mustAddr("10.0.0.20"),
			Family:    netaddr.Family{MachineNetwork: mustPrefix("10.0.0.0/24"), HostAddress: mustAddr("10.0.0.1")},
			StaticIPs: true, Hosts: []agent.HostSpec{
				{Name: "m0", Role: "master", MAC: "52:54:00:00:00:01", IP: mustAddr("10.0.0.20")},
				{Name: "w0", Role: "worker", MAC: "52:54:00:00:00:02", IP: mustAddr("10.0.0.21")}}})
	}
	if errs := agent.Validate(base(), mustPrefix("10.0.0.0/24")); len(errs) > 0 {
		t.Fatalf("valid config: %v", errs)
	}
	for _, tt := range []struct {
		name string
		edit func(*agent.Config)
		want string
	}{
		{"rendezvous outside", func(c *agent.Config) { c.RendezvousIP = "10.1.0.20" }, `rendezvousIP: Invalid value: "10.1.0.20": must be in the machine network 10.0.0.0/24`},
		{"rendezvous missing", func(c *agent.Config) { c.RendezvousIP = "" }, `rendezvousIP: Required value`},
		{"rendezvous not a master's", func(c *agent.Config) { c.RendezvousIP = "10.0.0.21" }, `rendezvousIP: Invalid value: "10.0.0.21": no master host's networkConfig has this address`},
		{"duplicate MAC", func(c *agent.Config) { c.Hosts[1].Interfaces[0].MACAddress = "52:54:00:00:00:01" }, `hosts[1].interfaces[0].macAddress: Duplicate value: "52:54:00:00:00:01"`},
		{"bad role", func(c *agent.Config) { c.Hosts[1].Role = "infra" }, `hosts[1].role: Unsupported value: "infra"`},
		{"no master", func(c *agent.Config) { c.Hosts[0].Role = "worker" }, `hosts: Required value: at least one host must have the master role`},
	} {
		c := base()
		tt.edit(c)
		errs := agent.Validate(c, mustPrefix("10.0.0.0/24"))
		if !strings.Contains(errs.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, errs, tt.want)
		}
	}
}
