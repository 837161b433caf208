package net

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/bmlab/bmlab/internal/labctl/cli"
)

type checkReport struct {
	Lab         string `json:"lab"`
	InSync      bool   `json:"inSync"`
	Differences []row  `json:"differences"`
}

func newCheckCommand(g *cli.Globals, f *flags) *cobra.Command {
	return &cobra.Command{
		Use:   "check",
		Short: "List every difference between the host network and the lab's configuration; exit 1 if any",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return runCheck(cmd, g, f) },
	}
}

func runCheck(cmd *cobra.Command, g *cli.Globals, f *flags) error {
	l, err := open(cmd.Context(), g, f)
	if err != nil {
		return err
	}
	defer l.close()
	_, rows, err := l.differences(cmd.Context())
	if err != nil {
		return err
	}
	out := g.Streams.Out
	if f.output == "json" {
		if err := printJSON(out, checkReport{Lab: l.plan.Lab, InSync: len(rows) == 0, Differences: rows}); err != nil {
			return err
		}
	} else if len(rows) == 0 {
		fmt.Fprintf(out, "✓ the network of lab %q matches its configuration\n", l.plan.Lab)
	} else if err := printRows(out, rows); err != nil {
		return err
	}
	if len(rows) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d difference(s); %s", errDiffers, len(rows), nextStep(rows))
}

// nextStep tells the user what to run, or what to clear first.
func nextStep(rows []row) string {
	blocking := 0
	for _, r := range rows {
		if r.Blocking {
			blocking++
		}
	}
	if blocking > 0 {
		return fmt.Sprintf("%d of them the lab must not repair itself: follow their FIX, then run `labctl net repair`", blocking)
	}
	return "run `labctl net repair` to fix them"
}
