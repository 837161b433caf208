package net

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	labactions "github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/labctl/cli"
	"github.com/bmlab/bmlab/internal/labvirt"
	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/plan"
)

type downReport struct {
	Lab             string   `json:"lab"`
	LibvirtNetworks []string `json:"libvirtNetworks"`
	Links           []string `json:"links"`
	// Foreign are links and networks with lab names that are not the lab's;
	// down left them.
	Foreign               []string `json:"foreign"`
	NetworkManagerSnippet string   `json:"networkManagerSnippet,omitempty"`
	// Hosts are the other hosts' results, one line each.
	Hosts []string `json:"hosts,omitempty"`
}

func newDownCommand(g *cli.Globals, f *flags) *cobra.Command {
	return &cobra.Command{
		Use:   "down",
		Short: "Remove the links, libvirt networks and NetworkManager snippet the lab owns, nothing else",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return runDown(cmd, g, f) },
	}
}

func runDown(cmd *cobra.Command, g *cli.Globals, f *flags) error {
	ctx := cmd.Context()
	l, err := open(ctx, g, f)
	if err != nil {
		return err
	}
	defer l.close()
	rep := downReport{Lab: l.plan.Lab, LibvirtNetworks: []string{}, Links: []string{}, Foreign: []string{}}
	// Libvirt networks first: they sit on the bridges.
	if l.lv != nil {
		for _, name := range l.plan.Network.BridgeNetworks {
			deleted, err := l.lv.Delete(ctx, name, l.plan.Lab)
			switch {
			case errors.Is(err, labvirt.ErrNetworkForeign):
				rep.Foreign = append(rep.Foreign, "libvirt network "+name)
			case err != nil:
				return err
			case deleted:
				rep.LibvirtNetworks = append(rep.LibvirtNetworks, name)
			}
		}
	}
	res, err := l.p.Down(ctx, l.top)
	if err != nil {
		return err
	}
	rep.Links = res.Deleted
	rep.Foreign = append(rep.Foreign, res.Foreign...)
	if nat := l.nat; l.lv != nil && nat != nil {
		deleted, err := l.lv.Delete(ctx, nat.Name, l.plan.Lab)
		switch {
		case errors.Is(err, labvirt.ErrNetworkForeign):
			rep.Foreign = append(rep.Foreign, "libvirt network "+nat.Name)
		case err != nil:
			return err
		case deleted:
			rep.LibvirtNetworks = append(rep.LibvirtNetworks, nat.Name)
		}
	}
	if path, removed, err := netplumb.RemoveUnmanagedSnippet(l.plan.Network.NMConfDir, l.plan.Lab); err != nil {
		return err
	} else if removed {
		rep.NetworkManagerSnippet = path
	}

	lines, serr := l.downSpokes(ctx)
	rep.Hosts = lines
	out := g.Streams.Out
	if f.output == "json" {
		if err := printJSON(out, rep); err != nil {
			return err
		}
		return serr
	}
	defer func() {
		for _, line := range lines {
			fmt.Fprintln(out, line)
		}
	}()
	for _, n := range rep.LibvirtNetworks {
		fmt.Fprintf(out, "✓ deleted libvirt network %s\n", n)
	}
	for _, n := range rep.Links {
		fmt.Fprintf(out, "✓ deleted link %s\n", n)
	}
	if rep.NetworkManagerSnippet != "" {
		fmt.Fprintf(out, "✓ removed %s\n", rep.NetworkManagerSnippet)
	}
	for _, n := range rep.Foreign {
		fmt.Fprintf(out, "! left %s alone: it has a lab name but is not the lab's\n", n)
	}
	if len(rep.LibvirtNetworks)+len(rep.Links) == 0 && rep.NetworkManagerSnippet == "" {
		fmt.Fprintf(out, "✓ nothing of lab %q to remove\n", l.plan.Lab)
	}
	return serr
}

// downSpokes runs `net down` on every other host through its exec:, then
// reads there which links of the lab are left: ✓ only when none is.
func (l *lab) downSpokes(ctx context.Context) ([]string, error) {
	return l.onSpokes(ctx, "down", func(h plan.Host, rep *labactions.NetReport) (string, error) {
		if len(rep.OwnedLinks) > 0 {
			return "", fmt.Errorf("host %s: after net down there, the lab's links %s are left", h.Name, strings.Join(rep.OwnedLinks, ", "))
		}
		return "no link of the lab left", nil
	})
}
