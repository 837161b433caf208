package netcmd

import (
	"context"
	"fmt"
	"strings"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/lab/steps"
)

// check lists every difference of the host network (and the other hosts'
// through their exec:) from the plan; it fails while there is one.
func (s *session) check(ctx context.Context) error {
	p := s.env.Plan
	rows, err := steps.CheckNetwork(ctx, s.env)
	if err != nil {
		return err
	}
	owned, err := s.env.Host.Marked(ctx, lab.KindLink, p.Lab)
	if err != nil {
		return err
	}
	more, notes := s.spokeRows(ctx)
	rows = append(rows, more...)
	if s.json {
		rep := steps.NetReport{Lab: p.Lab, InSync: len(rows) == 0, Differences: rows, OwnedLinks: nonNil(owned), NotChecked: notes}
		if err := printJSON(s.out, rep); err != nil {
			return err
		}
	} else {
		if len(rows) == 0 {
			fmt.Fprintf(s.out, "✓ the network of lab %q matches its configuration%s\n", p.Lab, s.onHosts())
		} else if err := printRows(s.out, rows); err != nil {
			return err
		}
		for _, n := range notes {
			fmt.Fprintf(s.out, "! %s\n", n)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d difference(s); %s", errDiffers, len(rows), nextStep(rows))
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// onHosts names the other hosts a clean check covered.
func (s *session) onHosts() string {
	var names []string
	for _, h := range s.spokes {
		if len(h.Exec) > 0 {
			names = append(names, h.Name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return ", here and on " + strings.Join(names, ", ")
}
