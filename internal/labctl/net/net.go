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

	labactions "github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/labctl/cli"
	"github.com/bmlab/bmlab/internal/labvirt"
	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/plan"
)

type flags struct {
	output    string
	noLibvirt bool
	host      string
}

// NewCommand returns `labctl net` and its subcommands.
func NewCommand(g *cli.Globals) *cobra.Command {
	f := &flags{}
	cmd := &cobra.Command{
		Use:   "net",
		Short: "Check and repair the lab's bridges, veth pairs and libvirt networks",
		Long: `The lab's host network is what the lab plan says: the lab file, with the
same -f, --profile, --mode and --netns as up, down and status take. 'check'
lists every difference from it (its NAT network, bridges, veths, the
bridge-named libvirt networks) and exits non-zero when there is one;
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
	pf.BoolVar(&f.noLibvirt, "no-libvirt", false, "leave libvirt networks (the lab's NAT network and the bridge-named ones) out")
	pf.StringVar(&f.host, "host", "", "for a lab spread over hosts: the host (of the lab file's hosts:) whose network to work on; run it on that host")
	cmd.AddCommand(newCheckCommand(g, f), newRepairCommand(g, f), newDownCommand(g, f))
	return cmd
}

// lab is what every subcommand works on.
type lab struct {
	plan *plan.Plan
	top  netplumb.Topology
	nat  *plan.NAT // the lab's NAT network, on the hub only
	h    *netlink.Handle
	p    *netplumb.Plumber
	lv   *labvirt.NetworkConn // nil with --no-libvirt
	nmOK bool                 // NetworkManager is installed
	// spokes are the lab's other hosts when this is the hub of a lab over
	// several: check, repair and down reach them through their exec:.
	spokes []plan.Host
	remote labactions.Runner
	args   []string // the flags to hand on (--no-libvirt)
}

func open(ctx context.Context, g *cli.Globals, f *flags) (*lab, error) {
	if f.output != "table" && f.output != "json" {
		return nil, fmt.Errorf("--output %q: use table or json", f.output)
	}
	p, err := g.LoadPlan()
	if err != nil {
		return nil, err
	}
	top, nat, uri := p.Network.Topology, p.Network.NAT, p.LibvirtURI
	switch host, ok := p.ForHost(f.host); {
	case len(p.Hosts) > 0 && f.host == "":
		return nil, fmt.Errorf("lab %q is spread over hosts %s: name the one this runs on with --host", p.Lab, hostNames(p))
	case len(p.Hosts) == 0 && f.host != "":
		return nil, fmt.Errorf("--host %q: lab %q is on one host (its lab file has no hosts:)", f.host, p.Lab)
	case f.host != "" && !ok:
		return nil, fmt.Errorf("--host %q: lab %q has hosts %s", f.host, p.Lab, hostNames(p))
	case ok:
		top, uri = host.Topology, host.LibvirtURI
		if !host.Hub {
			nat = nil
		}
	}
	var spokes []plan.Host
	if h, ok := p.ForHost(f.host); ok && h.Hub {
		spokes = p.Spokes()
	}
	h, err := netplumb.OpenNamespace(p.Netns)
	if err != nil {
		return nil, err
	}
	l := &lab{plan: p, top: top, nat: nat, h: h,
		p:      netplumb.New(h, p.Lab, g.Logger.Named("netplumb")),
		nmOK:   netplumb.NetworkManagerPresent(p.Network.NMConfDir),
		spokes: spokes, remote: labactions.ExecRunner{}}
	if f.noLibvirt {
		l.args = []string{"--no-libvirt"}
	}
	if !f.noLibvirt && (len(p.Network.BridgeNetworks) > 0 || nat != nil) {
		if l.lv, err = labvirt.NetworkDial(ctx, uri); err != nil {
			h.Close()
			return nil, fmt.Errorf("%w; start libvirtd, or pass --no-libvirt to leave libvirt networks out", err)
		}
	}
	g.Logger.Debug("lab opened", zapFields(p, f)...)
	return l, nil
}

func hostNames(p *plan.Plan) string {
	var names []string
	for _, h := range p.Hosts {
		names = append(names, h.Name)
	}
	return strings.Join(names, ", ")
}

func (l *lab) close() {
	if l.lv != nil {
		_ = l.lv.Close()
	}
	l.h.Close()
}

func (l *lab) networkSpec(name string) labvirt.NetworkSpec {
	return labvirt.NetworkSpec{Name: name, Bridge: name, Lab: l.plan.Lab}
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
	if l.lv != nil && l.nat != nil {
		// First: the veth's far end is on its bridge.
		spec := labactions.NATSpec(l.plan)
		drift, err := l.lv.NATDrift(ctx, spec)
		if err != nil {
			return nil, nil, err
		}
		if len(drift) > 0 {
			r := row{Object: "libvirt network " + spec.Name, Kind: "nat-network", Want: "active NAT network " + spec.CIDR.String() + " on " + spec.Bridge,
				Got: strings.Join(drift, ", "), Fix: "define, correct or start it"}
			if st, err := l.lv.State(ctx, spec.Name); err == nil && st.Exists && st.Owner != l.plan.Lab {
				r.Blocking = true
				r.Fix = fmt.Sprintf("the lab never changes a network it does not own: virsh net-destroy %s; virsh net-undefine %s, if it is stale", spec.Name, spec.Name)
			}
			rows = append(rows, r)
		}
	}
	for _, d := range plan.Differences {
		rows = append(rows, row{Object: d.Link, Kind: string(d.Kind), Want: d.Want, Got: d.Got, Blocking: d.Blocking, Fix: d.Fix})
	}
	if l.lv != nil {
		for _, name := range l.plan.Network.BridgeNetworks {
			spec := l.networkSpec(name)
			st, err := l.lv.State(ctx, name)
			if err != nil {
				return nil, nil, err
			}
			problems := labvirt.NetworkProblems(spec, st)
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
	if l.nmOK && !netplumb.UnmanagedSnippetCurrent(l.plan.Network.NMConfDir, l.plan.Lab, l.top.Names()) {
		rows = append(rows, row{Object: "NetworkManager", Kind: "unmanaged-missing",
			Want: netplumb.UnmanagedSnippetPath(l.plan.Network.NMConfDir, l.plan.Lab),
			Fix:  "write the unmanaged-devices snippet for the lab's links"})
	}
	return plan, rows, nil
}

// errDiffers is what check returns when anything differs.
var errDiffers = errors.New("the lab's network differs from its configuration")

// onSpoke runs `labctl net SUB --host NAME` on another host of the lab.
func (l *lab) onSpoke(ctx context.Context, h plan.Host, sub ...string) ([]byte, error) {
	args := labactions.SpokeArgs(l.plan, h, append([]string{"net"}, sub...)...)
	return l.remote.Labctl(ctx, h, l.plan.Source, append(args, l.args...)...)
}

// checkSpoke is CheckSpokeNet with this command's flags.
func (l *lab) checkSpoke(ctx context.Context, h plan.Host) (*labactions.NetReport, error) {
	return labactions.CheckSpokeNet(ctx, l.remote, l.plan, h, l.args...)
}

// spokeRows are the other hosts' differences, each object named with its
// host, and a line per host that was not checked.
func (l *lab) spokeRows(ctx context.Context) (rows []row, notes []string) {
	for _, h := range l.spokes {
		if len(h.Exec) == 0 {
			notes = append(notes, fmt.Sprintf("host %s: not checked (no exec: in the lab file); run there: labctl net check --host %s", h.Name, h.Name))
			continue
		}
		rep, err := l.checkSpoke(ctx, h)
		if err != nil {
			rows = append(rows, row{Object: "host " + h.Name, Kind: "unreachable", Got: err.Error(), Blocking: true,
				Fix: "make hosts[].exec of " + h.Name + " work, or run `labctl net check --host " + h.Name + "` there"})
			continue
		}
		for _, d := range rep.Differences {
			rows = append(rows, row{Object: h.Name + ": " + d.Object, Kind: d.Kind, Want: d.Want, Got: d.Got, Fix: d.Fix + " (labctl net repair reaches " + h.Name + " through its exec:)"})
		}
	}
	return rows, notes
}

// onSpokes runs `net SUB` on every other host through its exec:, then `net
// check` there, and judges its report: a host gets ✓ only when judge says
// so. A host without exec: gets a line saying what to run there.
func (l *lab) onSpokes(ctx context.Context, sub string, judge func(plan.Host, *labactions.NetReport) (string, error)) ([]string, error) {
	var lines []string
	var errs []error
	for _, h := range l.spokes {
		if len(h.Exec) == 0 {
			lines = append(lines, fmt.Sprintf("! host %s: not reached (no exec: in the lab file); run there: labctl net %s --host %s", h.Name, sub, h.Name))
			continue
		}
		var ok string
		_, err := l.onSpoke(ctx, h, sub)
		if err == nil {
			var rep *labactions.NetReport
			if rep, err = l.checkSpoke(ctx, h); err == nil {
				ok, err = judge(h, rep)
			}
		}
		if err != nil {
			errs = append(errs, err)
			lines = append(lines, fmt.Sprintf("✗ host %s: net %s", h.Name, sub))
			continue
		}
		lines = append(lines, fmt.Sprintf("✓ host %s: %s", h.Name, ok))
	}
	return lines, errors.Join(errs...)
}
