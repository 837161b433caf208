// Package up is `labctl up`, `labctl status` and `labctl down`: flag
// parsing, the lab plan, and the pipeline the mode chooses (internal/lab),
// with one status line per action.
package up

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/labctl/cli"
	"github.com/bmlab/bmlab/internal/plan"
)

type flags struct {
	until      string
	pullSecret string
	sshKey     string
	output     string
	lab        string
	host       string
}

// NewCommands returns up, status and down.
func NewCommands(g *cli.Globals) []*cobra.Command {
	f := &flags{}
	up := &cobra.Command{
		Use:   "up",
		Short: "Bring the lab up (idempotent; run it again to resume)",
		Long: `Bring the lab up. --mode ipi-baremetal: preflight, network, storage, nodes,
bmcs, install-config, installer. --mode hybrid: the kcli-style UPI flow
(its steps are listed in docs/hybrid.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withLab(cmd.Context(), g, f, func(e *lab.Env) error {
				actions, err := lab.Pipeline(e.Plan.Mode)
				if err != nil {
					return err
				}
				if err := lab.CheckUntil(actions, f.until); err != nil {
					return err
				}
				if err := lab.Precheck(e, actions, f.until); err != nil {
					return err
				}
				if err := lab.Up(cmd.Context(), e, actions, f.until); err != nil {
					return err
				}
				fmt.Fprintln(g.Streams.Out)
				return table(cmd.Context(), g, e)
			})
		},
	}
	up.Flags().StringVar(&f.until, "until", "", "stop after this step")
	up.Flags().StringVar(&f.pullSecret, "pull-secret", "", "pull secret file (overrides the lab file)")
	up.Flags().StringVar(&f.sshKey, "ssh-key", "", "public SSH key file (overrides the lab file)")
	up.Flags().StringVar(&f.host, "host", "", "for a lab over several hosts: bring up this host's part (not the hub's), on that host; labctl on the hub runs it through the host's exec:")

	status := &cobra.Command{
		Use:   "status",
		Short: "Show the lab's nodes, power, BMC endpoints, MACs and IPs, and its vbmcd",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withLab(cmd.Context(), g, f, func(e *lab.Env) error { return printStatus(cmd.Context(), g, e, f.output) })
		},
	}
	status.Flags().StringVarP(&f.output, "output", "o", "table", "table or json")

	down := &cobra.Command{
		Use:   "down",
		Short: "Remove everything that bears the lab's mark, and nothing else",
		Long: `Remove everything that bears the lab's mark: its domains, libvirt networks,
links, storage pool and vbmcd, found by their marks even when the lab's
directory or state file is gone. With --lab NAME no lab file is needed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withLab(cmd.Context(), g, f, func(e *lab.Env) error {
				if f.lab != "" {
					// The mode is not known: every action's delete.
					return lab.Down(cmd.Context(), e, lab.Teardown())
				}
				actions, err := lab.Pipeline(e.Plan.Mode)
				if err != nil {
					return err
				}
				return lab.Down(cmd.Context(), e, actions)
			})
		},
	}
	down.Flags().StringVar(&f.lab, "lab", "", "the lab's name, when its lab file is gone")
	down.Flags().StringVar(&f.host, "host", "", "for a lab over several hosts: remove this host's part (not the hub's), on that host")
	return []*cobra.Command{up, status, down}
}

func withLab(ctx context.Context, g *cli.Globals, f *flags, fn func(*lab.Env) error) error {
	var p *plan.Plan
	var err error
	if f.lab != "" {
		p, err = g.LoadPlanNamed(f.lab)
	} else {
		p, err = g.LoadPlan()
	}
	if err != nil {
		return err
	}
	if f.host != "" {
		if p, err = p.ForSpoke(f.host); err != nil {
			return err
		}
	}
	var h interface {
		lab.Host
		Close()
	}
	if len(p.Hosts) > 0 {
		h, err = lab.OpenHosts(ctx, p, g.Logger)
	} else {
		h, err = lab.OpenHost(ctx, p, g.Logger)
	}
	if err != nil {
		return err
	}
	defer h.Close()
	return fn(&lab.Env{Plan: p, Host: h, Rep: cli.NewStatus(g.Streams.Out), Log: g.Logger, Remote: lab.ExecRunner{}, PullSecret: f.pullSecret, SSHKey: f.sshKey})
}

