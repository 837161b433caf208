// Package modes is the list of labctl's install modes: a mode is a package
// of its own (internal/lab/*mode) and one line here.
package modes

import (
	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/lab/agentmode"
	"github.com/bmlab/bmlab/internal/lab/hybridmode"
	"github.com/bmlab/bmlab/internal/lab/ipimode"
)

// All are the install modes, in the order help texts name them; the first
// is the default.
var All = lab.Modes{
	ipimode.Mode(),
	hybridmode.Mode(),
	agentmode.Mode(),
}
