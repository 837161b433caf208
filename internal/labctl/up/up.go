// Package up is `labctl up`, `labctl status` and `labctl down`: the lab
// pipeline (internal/lab) driven from the lab file, with one status line per
// step.
package up

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/labconfig"
	"github.com/bmlab/bmlab/internal/labctl/cli"
)

type flags struct {
	mode       string
	profile    string
	until      string
	pullSecret string
	sshKey     string
	vbmcd      string
	uri        string
	output     string
	netns      string
}

func (f *flags) bind(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.vbmcd, "vbmcd", "", "the vbmcd binary to run (default: next to labctl, then PATH)")
	cmd.Flags().StringVar(&f.uri, "libvirt-uri", "qemu:///system", "libvirt URI")
	cmd.Flags().StringVar(&f.netns, "netns", "", "make the lab's links in this named network namespace (where libvirtd runs), not the current one")
}

// NewCommands returns up, status and down.
func NewCommands(g *cli.Globals) []*cobra.Command {
	f := &flags{}
	up := &cobra.Command{
		Use:   "up",
		Short: "Bring the lab up: network, storage, nodes, BMCs, install-config, installer (idempotent; run it again to resume)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.mode != "ipi-baremetal" {
				return fmt.Errorf("--mode %q: only ipi-baremetal is available yet (hybrid is planned)", f.mode)
			}
			return withLab(cmd.Context(), g, f, func(l *lab.Lab, cfg *labconfig.Config) error {
				if err := precheck(cfg, f, l.Spec.Dir, l.StepNames()); err != nil {
					return err
				}
				if err := l.Up(cmd.Context(), f.until); err != nil {
					return err
				}
				return printEndpoints(g, l)
			})
		},
	}
	up.Flags().StringVar(&f.mode, "mode", "ipi-baremetal", "ipi-baremetal (hybrid: planned)")
	up.Flags().StringVar(&f.profile, "profile", "", "tiny: shrink every node for a demo on a small machine")
	up.Flags().StringVar(&f.until, "until", "", "stop after this step")
	up.Flags().StringVar(&f.pullSecret, "pull-secret", "", "pull secret file (overrides the lab file)")
	up.Flags().StringVar(&f.sshKey, "ssh-key", "", "public SSH key file (overrides the lab file)")
	f.bind(up)

	status := &cobra.Command{
		Use:   "status",
		Short: "Show the lab's nodes, power, BMC endpoints, MACs and IPs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withLab(cmd.Context(), g, f, func(l *lab.Lab, _ *labconfig.Config) error { return printStatus(g, l, f.output) })
		},
	}
	status.Flags().StringVarP(&f.output, "output", "o", "table", "table or json")
	status.Flags().StringVar(&f.profile, "profile", "", "the profile the lab was brought up with")
	f.bind(status)

	down := &cobra.Command{
		Use:   "down",
		Short: "Remove exactly what up created, nothing else",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withLab(cmd.Context(), g, f, func(l *lab.Lab, _ *labconfig.Config) error { return l.Down(cmd.Context()) })
		},
	}
	down.Flags().StringVar(&f.profile, "profile", "", "the profile the lab was brought up with")
	f.bind(down)
	return []*cobra.Command{up, status, down}
}

func withLab(ctx context.Context, g *cli.Globals, f *flags, fn func(*lab.Lab, *labconfig.Config) error) error {
	cfg, err := labconfig.Load(g.ConfigPath, g.ConfigSet)
	if err != nil {
		return err
	}
	if f.profile != "" {
		if err := cfg.ApplyProfile(f.profile); err != nil {
			return err
		}
	}
	dir := filepath.Dir(g.ConfigPath)
	if !g.ConfigSet {
		if dir, err = os.Getwd(); err != nil {
			return err
		}
	}
	vb, err := findVbmcd(f.vbmcd)
	if err != nil {
		return err
	}
	own := ownNAT(cfg)
	spec := SpecFromConfig(cfg, dir, vb)
	spec.Netns = f.netns
	if err := reserve(cfg, &spec); err != nil {
		return err
	}
	l, err := lab.Open(ctx, spec, f.uri, g.Logger, cli.NewStatus(g.Streams.Out))
	if err != nil {
		return err
	}
	l.Before = []lab.Step{networkStep(l, cfg, f, own), storageStep(l, cfg)}
	l.After = ipiSteps(l, cfg, f)
	return fn(l, cfg)
}

