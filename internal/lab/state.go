package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/bmlab/bmlab/internal/plan"
)

// State is the little the lab records beside its marks: its mode and
// profile (which the plan of every later command takes), and the last
// action done, for `labctl status`. Nothing depends on it to find the
// lab's objects.
type State struct {
	Lab  string `json:"lab"`
	Mode string `json:"mode"`
	// Profile is the profile the lab was built with ("" the default).
	Profile string `json:"profile"`
	Done    string `json:"done,omitempty"`
}

func statePath(p *plan.Plan) string { return p.Paths.State }

// LoadState reads the lab's state; a lab never brought up has an empty one.
func LoadState(p *plan.Plan) (*State, error) {
	b, err := os.ReadFile(statePath(p))
	if errors.Is(err, os.ErrNotExist) {
		return &State{Lab: p.Lab, Mode: p.Mode, Profile: p.Profile}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lab state: %w", err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("lab state %s is damaged (%v): remove it; labctl finds the lab's objects by their marks", statePath(p), err)
	}
	if s.Lab != p.Lab {
		return nil, fmt.Errorf("the directory %s holds lab %q, not %q; use another directory or name", p.Dir, s.Lab, p.Lab)
	}
	return &s, nil
}

// Save writes the state atomically, with the plan's profile (a state
// written before the profile was recorded gets it now).
func (s *State) Save(p *plan.Plan) error {
	s.Profile = p.Profile
	if err := os.MkdirAll(p.StateDir, 0o755); err != nil {
		return fmt.Errorf("lab state: %w", err)
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := statePath(p) + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("lab state: %w", err)
	}
	return os.Rename(tmp, statePath(p))
}

// RemoveState forgets the last action done.
func RemoveState(p *plan.Plan) error {
	if err := os.Remove(statePath(p)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("lab state: %w", err)
	}
	return nil
}

// removeSpokeDirs removes, on a host other than the hub, what labctl made
// there in the lab's directory beside the pool: the nodes' serial logs, the
// logs directory and the state directory, when empty. (On the hub they are
// the user's to read after down.)
func removeSpokeDirs(p *plan.Plan) error {
	var errs []error
	dirs := map[string]bool{}
	for _, n := range p.Nodes {
		if err := os.Remove(n.SerialLog); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		dirs[filepath.Dir(n.SerialLog)] = true
	}
	for d := range dirs {
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("serial logs: %w", err))
		}
	}
	if err := os.Remove(p.StateDir); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("lab state: %w", err))
	}
	return errors.Join(errs...)
}
