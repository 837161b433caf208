package steps

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/plan"
	"github.com/bmlab/bmlab/internal/yamljson"
)

// BMCs records each node's IPMI endpoint (for the ipmi kind), its own BMC
// user (cluster.bmc.nodeAccounts) and its BMC's personality (the role's
// personality) with its domain, writes the
// BMC credentials to a 0600 file, starts the lab's vbmcd unless it runs
// with the plan's arguments, and checks that every node's BMC answers with
// the node's UUID at its address.
type BMCs struct{}

func (BMCs) Name() string { return "bmcs" }

func (BMCs) Ensure(ctx context.Context, e *lab.Env) (bool, error) {
	p := e.Plan
	changed := false
	for _, n := range p.Nodes {
		if n.BMC.IPMIPort == 0 && n.BMC.Username == "" && n.BMC.Personality == "" {
			continue
		}
		c, err := e.Host.Ensure(ctx, lab.MachineBMC{Node: n.Name, IPMIPort: n.BMC.IPMIPort, User: n.BMC.Username, Password: n.BMC.Password, Personality: n.BMC.Personality})
		if err != nil {
			return changed, err
		}
		changed = changed || len(c) > 0
	}
	c, err := writeCredentials(p)
	if err != nil {
		return changed, err
	}
	cert, err := ensureLabCA(p, time.Now())
	if err != nil {
		return changed, err
	}
	if cert {
		e.Rep.Note("bmcs", "the lab's CA issued vbmcd's certificate for "+p.BMC.Host+" ("+p.Paths.CACert+")")
	}
	c = c || cert // both are read at start: a change restarts vbmcd
	done, err := e.Host.Ensure(ctx, lab.BMCDaemon{Plan: p, Restart: c, Wait: 30 * time.Second,
		Progress: func(msg string) { e.Rep.Progress("bmcs", msg) }})
	for _, d := range done {
		if strings.HasPrefix(d, "restart") {
			e.Rep.Note("bmcs", d)
		}
	}
	return changed || len(done) > 0, err
}

// Delete stops every vbmcd that bears the lab's mark.
func (BMCs) Delete(ctx context.Context, e *lab.Env) error {
	running, err := e.Host.Marked(ctx, lab.KindDaemon, e.Plan.Lab)
	if err != nil {
		return err
	}
	var errs []error
	for _, pid := range running {
		if err := e.Host.Delete(ctx, lab.KindDaemon, pid, e.Plan.Lab); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if left, err := e.Host.Marked(ctx, lab.KindDaemon, e.Plan.Lab); err != nil || len(left) > 0 {
		return errors.Join(err, fmt.Errorf("vbmcd of lab %q still runs: %v", e.Plan.Lab, left))
	}
	return nil
}

// writeCredentials writes the BMC user to the plan's credentials file,
// 0600, and reports whether it changed.
func writeCredentials(p *plan.Plan) (bool, error) {
	want, err := yamljson.Marshal(map[string]string{"username": p.BMC.Username, "password": p.BMC.Password})
	if err != nil {
		return false, err
	}
	path := p.Vbmcd.CredentialsFile
	if have, err := os.ReadFile(path); err == nil && string(have) == string(want) {
		return false, os.Chmod(path, 0o600)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return false, err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, want, 0o600); err != nil {
		return false, fmt.Errorf("BMC credentials: %w", err)
	}
	return true, os.Rename(tmp, path)
}