func findVbmcd(given string) (string, error) {
	if given != "" {
		return filepath.Abs(given)
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "vbmcd")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		p := filepath.Join(d, "vbmcd")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("vbmcd not found next to labctl or on PATH: run `make build` (it puts both in bin/) or pass --vbmcd")
}

// SpecFromConfig turns the lab file into what the pipeline builds. Nodes are
// named <lab>-master-N and <lab>-worker-N.
func SpecFromConfig(cfg *labconfig.Config, dir, vbmcd string) lab.Spec {
	k := cfg.Cluster
	s := lab.Spec{
		Name:      cfg.Name,
		Dir:       dir,
		Network:   labconfig.BaremetalBridge,
		VbmcdPath: vbmcd,
		BMC: lab.BMCSpec{
			Kind: k.BMC.Kind, Host: k.BMC.Address, RedfishPort: k.BMC.RedfishPort,
			IPMIPortBase: k.BMC.IPMIPortBase, Username: k.BMC.Username, Password: k.BMC.Password,
		},
	}
	for _, r := range []struct {
		role string
		spec labconfig.Role
	}{{"master", k.Masters}, {"worker", k.Workers}} {
		var extra []uint
		for _, gib := range r.spec.ExtraDisks {
			extra = append(extra, uint(gib))
		}
		for i := 0; i < r.spec.N(); i++ {
			s.Nodes = append(s.Nodes, lab.NodeSpec{
				Name: fmt.Sprintf("%s-%s-%d", cfg.Name, r.role, i), Role: r.role,
				VCPUs: uint(r.spec.VCPUs), MemoryMiB: uint(r.spec.MemoryMiB), DiskGiB: uint(r.spec.DiskGiB),
				ExtraDiskGiB: extra,
			})
		}
	}
	s.Fill()
	return s
}

type nodeRow struct {
	Name  string `json:"name"`
	Role  string `json:"role"`
	Power string `json:"power"`
	MAC   string `json:"bootMAC"`
	IP    string `json:"ip,omitempty"`
	BMC   string `json:"bmc"`
	UUID  string `json:"uuid"`
}

func rows(l *lab.Lab) []nodeRow {
	var out []nodeRow
	for i, n := range l.Spec.Nodes {
		r := nodeRow{Name: n.Name, Role: n.Role, MAC: n.MAC, IP: n.IP, BMC: l.Spec.BMCAddress(i), UUID: n.UUID, Power: "absent"}
		if m, err := l.Be.Get(n.Name); err == nil {
			r.Power = string(m.Power)
		}
		out = append(out, r)
	}
	return out
}

func printEndpoints(g *cli.Globals, l *lab.Lab) error {
	fmt.Fprintln(g.Streams.Out)
	return table(g, l)
}

func table(g *cli.Globals, l *lab.Lab) error {
	tw := tabwriter.NewWriter(g.Streams.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tROLE\tPOWER\tBOOT MAC\tIP\tBMC")
	for _, r := range rows(l) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Role, r.Power, r.MAC, orDash(r.IP), r.BMC)
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printStatus(g *cli.Globals, l *lab.Lab, output string) error {
	vb := "stopped"
	if l.VbmcdRunning() {
		vb = fmt.Sprintf("running (pid %d, log %s)", l.State.Vbmcd.PID, l.State.Vbmcd.Log)
	}
	phase := l.State.Done
	if phase == "" {
		phase = "not up"
	}
	switch output {
	case "json":
		e := json.NewEncoder(g.Streams.Out)
		e.SetIndent("", "  ")
		return e.Encode(map[string]any{"lab": l.Spec.Name, "phase": phase, "vbmcd": vb, "nodes": rows(l)})
	case "table":
		fmt.Fprintf(g.Streams.Out, "lab %s: last step done: %s; vbmcd %s\n\n", l.Spec.Name, phase, vb)
		return table(g, l)
	default:
		return fmt.Errorf("--output %q: use table or json", output)
	}
}
