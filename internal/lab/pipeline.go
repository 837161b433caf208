package lab

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/virt"
)

// Reporter is told what the pipeline does; labctl turns it into status
// lines. Implementations must be safe for use from one goroutine at a time.
type Reporter interface {
	Start(step string)
	Note(step, msg string)
	Done(step string, changed bool, err error)
}

// Step is one idempotent stage of the pipeline.
type Step struct {
	Name string
	// Ensure creates what is missing and verifies what is there; it
	// reports whether it changed anything.
	Ensure func(ctx context.Context) (changed bool, err error)
	// Delete removes what Ensure created; absent things are not an error.
	// Nil for steps that create nothing.
	Delete func(ctx context.Context) error
}

// ErrStop, returned (wrapped) by a step's Ensure, ends Up early without an
// error: the step is not done, its message is shown, and `labctl up` again
// resumes there (for example when openshift-install is not there yet).
var ErrStop = errors.New("stopped")

// Lab is a lab being brought up or down.
type Lab struct {
	Spec  Spec
	State *State
	Be    *virt.Backend
	Log   *zap.Logger
	Rep   Reporter
	// Extra steps (network, storage, install-config, installer) are
	// inserted by the caller around the built-in ones.
	Before []Step // before nodes
	After  []Step // after BMCs
	// VolumePaths, when set, gives each node's disks, first the boot disk
	// (made by a storage step).
	VolumePaths func(NodeSpec) []string
}

// Open loads the lab's state and connects to libvirt.
func Open(ctx context.Context, spec Spec, uri string, log *zap.Logger, rep Reporter) (*Lab, error) {
	spec.Fill()
	st, err := LoadState(spec.Dir, spec.Name)
	if err != nil {
		return nil, err
	}
	be, err := virt.New(virt.Config{URI: uri, Domains: nodeNames(spec)}, log.Named("libvirt"))
	if err != nil {
		return nil, err
	}
	if err := be.Connect(ctx, 20*time.Second); err != nil {
		return nil, err
	}
	return &Lab{Spec: spec, State: st, Be: be, Log: log, Rep: rep}, nil
}

func nodeNames(s Spec) []string {
	var out []string
	for _, n := range s.Nodes {
		out = append(out, n.Name)
	}
	return out
}

// Steps returns the pipeline in order.
func (l *Lab) Steps() []Step {
	steps := []Step{{Name: "preflight", Ensure: l.preflight}}
	steps = append(steps, l.Before...)
	steps = append(steps,
		Step{Name: "nodes", Ensure: l.ensureNodes, Delete: l.deleteNodes},
		Step{Name: "bmcs", Ensure: l.ensureBMCs, Delete: l.stopBMCs},
	)
	return append(steps, l.After...)
}

// StepNames lists the steps, for --until.
func (l *Lab) StepNames() []string {
	var out []string
	for _, s := range l.Steps() {
		out = append(out, s.Name)
	}
	return out
}

// Up runs every step in order, stopping after until (when not empty). It
// records the last completed step; running it again resumes, since every
// step is idempotent.
func (l *Lab) Up(ctx context.Context, until string) error {
	steps := l.Steps()
	if until != "" {
		found := false
		for _, s := range steps {
			found = found || s.Name == until
		}
		if !found {
			return fmt.Errorf("--until %q: not a step; the steps are %s", until, strings.Join(l.StepNames(), ", "))
		}
	}
	for _, s := range steps {
		l.Rep.Start(s.Name)
		changed, err := s.Ensure(ctx)
		if errors.Is(err, ErrStop) {
			l.Rep.Note(s.Name, strings.TrimSuffix(err.Error(), ": "+ErrStop.Error()))
			l.Rep.Done(s.Name, false, err)
			return l.State.Save(l.Spec.Dir)
		}
		l.Rep.Done(s.Name, changed, err)
		if err != nil {
			if serr := l.State.Save(l.Spec.Dir); serr != nil {
				l.Log.Warn("saving the lab state failed", zap.Error(serr))
			}
			return fmt.Errorf("%s: %w", s.Name, err)
		}
		l.State.Done = s.Name
		if err := l.State.Save(l.Spec.Dir); err != nil {
			return err
		}
		if s.Name == until {
			break
		}
	}
	return nil
}

// Down runs every step's Delete in reverse order. It goes on past failures
// and returns them all, so one stuck object does not keep the rest.
func (l *Lab) Down(ctx context.Context) error {
	steps := l.Steps()
	var errs []string
	for i := len(steps) - 1; i >= 0; i-- {
		s := steps[i]
		if s.Delete == nil {
			continue
		}
		l.Rep.Start("remove " + s.Name)
		err := s.Delete(ctx)
		l.Rep.Done("remove "+s.Name, err == nil, err)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", s.Name, err))
		}
	}
	if len(errs) > 0 {
		_ = l.State.Save(l.Spec.Dir)
		return fmt.Errorf("down left things behind: %s", strings.Join(errs, "; "))
	}
	l.State.Done = ""
	return l.State.Save(l.Spec.Dir)
}
