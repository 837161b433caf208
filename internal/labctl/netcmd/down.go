package netcmd

import (
	"context"
	"fmt"
	"strings"

	"github.com/bmlab/bmlab/internal/lab/steps"
	"github.com/bmlab/bmlab/internal/plan"
)

type downReport struct {
	Lab string `json:"lab"`
	steps.NetworkRemoval
	// Hosts are the other hosts' results, one line each.
	Hosts []string `json:"hosts,omitempty"`
}

// down is the network action's Delete (what `labctl down` runs), printed.
func (s *session) down(ctx context.Context) error {
	p := s.env.Plan
	rm, err := steps.RemoveNetwork(ctx, s.env)
	rep := downReport{Lab: p.Lab, NetworkRemoval: rm}
	var serr error
	if err == nil {
		rep.Hosts, serr = s.onSpokes(ctx, "down", func(h plan.Host, r *steps.NetReport) (string, error) {
			if len(r.OwnedLinks) > 0 {
				return "", fmt.Errorf("host %s: after net down there, the lab's links %s are left", h.Name, strings.Join(r.OwnedLinks, ", "))
			}
			return "no link of the lab left", nil
		})
	}
	if s.json {
		if jerr := printJSON(s.out, rep); jerr != nil {
			return jerr
		}
		if err != nil {
			return err
		}
		return serr
	}
	mark := "✓"
	if err != nil {
		mark = "✗" // removed, but something of the lab is left
	}
	for _, pid := range rm.LLDPSenders {
		fmt.Fprintf(s.out, "%s stopped the LLDP sender (pid %s)\n", mark, pid)
	}
	for _, n := range rm.Shared {
		fmt.Fprintf(s.out, "%s removed the lab's entries from the shared libvirt network %s\n", mark, n)
	}
	for _, n := range rm.Networks {
		fmt.Fprintf(s.out, "%s deleted libvirt network %s\n", mark, n)
	}
	for _, n := range rm.Links {
		fmt.Fprintf(s.out, "%s deleted link %s\n", mark, n)
	}
	if rm.Snippet != "" {
		fmt.Fprintf(s.out, "%s removed %s\n", mark, rm.Snippet)
	}
	for _, f := range rm.ResolverDropIns {
		fmt.Fprintf(s.out, "%s removed %s\n", mark, f)
	}
	for _, n := range rm.Foreign {
		fmt.Fprintf(s.out, "! left %s alone: it has a lab name but is not the lab's\n", n)
	}
	if err != nil {
		return err
	}
	if len(rm.LLDPSenders)+len(rm.Shared)+len(rm.Networks)+len(rm.Links)+len(rm.ResolverDropIns) == 0 && rm.Snippet == "" {
		fmt.Fprintf(s.out, "✓ nothing of lab %q to remove\n", p.Lab)
	}
	for _, line := range rep.Hosts {
		fmt.Fprintln(s.out, line)
	}
	return serr
}
