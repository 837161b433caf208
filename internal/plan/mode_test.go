package plan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestModeInTheLabFile: the lab file's mode: is the mode; --mode
// overrides it while no lab exists; once the lab exists (its state file
// names its mode) neither may disagree with it, and without either the
// lab's own mode is taken, so --mode need not be repeated.
func TestModeInTheLabFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "lab.yaml")
	write := func(lab string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(lab), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	load := func(flag string) (*Plan, error) {
		return Load(Options{Modes: testModes, ConfigPath: file, ConfigSet: true, Mode: flag})
	}
	write("name: md\nmode: agent\n")
	for _, tt := range []struct{ flag, mode, from string }{
		{"", modeAgent, ModeFromFile},
		{modeIPI, modeIPI, ModeFromFlag},
	} {
		p, err := load(tt.flag)
		if err != nil || p.Mode != tt.mode || p.ModeFrom != tt.from {
			t.Errorf("--mode %q: %v; want mode %s from %s", tt.flag, err, tt.mode, tt.from)
			continue
		}
	}
	write("name: md\n")
	if p, err := load(""); err != nil || p.Mode != modeIPI || p.ModeFrom != ModeFromDefault {
		t.Errorf("no mode anywhere: %v, %+v", err, p)
	}

	// The lab exists, as an agent lab.
	state := filepath.Join(dir, ".bmlab", "state.json")
	if err := os.MkdirAll(filepath.Dir(state), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(state, []byte(`{"lab": "md", "mode": "agent", "done": "bmcs"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if p, err := load(""); err != nil || p.Mode != modeAgent || p.ModeFrom != ModeFromState {
		t.Errorf("an agent lab, no mode given: %v, %+v", err, p)
	}
	if p, err := load(modeAgent); err != nil || p.Mode != modeAgent {
		t.Errorf("an agent lab, --mode agent: %v, %+v", err, p)
	}
	if _, err := load(modeHybrid); err == nil || !strings.Contains(err.Error(), `--mode hybrid: lab "md" exists in mode agent`) || !strings.Contains(err.Error(), "`labctl down` it first, or leave --mode out") {
		t.Errorf("an agent lab, --mode hybrid: %v", err)
	}
	write("name: md\nmode: ipi-baremetal\n")
	if _, err := load(""); err == nil || !strings.Contains(err.Error(), `mode: ipi-baremetal in the lab file, but lab "md" exists in mode agent`) || !strings.Contains(err.Error(), "or write mode: agent") {
		t.Errorf("an agent lab, mode: ipi-baremetal in its file: %v", err)
	}
	// Another lab's state in the directory is not this lab.
	write("name: other\nmode: hybrid\ncluster: {image: /i.qcow2}\n")
	if p, err := load(""); err != nil || p.Mode != modeHybrid {
		t.Errorf("another lab's state: %v, %+v", err, p)
	}
}

// TestProfileOfTheLab: once the lab exists its state records its profile;
// a command given no --profile takes it (the nodes' sizes are the lab's),
// one given another is refused, as --mode is; a state from before the
// profile was recorded takes --profile as given.
func TestProfileOfTheLab(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "lab.yaml")
	if err := os.WriteFile(file, []byte("name: pf\ncluster: {masters: {diskGiB: 4}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, ".bmlab", "state.json")
	if err := os.MkdirAll(filepath.Dir(state), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, state, flag string
		disk              uint   // the masters' disk, GiB
		err               string // "" for none
	}{
		{"no lab, no flag", "", "", 4, ""},
		{"no lab, tiny", "", "tiny", 2, ""},
		{"default lab, no flag", `"profile": ""`, "", 4, ""},
		{"default lab, --profile default", `"profile": ""`, "default", 4, ""},
		{"default lab, tiny", `"profile": ""`, "tiny", 0, `--profile tiny: lab "pf" exists with profile default`},
		{"tiny lab, no flag", `"profile": "tiny"`, "", 2, ""},
		{"tiny lab, tiny", `"profile": "tiny"`, "tiny", 2, ""},
		{"tiny lab, --profile default", `"profile": "tiny"`, "default", 0, `--profile default: lab "pf" exists with profile tiny`},
		{"unrecorded, tiny", `"done": "nodes"`, "tiny", 2, ""},
		{"unrecorded, no flag", `"done": "nodes"`, "", 4, ""},
	} {
		_ = os.Remove(state)
		if tt.state != "" {
			if err := os.WriteFile(state, []byte(`{"lab": "pf", "mode": "ipi-baremetal", `+tt.state+`}`), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		p, err := Load(Options{Modes: testModes, ConfigPath: file, ConfigSet: true, Profile: tt.flag})
		switch {
		case tt.err != "":
			if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), "`labctl down` it first, or leave --profile out") {
				t.Errorf("%s: %v, want %q", tt.name, err, tt.err)
			}
		case err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case p.Nodes[0].Disks[0].SizeGiB != tt.disk:
			t.Errorf("%s: the master's disk %d GiB, want %d", tt.name, p.Nodes[0].Disks[0].SizeGiB, tt.disk)
		}
	}
}