type nodeRow struct {
	Name  string `json:"name"`
	Role  string `json:"role"`
	Power string `json:"power"`
	MAC   string `json:"bootMAC"`
	IP    string `json:"ip"`
	BMC   string `json:"bmc,omitempty"`
	UUID  string `json:"uuid"`
	Host  string `json:"host,omitempty"` // labs over several hosts
}

func rows(ctx context.Context, e *lab.Env) ([]nodeRow, error) {
	var out []nodeRow
	for _, n := range e.Plan.Nodes {
		power, err := e.Host.Power(ctx, n.Name)
		if err != nil {
			return nil, err
		}
		out = append(out, nodeRow{Name: n.Name, Role: n.Role, MAC: n.MAC, IP: n.IP, BMC: n.BMC.Address, UUID: n.UUID, Power: power, Host: n.Host})
	}
	return out, nil
}

func table(ctx context.Context, g *cli.Globals, e *lab.Env) error {
	rs, err := rows(ctx, e)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(g.Streams.Out, 0, 4, 2, ' ', 0)
	if len(e.Plan.Hosts) > 0 {
		fmt.Fprintln(tw, "NODE\tHOST\tROLE\tPOWER\tBOOT MAC\tIP\tBMC")
		for _, r := range rs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Host, r.Role, r.Power, r.MAC, r.IP, orDash(r.BMC))
		}
		return tw.Flush()
	}
	fmt.Fprintln(tw, "NODE\tROLE\tPOWER\tBOOT MAC\tIP\tBMC")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Role, r.Power, r.MAC, r.IP, orDash(r.BMC))
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printStatus(ctx context.Context, g *cli.Globals, e *lab.Env, output string) error {
	if output != "table" && output != "json" {
		return fmt.Errorf("--output %q: use table or json", output)
	}
	st, err := lab.LoadState(e.Plan)
	if err != nil {
		return err
	}
	phase := st.Done
	if phase == "" {
		phase = "not up"
	}
	vb := "stopped"
	if e.Plan.Mode != plan.ModeIPI {
		vb = "none (no BMCs in this mode)"
	} else if ds, err := e.Host.Daemons(ctx, e.Plan.Lab); err != nil {
		return err
	} else if len(ds) > 0 {
		vb = fmt.Sprintf("running (pid %d, log %s)", ds[0].PID, e.Plan.Vbmcd.Log)
	}
	spokes := lab.CheckSpokes(ctx, e.Remote, e.Plan)
	if output == "json" {
		rs, err := rows(ctx, e)
		if err != nil {
			return err
		}
		st := map[string]any{"lab": e.Plan.Lab, "mode": e.Plan.Mode, "phase": phase, "vbmcd": vb, "nodes": rs}
		if len(spokes) > 0 {
			var hs []hostRow
			for _, s := range spokes {
				hs = append(hs, hostRow{Name: s.Host.Name, Checked: s.Checked() && s.Err == nil, InSync: s.Report != nil && s.Report.InSync, Network: s.String()})
			}
			st["hosts"] = hs
		}
		enc := json.NewEncoder(g.Streams.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	fmt.Fprintf(g.Streams.Out, "lab %s (%s): last step done: %s; vbmcd %s\n", e.Plan.Lab, e.Plan.Mode, phase, vb)
	for _, s := range spokes {
		fmt.Fprintln(g.Streams.Out, s)
	}
	fmt.Fprintln(g.Streams.Out)
	return table(ctx, g, e)
}

// hostRow is another host's network in `status -o json`.
type hostRow struct {
	Name    string `json:"name"`
	Checked bool   `json:"checked"`
	InSync  bool   `json:"inSync"`
	Network string `json:"network"`
}
