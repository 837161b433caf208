package lab

import "github.com/bmlab/bmlab/internal/ipi"

// hybridPipeline is the kcli-style UPI flow (see hybrid_*.go).
func hybridPipeline() []Action {
	return []Action{preflight{}, network{}, storage{}}
}

// HybridInstallConfig builds the hybrid mode's install-config.
func HybridInstallConfig(e *Env) (*ipi.InstallConfig, error) { return nil, nil }
