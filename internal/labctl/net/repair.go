package net

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	labactions "github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/labctl/cli"
	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/plan"
)

type repairReport struct {
	Lab         string   `json:"lab"`
	Differences []row    `json:"differences"`
	Steps       []string `json:"steps"`
	// LibvirtNetworks are the networks repair defined, started or corrected.
	LibvirtNetworks []string `json:"libvirtNetworks"`
	// NetworkManagerSnippet is the file written, if any.
	NetworkManagerSnippet string `json:"networkManagerSnippet,omitempty"`
	// Hosts are the other hosts' results, one line each.
	Hosts []string `json:"hosts,omitempty"`
}

func newRepairCommand(g *cli.Globals, f *flags) *cobra.Command {
	return &cobra.Command{
		Use:   "repair",
		Short: "Print the differences, then change only what differs (idempotent)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return runRepair(cmd, g, f) },
	}
}

func runRepair(cmd *cobra.Command, g *cli.Globals, f *flags) error {
	ctx := cmd.Context()
	l, err := open(ctx, g, f)
	if err != nil {
		return err
	}
	defer l.close()
	plan, rows, err := l.differences(ctx)
	if err != nil {
		return err
	}
	out := g.Streams.Out
	table := f.output == "table"
	if table && len(rows) > 0 {
		if err := printRows(out, rows); err != nil {
			return err
		}
	}
	rep := repairReport{Lab: l.plan.Lab, Differences: rows, Steps: []string{}, LibvirtNetworks: []string{}}
	for _, r := range rows {
		if r.Blocking {
			if !table {
				_ = printJSON(out, rep)
			}
			return fmt.Errorf("nothing changed: %s", nextStep(rows))
		}
	}

	if l.lv != nil && l.nat != nil {
		// First: the veth's far end is on its bridge.
		spec := labactions.NATSpec(l.plan)
		changed, err := l.lv.EnsureNAT(ctx, spec)
		if err != nil {
			return err
		}
		if changed {
			rep.LibvirtNetworks = append(rep.LibvirtNetworks, spec.Name)
			if table {
				fmt.Fprintf(out, "✓ libvirt network %s: NAT network %s on %s, defined, active, autostarted\n", spec.Name, spec.CIDR, spec.Bridge)
			}
			// Libvirt made the bridge just now: plan the links again.
			if plan, err = l.p.Plan(l.top); err != nil {
				return err
			}
		}
	}
	if err := l.p.ApplyPlan(ctx, l.top, plan); err != nil {
		return err
	}
	for _, s := range plan.Steps {
		rep.Steps = append(rep.Steps, s.String())
		if table {
			fmt.Fprintf(out, "✓ %s\n", s)
		}
	}
	if l.lv != nil {
		for _, name := range l.plan.Network.BridgeNetworks {
			changed, err := l.lv.Ensure(ctx, l.networkSpec(name))
			if err != nil {
				return err
			}
			if changed {
				rep.LibvirtNetworks = append(rep.LibvirtNetworks, name)
				if table {
					fmt.Fprintf(out, "✓ libvirt network %s: defined, active, autostarted on bridge %s\n", name, name)
				}
			}
		}
	}
	if l.nmOK {
		path, changed, err := netplumb.WriteUnmanagedSnippet(l.plan.Network.NMConfDir, l.plan.Lab, l.top.Names())
		if err != nil {
			return err
		}
		if changed {
			rep.NetworkManagerSnippet = path
			if table {
				fmt.Fprintf(out, "✓ NetworkManager found: wrote %s so it leaves the lab's links alone; `nmcli general reload conf` applies it now\n", path)
			}
		}
	}
	if table && len(rows) == 0 {
		fmt.Fprintf(out, "✓ nothing to repair: the network of lab %q matches its configuration\n", l.plan.Lab)
	}
	lines, err := l.repairSpokes(ctx)
	rep.Hosts = lines
	if table {
		for _, line := range lines {
			fmt.Fprintln(out, line)
		}
	} else if jerr := printJSON(out, rep); jerr != nil {
		return jerr
	}
	return err
}

// repairSpokes runs `net repair` on every other host through its exec:,
// then `net check` there: a host is ✓ only when its check is clean.
func (l *lab) repairSpokes(ctx context.Context) ([]string, error) {
	return l.onSpokes(ctx, "repair", func(h plan.Host, rep *labactions.NetReport) (string, error) {
		if !rep.InSync {
			return "", fmt.Errorf("host %s: after the repair there, net check reports %s", h.Name, rep.Summary())
		}
		return "network in sync (repaired and checked there)", nil
	})
}
