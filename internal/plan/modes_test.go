package plan

import (
	"encoding/json"
	"os"
)

// testModes are the install modes' names and traits as the modes declare
// them (plantest/modes.json, which internal/lab/modes checks against
// modes.All): the plan's tests cannot import the modes, which import the
// plan.
var testModes = func() []ModeSpec {
	b, err := os.ReadFile("plantest/modes.json")
	if err != nil {
		panic(err)
	}
	var out []ModeSpec
	if err := json.Unmarshal(b, &out); err != nil {
		panic("plantest/modes.json: " + err.Error())
	}
	return out
}()

// The modes' names as plantest/modes.json holds them (plantest's IPI,
// Hybrid and Agent; the plan declares none: it reads traits).
const (
	modeIPI    = "ipi-baremetal"
	modeHybrid = "hybrid"
	modeAgent  = "agent"
)
