// Package net is `labctl net`: check, repair and take down the lab's host
// network (netplumb's links, the libvirt networks named like the lab's
// bridges, NetworkManager's unmanaged-devices snippet).
package net

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/vishvananda/netlink"

	"github.com/bmlab/bmlab/internal/labconfig"
	"github.com/bmlab/bmlab/internal/labctl/cli"
	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/virt"
)

type flags struct {
	output        string
	netns         string
	noLibvirt     bool
	libvirtSocket string
}

// NewCommand returns `labctl net` and its subcommands.
func NewCommand(g *cli.Globals) *cobra.Command {
	f := &flags{}
	cmd := &cobra.Command{
		Use:   "net",
		Short: "Check and repair the lab's bridges, veth pairs and libvirt networks",
		Long: `The lab's host network is declared in the lab configuration (network:).
'check' lists every difference from it and exits non-zero when there is one;
'repair' prints the same list, then changes only what differs; 'down' removes
what the lab owns and nothing else. A link or libvirt network with a lab name
that the lab did not create is never changed: the command stops and says how
to clear it.`,
		// Without this, cobra prints help and succeeds on a mistyped subcommand.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unknown command %q for \"labctl net\"; the commands are check, repair and down", args[0])
			}
			return cmd.Help()
		},
	}
	pf := cmd.PersistentFlags()
	pf.StringVarP(&f.output, "output", "o", "table", "output format: table or json")
	pf.StringVar(&f.netns, "netns", "", "work in this named network namespace (ip netns) instead of the current one; libvirtd must run there for its networks")
	pf.BoolVar(&f.noLibvirt, "no-libvirt", false, "leave libvirt networks out")
	pf.StringVar(&f.libvirtSocket, "libvirt-socket", "", "libvirtd's unix socket (default /var/run/libvirt/libvirt-sock)")
	cmd.AddCommand(newCheckCommand(g, f), newRepairCommand(g, f), newDownCommand(g, f))
	return cmd
}

// lab is what every subcommand works on.
type lab struct {
	cfg  *labconfig.Config
	top  netplumb.Topology
	h    *netlink.Handle
	p    *netplumb.Plumber
	lv   *virt.NetworkConn // nil with --no-libvirt
	nmOK bool              // NetworkManager is installed
}

func open(ctx context.Context, g *cli.Globals, f *flags) (*lab, error) {
	if f.output != "table" && f.output != "json" {
		return nil, fmt.Errorf("--output %q: use table or json", f.output)
	}
	cfg, err := labconfig.Load(g.ConfigPath, g.ConfigSet)
	if err != nil {
		return nil, err
	}
	h, err := netplumb.OpenNamespace(f.netns)
	if err != nil {
		return nil, err
	}
	l := &lab{cfg: cfg, top: cfg.Network.Topology(), h: h,
		p:    netplumb.New(h, cfg.Name, g.Logger.Named("netplumb")),
		nmOK: netplumb.NetworkManagerPresent(cfg.Network.NetworkManagerConfDir)}
	if !f.noLibvirt && len(cfg.Network.LibvirtNetworks()) > 0 {
		if l.lv, err = virt.NetworkDial(ctx, f.libvirtSocket); err != nil {
			h.Close()
			return nil, fmt.Errorf("%w; start libvirtd, or pass --no-libvirt to leave libvirt networks out", err)
		}
	}
	g.Logger.Debug("lab opened", zapFields(cfg, f)...)
	return l, nil
}

func (l *lab) close() {
	if l.lv != nil {
		_ = l.lv.Close()
	}
	l.h.Close()
}

func (l *lab) networkSpec(name string) virt.NetworkSpec {
	return virt.NetworkSpec{Name: name, Bridge: name, Lab: l.cfg.Name}
}

// row is one difference, whatever it is in: a link, a libvirt network, the
// NetworkManager snippet.
type row struct {
	Object   string `json:"object"`
	Kind     string `json:"kind"`
	Want     string `json:"want,omitempty"`
	Got      string `json:"got,omitempty"`
	Blocking bool   `json:"blocking,omitempty"`
	Fix      string `json:"fix"`
}

// differences plans the links and reads the libvirt networks and the
// NetworkManager snippet.
func (l *lab) differences(ctx context.Context) (*netplumb.Plan, []row, error) {
	plan, err := l.p.Plan(l.top)
	if err != nil {
		return nil, nil, err
	}
	rows := []row{}
	for _, d := range plan.Differences {
		rows = append(rows, row{Object: d.Link, Kind: string(d.Kind), Want: d.Want, Got: d.Got, Blocking: d.Blocking, Fix: d.Fix})
	}
	if l.lv != nil {
		for _, name := range l.cfg.Network.LibvirtNetworks() {
			spec := l.networkSpec(name)
			st, err := l.lv.State(ctx, name)
			if err != nil {
				return nil, nil, err
			}
			problems := virt.NetworkProblems(spec, st)
			if len(problems) == 0 {
				continue
			}
			r := row{Object: "libvirt network " + name, Kind: "libvirt-network", Want: "active, bridge " + name,
				Got: strings.Join(problems, ", "), Fix: "define and start it"}
			if st.Exists && st.Owner != spec.Lab {
				r.Blocking = true
				r.Fix = fmt.Sprintf("the lab never changes a network it does not own: virsh net-destroy %s; virsh net-undefine %s, if it is stale", name, name)
			}
			rows = append(rows, r)
		}
	}
	if l.nmOK && !netplumb.UnmanagedSnippetCurrent(l.cfg.Network.NetworkManagerConfDir, l.cfg.Name, l.top.Names()) {
		rows = append(rows, row{Object: "NetworkManager", Kind: "unmanaged-missing",
			Want: netplumb.UnmanagedSnippetPath(l.cfg.Network.NetworkManagerConfDir, l.cfg.Name),
			Fix:  "write the unmanaged-devices snippet for the lab's links"})
	}
	return plan, rows, nil
}

// errDiffers is what check returns when anything differs.
var errDiffers = errors.New("the lab's network differs from its configuration")
