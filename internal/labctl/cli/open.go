package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/lab/modes"
	"github.com/bmlab/bmlab/internal/lab/steps"
	"github.com/bmlab/bmlab/internal/labvirt"
	"github.com/bmlab/bmlab/internal/plan"
)

// Open says which part of which lab a command works on. The zero value is
// the lab the flags select, every host of it.
type Open struct {
	// Lab is --lab NAME: the lab found by its name and marks alone, its
	// lab file gone (the seed lab renamed; its mode unknown).
	Lab string
	// Host is --host NAME: the part of a lab over several hosts that this
	// host holds, labctl running on it.
	Host string
	// Here keeps to what is on this host, the hub's own part of a lab over
	// several hosts included (net: the other hosts answer for theirs
	// through their exec:); a lab over several hosts then needs Host.
	Here bool
	// NoLibvirt leaves libvirt out: the lab's links only, none of its
	// libvirt networks (net --no-libvirt).
	NoLibvirt bool
	// Check sees the plan before any host is reached (the flags' own
	// mistakes are said first).
	Check func(p *plan.Plan, m lab.Mode) error
	// Quiet drops the steps' notes (the command prints what they return).
	Quiet bool
	// Hint follows an error reaching the platform (what else to try).
	Hint string
}

// Lab is an open lab: what its actions work with, its mode, and the lab's
// other hosts when this is the hub of a lab over several (Here).
type Lab struct {
	*lab.Env
	Mode   lab.Mode
	Spokes []plan.Host
	close  func()
}

// Close lets go of the provider.
func (l *Lab) Close() { l.close() }

// Open is the one way every command opens a lab: its plan from the lab
// file (or the lab's name), the mode checked against labctl's modes and
// the lab that exists, then the provider for the hosts it covers.
func (g *Globals) Open(ctx context.Context, o Open) (*Lab, error) {
	var p *plan.Plan
	var err error
	if o.Lab != "" {
		p, err = g.LoadPlanNamed(o.Lab)
	} else {
		p, err = g.LoadPlan()
	}
	if err != nil {
		return nil, err
	}
	m, err := modes.All.Lookup(p.Mode)
	if err != nil {
		if p.ModeFrom == plan.ModeFromFile {
			return nil, fmt.Errorf("mode: %q in the lab file: use %s", p.Mode, strings.Join(modes.All.Names(), ", "))
		}
		return nil, err
	}
	l := &Lab{Mode: m}
	switch host, ok := p.ForHost(o.Host); {
	case o.Here && len(p.Hosts) > 0 && o.Host == "":
		return nil, fmt.Errorf("lab %q is spread over hosts %s: name the one this runs on with --host", p.Lab, hostNames(p))
	case len(p.Hosts) == 0 && o.Host != "":
		return nil, fmt.Errorf("--host %q: lab %q is on one host (its lab file has no hosts:)", o.Host, p.Lab)
	case o.Host != "" && !ok:
		return nil, fmt.Errorf("--host %q: lab %q has hosts %s", o.Host, p.Lab, hostNames(p))
	case ok && host.Hub && o.Here:
		l.Spokes = p.Spokes()
		q := *p
		q.LibvirtURI = host.LibvirtURI
		p = &q
	case ok:
		if p, err = p.ForSpoke(o.Host); err != nil {
			return nil, err
		}
	}
	if o.NoLibvirt {
		q := *p
		q.Network.NAT, q.Network.BridgeNetworks = nil, nil
		q.LinksOnly = true
		p = &q
	}
	if o.Check != nil {
		if err := o.Check(p, m); err != nil {
			return nil, err
		}
	}
	var prov interface {
		lab.Provider
		Close()
	}
	switch {
	case o.NoLibvirt:
		prov, err = labvirt.OpenLinks(p, g.Logger)
	case len(p.Hosts) > 0 && p.Spoke == "" && !o.Here:
		prov, err = labvirt.OpenHosts(ctx, p, g.Logger)
	default:
		prov, err = labvirt.Open(ctx, p, g.Logger)
	}
	if err != nil {
		if o.Hint != "" {
			err = fmt.Errorf("%w; %s", err, o.Hint)
		}
		return nil, err
	}
	var rep lab.Reporter = g.Status()
	if o.Quiet {
		rep = quiet{}
	}
	l.Env = &lab.Env{Plan: p, Host: prov, Rep: rep, Log: g.Logger, Remote: steps.ExecRunner{}}
	l.close = prov.Close
	return l, nil
}

// quiet drops the steps' notes.
type quiet struct{}

func (quiet) Start(string)             {}
func (quiet) Note(string, string)      {}
func (quiet) Progress(string, string)  {}
func (quiet) Done(string, bool, error) {}

func hostNames(p *plan.Plan) string {
	var names []string
	for _, h := range p.Hosts {
		names = append(names, h.Name)
	}
	return strings.Join(names, ", ")
}
