// Package plantest holds, for tests that resolve plans without labctl's
// list of modes (the plan's own, the shared steps', whose packages the
// modes import), the install modes' names and traits as the modes
// declare them: modes.json, which internal/lab/modes' TestTraitsFixture
// writes (-update) and checks against modes.All.
package plantest

import (
	_ "embed"
	"encoding/json"

	"github.com/bmlab/bmlab/internal/plan"
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
