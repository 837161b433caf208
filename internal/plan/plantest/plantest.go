// Package plantest holds, for tests that resolve plans without labctl's
// list of modes (the plan's own, the shared steps', whose packages the
// modes import), the install modes' names and traits as the modes
// declare them: modes.json, which internal/lab/modes' TestTraitsFixture
// writes (-update) and checks against modes.All.
package plantest

import (
	_ "embed"
	"encoding/json"
	"fmt"

	"github.com/bmlab/bmlab/internal/labconfig"

	"github.com/bmlab/bmlab/internal/plan"
)

// The modes' names as modes.json holds them (internal/lab/modes'
// TestTraitsFixture checks them against each mode's Name), for the tests
// of packages the modes import.
const (
	IPI    = "ipi-baremetal"
	Hybrid = "hybrid"
	Agent  = "agent"
)

// JSON is modes.json: the modes' names and traits, the default first.
//
//go:embed modes.json
var JSON []byte

// Modes are the install modes as plan.Options.Modes takes them.
func Modes() []plan.ModeSpec {
	var out []plan.ModeSpec
	if err := json.Unmarshal(JSON, &out); err != nil {
		panic("plantest: modes.json: " + err.Error()) // the fixture is the repository's own
	}
	return out
}

// LabsJSON is labs.json: the labs whose plans internal/plan pins
// (testdata/<name>.json) and whose provider's commands labvirt pins, each
// as plan.Resolve takes it through Resolve.
//
//go:embed labs.json
var LabsJSON []byte

// Lab is a lab of labs.json: its lab file, profile and mode.
type Lab struct {
	Name    string `json:"name"`
	Lab     string `json:"lab"`
	Profile string `json:"profile"`
	Mode    string `json:"mode"`
}

// Labs are labs.json's labs.
func Labs() []Lab {
	var out []Lab
	if err := json.Unmarshal(LabsJSON, &out); err != nil {
		panic("plantest: labs.json: " + err.Error()) // the fixture is the repository's own
	}
	return out
}

// Resolve resolves a lab of labs.json as internal/plan's golden plans
// are: under /labs/<name>, vbmcd at /usr/local/bin/vbmcd, in the
// namespace labci, with the modes of modes.json.
func Resolve(l Lab) (*plan.Plan, error) {
	cfg, err := labconfig.Parse([]byte(l.Lab))
	if err != nil {
		return nil, fmt.Errorf("lab %s: %w", l.Name, err)
	}
	if err := cfg.ApplyProfile(l.Profile); err != nil {
		return nil, fmt.Errorf("lab %s: %w", l.Name, err)
	}
	return plan.Resolve(cfg, plan.Options{Modes: Modes(), Dir: "/labs/" + cfg.Name, Profile: l.Profile, Mode: l.Mode, Vbmcd: "/usr/local/bin/vbmcd", Netns: "labci"})
}
