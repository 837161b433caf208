package hybridmode

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/lab/steps"
	"github.com/bmlab/bmlab/internal/plan"
	"github.com/bmlab/bmlab/internal/upi"
)

// ensureInstallComplete waits for `openshift-install wait-for install-complete`,
// writes the lab host's entries for api and the console and oauth hosts
// (network.hostResolver hosts; a drop-in, written with the network, covers
// every name),
// and says where the kubeconfig and kubeadmin password are.
func ensureInstallComplete(ctx context.Context, e *lab.Env) (bool, error) {
	p := e.Plan
	changed := false
	if !lab.Exists(p.Paths.InstallComplete) {
		if err := installerFor(e, "install-complete").WaitFor(ctx, upi.InstallComplete); err != nil {
			if err := steps.StopIfMissing(err); errors.Is(err, lab.ErrStop) || ctx.Err() != nil {
				return false, err
			}
			return false, fmt.Errorf("%w\nthe install did not complete; every node is kept. Logs: %s (the installer's), %s (what it printed, every run) and the nodes' consoles in %s. `labctl up` again resumes",
				err, p.Paths.InstallerLog, p.Paths.InstallerOutput, p.Paths.Logs)
		}
		if err := os.WriteFile(p.Paths.InstallComplete, nil, 0o644); err != nil {
			return false, err
		}
		changed = true
	}
	var lines []string // hostResolver none, or a drop-in: no hosts entries
	if p.Network.HostResolver == plan.ResolverHosts {
		lines = hostsEntries(p)
	}
	c, err := ensureHosts(p.Paths.HostsFile, p.Lab, lines)
	if err != nil {
		return changed, err
	}
	e.Rep.Note("install-complete", "kubeconfig: "+p.Paths.Kubeconfig)
	e.Rep.Note("install-complete", "kubeadmin password: "+p.Paths.KubeadminPassword)
	return changed || c, nil
}

// deleteInstallComplete removes the lab's entries from the hosts file: the plan's, and
// the one the lab's domains name in their mark (down --lab without the lab
// file knows only the default, /etc/hosts). It runs before the nodes'
// delete, while the marks are there.
func deleteInstallComplete(ctx context.Context, e *lab.Env) error {
	if err := lab.RemoveFiles([]string{e.Plan.Paths.InstallComplete}, ""); err != nil {
		return err
	}
	files := []string{e.Plan.Paths.HostsFile}
	sv, err := e.Host.Survey(ctx, lab.KindDomain)
	if err != nil {
		return err
	}
	for _, m := range sv.Marks {
		if f := m["hostsFile"]; m["name"] == e.Plan.Lab && f != "" && !slices.Contains(files, f) {
			files = append(files, f)
		}
	}
	var errs []error
	for _, f := range files {
		if _, err := ensureHosts(f, e.Plan.Lab, nil); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// hostsEntries are api (the API VIP) and the console and oauth routes (the
// ingress VIP, else the API VIP); a single node's address for both. A
// dual-stack cluster's names get their IPv6 addresses too.
func hostsEntries(p *plan.Plan) []string {
	k := p.Cluster
	lines := func(api, ingress netip.Addr) []string {
		if !ingress.IsValid() {
			ingress = api
		}
		return []string{
			fmt.Sprintf("%s %s", api, k.APIName),
			fmt.Sprintf("%s %s %s", ingress, k.ConsoleHost, k.OAuthHost),
		}
	}
	if p.SingleNode() {
		out := lines(p.Nodes[0].IP, p.Nodes[0].IP)
		if ip := p.Nodes[0].SecondaryIP; ip.IsValid() {
			out = append(out, lines(ip, ip)...)
		}
		return out
	}
	out := lines(k.APIVIP, k.IngressVIP)
	if f := k.Secondary; !f.IsZero() {
		out = append(out, lines(f.APIVIP, f.IngressVIP)...)
	}
	return out
}

// ensureHosts puts lines between the lab's marker comments in a hosts file
// (none: removes the block) and reports whether it changed the file. The
// rest of the file is left as it is.
func ensureHosts(path, lab string, lines []string) (bool, error) {
	begin, end := "# bmlab "+lab+" begin", "# bmlab "+lab+" end"
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return false, err
	}
	var kept []string
	in := false
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		switch {
		case l == begin:
			in = true
		case l == end:
			in = false
		case !in && !(l == "" && len(kept) == 0):
			kept = append(kept, l)
		}
	}
	if len(lines) > 0 {
		kept = append(kept, begin)
		kept = append(kept, lines...)
		kept = append(kept, end)
	}
	want := strings.Join(kept, "\n")
	if want != "" {
		want += "\n"
	}
	if want == string(b) {
		return false, nil
	}
	if len(b) == 0 && len(lines) == 0 {
		return false, nil
	}
	mode := os.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	// In place, not by rename: /etc/hosts may be a bind mount.
	return true, os.WriteFile(path, []byte(want), mode)
}
