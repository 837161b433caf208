package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// State records what the lab created, in the lab's directory.
type State struct {
	Lab      string   `json:"lab"`
	Domains  []string `json:"domains,omitempty"`
	Volumes  []string `json:"volumes,omitempty"`
	Pool     string   `json:"pool,omitempty"`
	Networks []string `json:"networks,omitempty"`
	// Vbmcd is the supervised daemon, when running.
	Vbmcd *Daemon `json:"vbmcd,omitempty"`
	// Done is the last step that completed.
	Done string `json:"done,omitempty"`
}

// Daemon is a process labctl started.
type Daemon struct {
	PID  int      `json:"pid"`
	Args []string `json:"args"`
	Log  string   `json:"log"`
}

// StateDir is where a lab keeps its state and logs.
func StateDir(dir string) string { return filepath.Join(dir, ".bmlab") }

func statePath(dir string) string { return filepath.Join(StateDir(dir), "state.json") }

// LoadState reads the lab's state; a lab never brought up has an empty one.
func LoadState(dir, lab string) (*State, error) {
	b, err := os.ReadFile(statePath(dir))
	if errors.Is(err, os.ErrNotExist) {
		return &State{Lab: lab}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lab state: %w", err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("lab state %s is damaged: %w (remove it only after `labctl down` cleaned up)", statePath(dir), err)
	}
	if s.Lab != lab {
		return nil, fmt.Errorf("the directory %s holds lab %q, not %q; use another directory or name", dir, s.Lab, lab)
	}
	return &s, nil
}

// Save writes the state atomically.
func (s *State) Save(dir string) error {
	if err := os.MkdirAll(StateDir(dir), 0o755); err != nil {
		return fmt.Errorf("lab state: %w", err)
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := statePath(dir) + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("lab state: %w", err)
	}
	return os.Rename(tmp, statePath(dir))
}

func addUnique(list []string, v string) []string {
	for _, x := range list {
		if x == v {
			return list
		}
	}
	return append(list, v)
}
