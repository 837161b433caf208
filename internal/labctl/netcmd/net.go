// Package netcmd is `labctl net`: check, repair and take down the lab's
// host network. It is a view over the network step of internal/lab/steps
// (CheckNetwork, EnsureNetwork, RemoveNetwork): it picks the host (--host),
// leaves libvirt out when asked (--no-libvirt), reaches the lab's other
// hosts through their exec:, and prints. It implements nothing of its own.
package netcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/lab/steps"
	"github.com/bmlab/bmlab/internal/labctl/cli"
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
same -f, --profile and --netns as up, down and status take. 'check' lists
every difference from it (its NAT network or its entries in a shared one,
bridges, veths, VXLAN links, the bridge-named libvirt networks,
NetworkManager's snippet, the host resolver's drop-in) and exits non-zero
when there is one; 'repair' prints the same list, then changes only what
differs and checks again; 'down' removes what the lab owns and nothing else.
They run the network step of 'labctl up' and 'labctl down'. On a lab over
several hosts --host names the one this runs on; the hub reaches the
others through their exec: and reports them too. A link, libvirt network or
file with a lab name that the lab did not make is never changed: the
command stops and says how to clear it.`,
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
	pf.BoolVar(&f.noLibvirt, "no-libvirt", false, "leave libvirt out: its networks (the lab's NAT network and the bridge-named ones) and the LLDP sender, which reads the nodes over libvirt")
	pf.StringVar(&f.host, "host", "", "for a lab spread over hosts: the host (of the lab file's hosts:) whose network to work on; run it on that host")
	cmd.AddCommand(
		subcommand(g, f, "check", "List every difference between the host network and the lab's configuration; exit 1 if any", (*session).check),
		subcommand(g, f, "repair", "Print the differences, then change only what differs and check again (idempotent)", (*session).repair),
		subcommand(g, f, "down", "Remove the LLDP sender, links, libvirt networks and NetworkManager snippet the lab owns, nothing else", (*session).down),
	)
	return cmd
}

// subcommand is one of check, repair and down: it opens the session, runs,
// and closes it.
func subcommand(g *cli.Globals, f *flags, use, short string, run func(*session, context.Context) error) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := open(cmd.Context(), g, f)
			if err != nil {
				return err
			}
			defer s.close()
			return run(s, cmd.Context())
		},
	}
}

// session is what every subcommand works on: the plan of this host's part
// of the lab, the provider, and the lab's other hosts when this is the hub.
type session struct {
	env    *lab.Env
	close  func()
	spokes []plan.Host
	remote lab.Runner
	args   []string // the flags to hand on (--no-libvirt)
	json   bool
	out    io.Writer
}

// open opens the lab for the host this runs on (the hub's part, or a
// spoke's with --host), without libvirt's objects when --no-libvirt.
func open(ctx context.Context, g *cli.Globals, f *flags) (*session, error) {
	if f.output != "table" && f.output != "json" {
		return nil, fmt.Errorf("--output %q: use table or json", f.output)
	}
	o := cli.Open{Host: f.host, Here: true, NoLibvirt: f.noLibvirt, Quiet: true}
	if !f.noLibvirt {
		o.Hint = "or pass --no-libvirt to leave libvirt networks out"
	}
	l, err := g.Open(ctx, o)
	if err != nil {
		return nil, err
	}
	s := &session{env: l.Env, close: l.Close, spokes: l.Spokes, remote: l.Remote, json: f.output == "json", out: g.Streams.Out}
	if f.noLibvirt {
		s.args = []string{"--no-libvirt"}
	}
	p := l.Plan
	g.Logger.Debug("lab opened", zap.String("lab", p.Lab), zap.String("netns", p.Netns), zap.Bool("libvirt", !f.noLibvirt), zap.String("host", f.host))
	return s, nil
}

// errDiffers is what check returns when anything differs.
var errDiffers = errors.New("the lab's network differs from its configuration")

// onSpoke runs `labctl net SUB --host NAME` on another host of the lab.
func (s *session) onSpoke(ctx context.Context, h plan.Host, sub ...string) ([]byte, error) {
	p := s.env.Plan
	args := steps.SpokeArgs(p, h, append([]string{"net"}, sub...)...)
	return s.remote.Labctl(ctx, h, p.Source, append(args, s.args...)...)
}

// checkSpoke is CheckSpokeNet with this command's flags.
func (s *session) checkSpoke(ctx context.Context, h plan.Host) (*steps.NetReport, error) {
	return steps.CheckSpokeNet(ctx, s.remote, s.env.Plan, h, s.args...)
}

// spokeRows are the other hosts' differences, each object named with its
// host, and a line per host that was not checked.
func (s *session) spokeRows(ctx context.Context) (rows []lab.Difference, notes []string) {
	if len(s.spokes) == 0 {
		return nil, nil
	}
	for _, sn := range steps.CheckSpokes(ctx, s.remote, s.env.Plan, s.args...) {
		h := sn.Host
		switch {
		case !sn.Checked():
			notes = append(notes, sn.String())
			continue
		case sn.Err != nil:
			rows = append(rows, lab.Difference{Object: "host " + h.Name, Kind: "unreachable", Got: sn.Err.Error(), Blocking: true,
				Fix: "make hosts[].exec of " + h.Name + " work, or run `labctl net check --host " + h.Name + "` there"})
			continue
		}
		for _, d := range sn.Report.Differences {
			d.Object = h.Name + ": " + d.Object
			d.Fix += " (labctl net repair reaches " + h.Name + " through its exec:)"
			rows = append(rows, d)
		}
	}
	return rows, notes
}

// onSpokes runs `net SUB` on every other host through its exec:, then `net
// check` there, and judges its report: a host gets ✓ only when judge says
// so. A host without exec: gets a line saying what to run there.
func (s *session) onSpokes(ctx context.Context, sub string, judge func(plan.Host, *steps.NetReport) (string, error)) ([]string, error) {
	var lines []string
	var errs []error
	for _, h := range s.spokes {
		if len(h.Exec) == 0 {
			lines = append(lines, fmt.Sprintf("! host %s: not reached (no exec: in the lab file); run there: labctl net %s --host %s", h.Name, sub, h.Name))
			continue
		}
		var ok string
		_, err := s.onSpoke(ctx, h, sub)
		if err == nil {
			var rep *steps.NetReport
			if rep, err = s.checkSpoke(ctx, h); err == nil {
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

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printRows(w io.Writer, rows []lab.Difference) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OBJECT\tDIFFERENCE\tWANT\tGOT\tFIX")
	for _, r := range rows {
		kind := r.Kind
		if r.Blocking {
			kind += " (blocking)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Object, kind, dash(r.Want), dash(r.Got), r.Fix)
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// nextStep tells the user what to run, or what to clear first.
func nextStep(rows []lab.Difference) string {
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
