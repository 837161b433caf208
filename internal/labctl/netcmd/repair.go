package netcmd

import (
	"context"
	"fmt"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/lab/steps"
	"github.com/bmlab/bmlab/internal/plan"
)

type repairReport struct {
	Lab         string           `json:"lab"`
	Differences []lab.Difference `json:"differences"`
	// Changed is what the repair changed, one line each.
	Changed []string `json:"changed"`
	// Left is what still differs after the repair (a failure).
	Left []lab.Difference `json:"left,omitempty"`
	// Hosts are the other hosts' results, one line each.
	Hosts []string `json:"hosts,omitempty"`
}

// repair is the network action's Ensure, between two checks: a change is
// printed with ✓ only when the check after it finds nothing left.
func (s *session) repair(ctx context.Context) error {
	p := s.env.Plan
	rows, err := steps.CheckNetwork(ctx, s.env)
	if err != nil {
		return err
	}
	rep := repairReport{Lab: p.Lab, Differences: rows, Changed: []string{}}
	if !s.json && len(rows) > 0 {
		if err := printRows(s.out, rows); err != nil {
			return err
		}
	}
	for _, r := range rows {
		if r.Blocking {
			if s.json {
				_ = printJSON(s.out, rep)
			}
			return fmt.Errorf("nothing changed: %s", nextStep(rows))
		}
	}
	changed, err := steps.EnsureNetwork(ctx, s.env)
	rep.Changed = append(rep.Changed, changed...)
	if err == nil {
		if rep.Left, err = steps.CheckNetwork(ctx, s.env); err == nil && len(rep.Left) > 0 {
			err = fmt.Errorf("after the repair, %d difference(s) are left", len(rep.Left))
		}
	}
	mark := "✓"
	if err != nil {
		mark = "✗"
	}
	if !s.json {
		for _, c := range changed {
			fmt.Fprintf(s.out, "%s %s\n", mark, c)
		}
		if len(rep.Left) > 0 {
			_ = printRows(s.out, rep.Left)
		}
		if err == nil && len(rows) == 0 {
			fmt.Fprintf(s.out, "✓ nothing to repair: the network of lab %q matches its configuration\n", p.Lab)
		}
	}
	if err != nil {
		if s.json {
			_ = printJSON(s.out, rep)
		}
		return err
	}
	lines, err := s.onSpokes(ctx, "repair", func(h plan.Host, r *steps.NetReport) (string, error) {
		if !r.InSync {
			return "", fmt.Errorf("host %s: after the repair there, net check reports %s", h.Name, r.Summary())
		}
		return "network in sync (repaired and checked there)", nil
	})
	rep.Hosts = lines
	if s.json {
		if jerr := printJSON(s.out, rep); jerr != nil {
			return jerr
		}
	} else {
		for _, line := range lines {
			fmt.Fprintln(s.out, line)
		}
	}
	return err
}
