package lab

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/bmlab/bmlab/internal/plan"
)

// Mode is an install mode: a name (--mode, mode: in the lab file) and up's
// actions in order. Each mode is a package of its own (internal/lab/*mode)
// whose actions, input rules (its preflight's hooks), installer files and
// plan adapters are its own; labctl knows the modes from one list
// (internal/lab/modes). Its Traits say what the plan makes of its labs
// (nodes with BMCs, the topologies it takes, what its nodes boot, …): the
// plan reads them, never the mode's name.
type Mode struct {
	Name    string
	Traits  plan.Traits
	Actions func() []Action
}

// Modes are the install modes labctl knows, in the order help texts name
// them.
type Modes []Mode

// Names lists the modes' names.
func (ms Modes) Names() []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	return out
}

// Specs are the modes' names and traits, as the plan takes them
// (plan.Options.Modes).
func (ms Modes) Specs() []plan.ModeSpec {
	out := make([]plan.ModeSpec, len(ms))
	for i, m := range ms {
		out[i] = plan.ModeSpec{Name: m.Name, Traits: m.Traits}
	}
	return out
}

// Lookup finds a mode by its name.
func (ms Modes) Lookup(name string) (Mode, error) {
	if i := slices.IndexFunc(ms, func(m Mode) bool { return m.Name == name }); i >= 0 {
		return ms[i], nil
	}
	return Mode{}, fmt.Errorf("--mode %q: use %s", name, strings.Join(ms.Names(), ", "))
}

// Teardown is every action of every mode, each once, in up's order, the
// first mode's first: what down runs when the lab's mode is not known
// (down --lab, after the lab file is gone). Down runs it backwards, so the
// modes' own files and markers go before the nodes, storage and network
// every mode shares.
func (ms Modes) Teardown() []Action {
	var out []Action
	// An action is the same as another of its type (steps.Network{} in
	// every mode); a Step is its mode's own.
	seen := map[any]bool{}
	for _, m := range ms {
		for _, a := range m.Actions() {
			key := any(reflect.TypeOf(a))
			if s, ok := a.(*Step); ok {
				key = s
			}
			if !seen[key] {
				seen[key] = true
				out = append(out, a)
			}
		}
	}
	return out
}
