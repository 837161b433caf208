package agentmode

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/bmlab/bmlab/internal/agent"
	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/lab/bmcclient"
	"github.com/bmlab/bmlab/internal/lab/steps"
	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/plan"
)

// ensureMedia boots every node from the agent ISO through its BMC, as on
// real servers: labctl serves the ISO on the lab network (the lab host's
// address, plan.Agent.MediaAddr) while each BMC fetches it, then for each
// node InsertMedia, a Once boot override to the CD, and On. vbmcd copies
// an inserted image into its cache, as a real BMC streams it, so nothing
// is left serving once every insert has completed. It never edits a
// domain: everything goes through the BMC's Redfish.
func ensureMedia(ctx context.Context, e *lab.Env) (bool, error) {
	p := e.Plan
	booted, all := mediaBooted(p)
	if all {
		return false, nil
	}
	c, stop, err := serveISO(p, p.Paths.AgentISO)
	if err != nil {
		return false, err
	}
	defer stop()
	changed := false
	for i, n := range p.Nodes {
		if booted[n.Name] || n.Added {
			// It booted the ISO on an earlier up that failed later: booting
			// it again would restart an install under way. (A node added
			// on day 2 boots the cluster's node ISO: add-node.)
			continue
		}
		e.Rep.Progress("media", fmt.Sprintf("%d of %d nodes booting the ISO; %s's BMC fetches it", i, len(p.Nodes), n.Name))
		c1, err := c.BootFromISO(ctx, n.BMC.SystemURL, p.Agent.MediaURL)
		changed = changed || c1
		if err != nil {
			return changed, fmt.Errorf("node %s: %w", n.Name, err)
		}
		booted[n.Name] = true
		if err := lab.WriteNames(p.Paths.MediaBooted, booted); err != nil {
			return true, err
		}
		e.Rep.Note("media", fmt.Sprintf("%s: ISO inserted, boot override Cd once, powered on", n.Name))
	}
	return true, nil
}

// mediaBooted is the record of the nodes booted from the ISO
// (Paths.MediaBooted, one name a line, written as each one boots), and
// whether every node the cluster was installed with is in it. An empty record is an older
// labctl's: it wrote the file, empty, once every node had booted.
func mediaBooted(p *plan.Plan) (map[string]bool, bool) {
	booted := lab.ReadNames(p.Paths.MediaBooted)
	if len(booted) == 0 {
		return booted, lab.Exists(p.Paths.MediaBooted)
	}
	for _, n := range p.Nodes {
		if !booted[n.Name] && !n.Added {
			return booted, false
		}
	}
	return booted, true
}

// deleteMedia forgets which nodes were booted (down removes them anyway).
func deleteMedia(_ context.Context, e *lab.Env) error {
	return lab.RemoveFiles([]string{e.Plan.Paths.MediaBooted}, "")
}

// serveISO serves iso at http://<the plan's Agent.MediaAddr>/<its name>,
// from the lab's network namespace, until stop, and returns the client of
// the BMCs that fetch it.
func serveISO(p *plan.Plan, iso string) (c *bmcclient.Client, stop func(), err error) {
	if _, err := os.Stat(iso); err != nil {
		return nil, nil, fmt.Errorf("the ISO: %w", err)
	}
	addr := p.Agent.MediaAddr
	l, err := netplumb.ListenIn(p.Netns, "tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("serve %s on %s: %w (cluster.agent.mediaPort sets the port)", filepath.Base(iso), addr, err)
	}
	name := "/" + filepath.Base(iso)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != name {
			http.NotFound(w, r)
			return
		}
		http.ServeFile(w, r, iso) // ranges and HEAD included
	})}
	go func() { _ = srv.Serve(l) }()
	stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}
	if c, err = bmcclient.New(p); err != nil {
		stop()
		return nil, nil, err
	}
	return c, stop, nil
}

// ejectAll ejects the virtual CD of every node.
func ejectAll(ctx context.Context, e *lab.Env) error {
	c, err := bmcclient.New(e.Plan)
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range e.Plan.Nodes {
		if err := c.Eject(ctx, n.BMC.SystemURL); err != nil {
			errs = append(errs, fmt.Errorf("eject the ISO of %s: %w", n.Name, err))
		}
	}
	return errors.Join(errs...)
}

// ensureBootstrap waits for `openshift-install agent wait-for
// bootstrap-complete`; a failure keeps every node and says where the logs
// are and how to gather the rendezvous host's.
func ensureBootstrap(ctx context.Context, e *lab.Env) (bool, error) {
	p := e.Plan
	if lab.Exists(p.Paths.BootstrapComplete) {
		return false, nil
	}
	if err := agentInstaller(e, "bootstrap-complete").Run(ctx, agent.BootstrapComplete); err != nil {
		if errors.Is(steps.StopIfMissing(err), lab.ErrStop) || ctx.Err() != nil {
			return false, steps.StopIfMissing(err)
		}
		return false, fmt.Errorf("%w\nthe bootstrap did not complete; every node is kept. Logs: %s, %s and the nodes' consoles in %s. Gather the rendezvous host's: ssh core@%s agent-gather -O >agent-gather.tar.xz. `labctl up` again resumes",
			err, p.Paths.InstallerLog, p.Paths.InstallerOutput, p.Paths.Logs, p.Agent.RendezvousIP)
	}
	return true, os.WriteFile(p.Paths.BootstrapComplete, nil, 0o644)
}

func deleteBootstrap(_ context.Context, e *lab.Env) error {
	return lab.RemoveFiles([]string{e.Plan.Paths.BootstrapComplete}, "")
}

// ensureInstallComplete waits for `openshift-install agent wait-for
// install-complete`, then ejects the ISO from every node and says where
// the kubeconfig and kubeadmin password are.
func ensureInstallComplete(ctx context.Context, e *lab.Env) (bool, error) {
	p := e.Plan
	changed := false
	if !lab.Exists(p.Paths.InstallComplete) {
		if err := agentInstaller(e, "install-complete").Run(ctx, agent.InstallComplete); err != nil {
			if errors.Is(steps.StopIfMissing(err), lab.ErrStop) || ctx.Err() != nil {
				return false, steps.StopIfMissing(err)
			}
			return false, fmt.Errorf("%w\nthe install did not complete; every node is kept. Logs: %s, %s. `labctl up` again resumes", err, p.Paths.InstallerLog, p.Paths.InstallerOutput)
		}
		if err := os.WriteFile(p.Paths.InstallComplete, nil, 0o644); err != nil {
			return false, err
		}
		changed = true
	}
	if err := ejectAll(ctx, e); err != nil {
		return changed, err
	}
	e.Rep.Note("install-complete", "kubeconfig: "+p.Paths.Kubeconfig)
	e.Rep.Note("install-complete", "kubeadmin password: "+p.Paths.KubeadminPassword)
	return changed, nil
}

func deleteInstallComplete(_ context.Context, e *lab.Env) error {
	return lab.RemoveFiles([]string{e.Plan.Paths.InstallComplete}, "")
}
