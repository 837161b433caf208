package labctl

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/bmlab/bmlab/internal/lab/modes"
	"github.com/bmlab/bmlab/internal/labconfig"
	"github.com/bmlab/bmlab/internal/labctl/cli"
	"github.com/bmlab/bmlab/internal/labctl/console"
	"github.com/bmlab/bmlab/internal/labctl/demo"
	"github.com/bmlab/bmlab/internal/labctl/graph"
	"github.com/bmlab/bmlab/internal/labctl/netcmd"
	"github.com/bmlab/bmlab/internal/labctl/up"
)

// Streams are the command's standard streams.
type Streams = cli.Streams

// Run runs labctl with args (without the program name). logger should log at
// debug level; without -v, Run raises it to warnings.
func Run(ctx context.Context, logger *zap.Logger, streams Streams, args []string) error {
	cmd := NewCommand(logger, streams)
	cmd.SetArgs(args)
	return cmd.ExecuteContext(ctx)
}

// NewCommand returns the root command.
func NewCommand(logger *zap.Logger, streams Streams) *cobra.Command {
	g := &cli.Globals{Logger: logger, Streams: streams}
	var verbose bool
	cmd := &cobra.Command{
		Use:           "labctl",
		Short:         "labctl builds and repairs a bare-metal lab of VMs for OpenShift, Metal3 and Ironic",
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			g.ConfigSet = cmd.Flags().Changed("config")
			switch g.Progress {
			case cli.ProgressAuto, cli.ProgressTTY, cli.ProgressPlain:
			default:
				return fmt.Errorf("--progress %q: use auto, tty or plain", g.Progress)
			}
			if !verbose {
				g.Logger = logger.WithOptions(zap.IncreaseLevel(zapcore.WarnLevel))
			}
			return nil
		},
	}
	cmd.SetIn(streams.In)
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	cmd.PersistentFlags().StringVarP(&g.ConfigPath, "config", "f", labconfig.DefaultPath,
		"the lab configuration file, - for standard input (without it and without "+labconfig.DefaultPath+": the seed lab)")
	pf := cmd.PersistentFlags()
	pf.StringVar(&g.Profile, "profile", "", "tiny: shrink every node for a demo on a small machine (once the lab exists, its own: later commands need not repeat it)")
	pf.StringVar(&g.Mode, "mode", "", strings.Join(modes.All.Names(), ", ")+" (the installer flow; default: the lab file's mode:, else the existing lab's, else "+modes.All[0].Name+"); refused when it disagrees with the lab that exists")
	pf.StringVar(&g.Progress, "progress", cli.ProgressAuto, "auto (animated on a terminal), tty or plain (a line now and then, for CI logs)")
	pf.StringVar(&g.Netns, "netns", "", "the named network namespace (ip netns) of the lab's links and vbmcd, where libvirtd runs (default: labctl's own)")
	pf.StringVar(&g.LibvirtURI, "libvirt-uri", "qemu:///system", "libvirt URI")
	pf.StringVar(&g.Vbmcd, "vbmcd", "", "the vbmcd binary up starts (default: next to labctl, then PATH)")
	pf.StringVar(&g.Dir, "dir", "", "the lab's directory (default: the lab file's); needed with -f - (the lab file on standard input)")
	pf.BoolVarP(&verbose, "verbose", "v", false, "debug logs on stderr")
	cmd.AddCommand(netcmd.NewCommand(g), demo.NewCommand(g), graph.NewCommand(g), console.NewCommand(g))
	cmd.AddCommand(up.NewCommands(g)...)
	return cmd
}
