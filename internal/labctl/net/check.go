package net

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bmlab/bmlab/internal/labctl/cli"
)

type checkReport struct {
	Lab         string `json:"lab"`
	InSync      bool   `json:"inSync"`
	Differences []row  `json:"differences"`
	// OwnedLinks are the links here that bear the lab's mark: what labctl
	// on the hub reads to know another host's links are gone after down.
	OwnedLinks []string `json:"ownedLinks"`
	// Hosts are the other hosts that were not checked (no exec:).
	Hosts []string `json:"notChecked,omitempty"`
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
	owned, err := l.p.Owned()
	if err != nil {
		return err
	}
	more, notes := l.spokeRows(cmd.Context())
	rows = append(rows, more...)
	out := g.Streams.Out
	if f.output == "json" {
		if err := printJSON(out, checkReport{Lab: l.plan.Lab, InSync: len(rows) == 0, Differences: rows, OwnedLinks: nonNil(owned), Hosts: notes}); err != nil {
			return err
		}
	} else {
		if len(rows) == 0 {
			fmt.Fprintf(out, "✓ the network of lab %q matches its configuration%s\n", l.plan.Lab, onHosts(l))
		} else if err := printRows(out, rows); err != nil {
			return err
		}
		for _, n := range notes {
			fmt.Fprintf(out, "! %s\n", n)
		}
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

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// onHosts names the other hosts a clean check covered.
func onHosts(l *lab) string {
	var names []string
	for _, h := range l.spokes {
		if len(h.Exec) > 0 {
			names = append(names, h.Name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return ", here and on " + strings.Join(names, ", ")
}
