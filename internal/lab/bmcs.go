package lab

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/plan"
)

// bmcs records each node's IPMI endpoint (for the ipmi kind) and its own BMC
// user (cluster.bmc.nodeAccounts) with its domain, writes the
// BMC credentials to a 0600 file, starts the lab's vbmcd unless it runs
// with the plan's arguments, and checks that every node's BMC answers with
// the node's UUID at its address.
type bmcs struct{}

func (bmcs) Name() string { return "bmcs" }

func (bmcs) Ensure(ctx context.Context, e *Env) (bool, error) {
	p := e.Plan
	changed := false
	for _, n := range p.Nodes {
		if n.BMC.IPMIPort == 0 && n.BMC.Username == "" {
			continue
		}
		c, err := e.Host.Nodes().SetNodeBMC(ctx, n.Name, n.BMC.IPMIPort, n.BMC.Username, n.BMC.Password)
		if err != nil {
			return changed, err
		}
		changed = changed || c
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
	running, err := e.Host.BMCs().Daemons(ctx, p.Lab)
	if err != nil {
		return changed, err
	}
	ok := false
	for _, d := range running {
		// The credentials are read at start: a changed file restarts it.
		if slices.Equal(d.Args, p.Vbmcd.Args) && !c {
			ok = true
			continue
		}
		e.Rep.Note("bmcs", fmt.Sprintf("restarting vbmcd (pid %d): its settings changed", d.PID))
		if err := e.Host.BMCs().StopDaemon(ctx, d.PID); err != nil {
			return changed, err
		}
		changed = true
	}
	if !ok {
		if _, err := e.Host.BMCs().StartDaemon(ctx, p.Vbmcd, p.Netns); err != nil {
			return changed, err
		}
		changed = true
	}
	return changed, e.Host.BMCs().CheckBMCs(ctx, p, 30*time.Second, func(msg string) { e.Rep.Progress("bmcs", msg) })
}

// Delete stops every vbmcd that bears the lab's mark.
func (bmcs) Delete(ctx context.Context, e *Env) error {
	running, err := e.Host.BMCs().Daemons(ctx, e.Plan.Lab)
	if err != nil {
		return err
	}
	var errs []error
	for _, d := range running {
		if err := e.Host.BMCs().StopDaemon(ctx, d.PID); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if left, err := e.Host.BMCs().Daemons(ctx, e.Plan.Lab); err != nil || len(left) > 0 {
		return errors.Join(err, fmt.Errorf("vbmcd of lab %q still runs: %v", e.Plan.Lab, left))
	}
	return nil
}

// writeCredentials writes the BMC user to the plan's credentials file,
// 0600, and reports whether it changed.
func writeCredentials(p *plan.Plan) (bool, error) {
	want, err := yaml.Marshal(map[string]string{"username": p.BMC.Username, "password": p.BMC.Password})
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

// BMCClient is an HTTP client whose sockets live in the lab's network
// namespace: it reaches the BMCs where the nodes reach them.
func BMCClient(p *plan.Plan) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext:     netplumb.DialContextIn(p.Netns),
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // vbmcd's own self-signed certificate
	}}
}

// CheckBMCs implements BMCs: every node's Redfish System answers with its
// UUID at the plan's address, reached from the lab's namespace.
func (r *RealHost) CheckBMCs(ctx context.Context, p *plan.Plan, wait time.Duration, progress func(string)) error {
	hc := BMCClient(p)
	deadline := time.Now().Add(wait)
	for i, n := range p.Nodes {
		if progress != nil {
			progress(fmt.Sprintf("%d of %d BMCs answer; waiting for %s's", i, len(p.Nodes), n.Name))
		}
		for {
			status, err := probe(ctx, hc, p, n.BMC.SystemURL)
			if err == nil && status == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the BMC of %s does not answer at %s (status %d, error %v); see %s", n.Name, n.BMC.SystemURL, status, err, p.Vbmcd.Log)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

func probe(ctx context.Context, hc *http.Client, p *plan.Plan, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.SetBasicAuth(p.BMC.Username, p.BMC.Password)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			k, err := resp.Body.Read(buf)
			b.Write(buf[:k])
			if err != nil {
				break
			}
		}
		id := url[strings.LastIndex(url, "/")+1:]
		if !strings.Contains(strings.ToLower(b.String()), strings.ToLower(id)) {
			return resp.StatusCode, fmt.Errorf("the System at %s is not %s", url, id)
		}
	}
	return resp.StatusCode, nil
}
