package lab

import (
	"errors"

	"github.com/bmlab/bmlab/internal/ipi"
)

// errHybridMissing is what --mode hybrid says until its actions exist.
var errHybridMissing = errors.New("--mode hybrid is not built yet; use --mode ipi-baremetal")

// hybridPipeline is the kcli-style UPI flow.
func hybridPipeline() []Action { return []Action{refuse{}} }

// HybridInstallConfig builds the hybrid mode's install-config.
func HybridInstallConfig(*Env) (*ipi.InstallConfig, error) { return nil, errHybridMissing }
