// Package cli holds what every labctl subcommand shares: the I/O streams,
// the logger and the global flags. It exists so that subcommand packages need
// not import the root command.
package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/lab/modes"
	"github.com/bmlab/bmlab/internal/labconfig"
	"github.com/bmlab/bmlab/internal/plan"
)

// Streams are the command's standard streams. What people read goes to Out;
// logs go to the logger, never to Out.
type Streams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
}

// Globals are the values of the root command's flags and what main passes in.
// Subcommands read them when they run, after flags are parsed.
type Globals struct {
	Logger  *zap.Logger
	Streams Streams
	// ConfigPath is the lab configuration file; ConfigSet says whether the
	// user named it (then it must exist).
	ConfigPath string
	ConfigSet  bool
	// Profile, Mode, Netns and LibvirtURI select and shape the lab with the
	// lab file; every subcommand takes them, so the same flags select the
	// same lab everywhere.
	Profile    string
	Mode       string
	Netns      string
	LibvirtURI string
	// Vbmcd is the vbmcd binary labctl starts (up only).
	Vbmcd string
	// Dir is the lab's directory (default: the lab file's); needed with a
	// lab file on standard input (-f -).
	Dir string
	// PullSecret and SSHKey override the lab file's input files (up's
	// flags); relative to the working directory.
	PullSecret, SSHKey string
	// Progress is auto, tty or plain (--progress).
	Progress string
}

// Status is the status-line writer for the command's output.
func (g *Globals) Status() *Status { return NewStatus(g.Streams.Out, g.Progress) }

// LoadPlan resolves the lab the flags select.
func (g *Globals) LoadPlan() (*plan.Plan, error) {
	vb, _ := FindVbmcd(g.Vbmcd)
	o := plan.Options{
		ConfigPath: g.ConfigPath, ConfigSet: g.ConfigSet, Profile: g.Profile, Mode: g.Mode, Modes: modes.All.Specs(), Dir: g.Dir,
		Netns: g.Netns, LibvirtURI: g.LibvirtURI, Vbmcd: vb, HostCPUs: runtime.NumCPU(),
	}
	for _, f := range []struct{ in, out *string }{{&g.PullSecret, &o.PullSecret}, {&g.SSHKey, &o.SSHKey}} {
		if *f.in != "" {
			abs, err := filepath.Abs(*f.in)
			if err != nil {
				return nil, err
			}
			*f.out = abs
		}
	}
	if g.ConfigSet && g.ConfigPath == "-" {
		// What labctl on the hub runs on the lab's other hosts.
		data, err := io.ReadAll(g.Streams.In)
		if err != nil {
			return nil, fmt.Errorf("read the lab file from standard input: %w", err)
		}
		o.ConfigData = data
	}
	return plan.Load(o)
}

// LoadPlanNamed resolves the seed lab renamed to name, for commands that
// find a lab by its marks when its lab file is gone (down --lab).
func (g *Globals) LoadPlanNamed(name string) (*plan.Plan, error) {
	cfg := labconfig.Default()
	cfg.Name = name
	cfg.Cluster.Name = name
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("--lab: %w", err)
	}
	if err := cfg.ApplyProfile(g.Profile); err != nil {
		return nil, err
	}
	dir, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	return plan.Resolve(cfg, plan.Options{Dir: dir, Profile: g.Profile, Mode: modes.All[0].Name, Modes: modes.All.Specs(), Netns: g.Netns, LibvirtURI: g.LibvirtURI, HostCPUs: runtime.NumCPU()})
}

// FindVbmcd returns the vbmcd binary: the one given, else next to labctl,
// else on PATH; "" when there is none (only up needs it, and says so).
func FindVbmcd(given string) (string, error) {
	if given != "" {
		return filepath.Abs(given)
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "vbmcd")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		p := filepath.Join(d, "vbmcd")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", nil
}
