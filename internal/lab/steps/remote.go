package steps

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/plan"
)

// ExecRunner is the Runner that starts the host's exec: argv (ssh, say).
type ExecRunner struct{}

// Labctl implements Runner. ssh joins its arguments with spaces for the
// remote shell, so each word is quoted when exec's program is ssh; any
// other program (ip netns exec, nsenter, sudo) gets them as they are.
func (ExecRunner) Labctl(ctx context.Context, h plan.Host, stdin []byte, args ...string) ([]byte, error) {
	if len(h.Exec) == 0 {
		return nil, fmt.Errorf("host %s has no exec: in the lab file", h.Name)
	}
	words := append([]string{h.Labctl}, args...)
	if filepath.Base(h.Exec[0]) == "ssh" {
		for i, w := range words {
			words[i] = shellQuote(w)
		}
	}
	argv := append(slices.Clone(h.Exec), words...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.Bytes(), &RemoteError{Host: h.Name, Exec: h.Exec, Argv: argv, Err: err, Output: tail(out.String() + errOut.String())}
	}
	return out.Bytes(), nil
}

// RemoteError is a labctl run on another host that failed.
type RemoteError struct {
	Host   string
	Exec   []string // the host's exec: prefix
	Argv   []string // all of it
	Err    error
	Output string
}

func (e *RemoteError) Error() string {
	fix := "fix what it says and run the command again"
	var x *exec.Error
	var ee *exec.ExitError
	switch {
	case errors.As(e.Err, &x):
		fix = fmt.Sprintf("%s is not on this host: install it, or correct hosts[].exec of %s in the lab file", e.Argv[0], e.Host)
	case errors.As(e.Err, &ee) && ee.ExitCode() == 127:
		fix = fmt.Sprintf("labctl is not found on %s: install it there, or set hosts[].labctl of %s to its path", e.Host, e.Host)
	case errors.As(e.Err, &ee) && ee.ExitCode() == 255 && filepath.Base(e.Argv[0]) == "ssh":
		fix = fmt.Sprintf("ssh does not reach %s: check that `%s true` works without a prompt (key, known_hosts)", e.Host, strings.Join(e.Exec, " "))
	}
	out := ""
	if e.Output != "" {
		out = ":\n" + e.Output
	}
	return fmt.Sprintf("host %s: `%s`: %v; %s%s", e.Host, strings.Join(e.Argv, " "), e.Err, fix, out)
}

func tail(s string) string {
	s = strings.TrimSpace(s)
	if lines := strings.Split(s, "\n"); len(lines) > 20 {
		s = strings.Join(lines[len(lines)-20:], "\n")
	}
	return s
}

// shellQuote quotes a word for a POSIX shell.
func shellQuote(w string) string {
	if w != "" && strings.Trim(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:@,+") == "" {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}

// SpokeArgs is a labctl command line for a host other than the hub, about
// the same lab: the lab file comes on standard input, the lab's directory
// and the selecting flags are the hub's, and no --netns (the command runs
// in the host's own namespace, where exec: puts it).
func SpokeArgs(p *plan.Plan, h plan.Host, sub ...string) []string {
	args := append(slices.Clone(sub), "--host", h.Name, "-f", "-", "--dir", p.Dir, "--mode", p.Mode)
	if p.Profile != "" {
		args = append(args, "--profile", p.Profile)
	}
	return args
}

// NetReport is what `labctl net check -o json` prints: the contract between
// labctl on the hub and labctl on the other hosts.
type NetReport struct {
	Lab         string           `json:"lab"`
	InSync      bool             `json:"inSync"`
	Differences []lab.Difference `json:"differences"`
	// OwnedLinks are the links on the host that bear the lab's mark.
	OwnedLinks []string `json:"ownedLinks"`
	// NotChecked are the other hosts that were not checked (no exec:).
	NotChecked []string `json:"notChecked,omitempty"`
}

// CheckSpokeNet runs `net check --host NAME -o json` on a host through its
// exec: and reads the report. A check that finds differences exits 1 and
// still prints its report: that is a report, not an error.
// extra are more flags for it (--no-libvirt).
func CheckSpokeNet(ctx context.Context, r lab.Runner, p *plan.Plan, h plan.Host, extra ...string) (*NetReport, error) {
	out, err := r.Labctl(ctx, h, p.Source, append(SpokeArgs(p, h, "net", "check", "-o", "json"), extra...)...)
	var rep NetReport
	if jerr := json.Unmarshal(out, &rep); jerr != nil || rep.Lab != p.Lab {
		if err == nil {
			err = fmt.Errorf("host %s: `net check -o json` printed no report of lab %q (%v):\n%s", h.Name, p.Lab, jerr, tail(string(out)))
		}
		return nil, err
	}
	return &rep, nil
}

// Summary is the report in one line.
func (r *NetReport) Summary() string {
	if r.InSync {
		return "network in sync"
	}
	var objs []string
	for _, d := range r.Differences {
		objs = append(objs, d.Object+" "+d.Kind)
	}
	return fmt.Sprintf("%d difference(s): %s", len(r.Differences), strings.Join(objs, ", "))
}

// Hosts makes, on every host other than the hub, what only labctl on that
// host can make: its links (bridges and VXLAN to the hub), the storage
// pool's directory with the lab's mark, the volumes and domains of its
// nodes, their serial logs' directory. With the host's exec: it runs
// `labctl up --host NAME --until nodes` there; without, it says what the
// user must run. Either way it then checks through libvirt that the host
// has every node's domain and volumes, the pool and the bridge-named
// networks, and (through exec:) that `net check` there is clean. Delete
// runs `labctl down --host NAME` there and checks that nothing is left.
type Hosts struct{}

func (Hosts) Name() string { return "hosts" }

func (Hosts) Applies(p *plan.Plan) bool { return len(p.Hosts) > 0 }

// spokeUntil is where labctl on another host stops: its nodes' domains.
const spokeUntil = "nodes"

func (Hosts) Ensure(ctx context.Context, e *lab.Env) (bool, error) {
	p := e.Plan
	changed := false
	var errs []error
	for _, h := range p.Spokes() {
		if len(h.Exec) == 0 {
			e.Rep.Note("hosts", fmt.Sprintf("host %s has no exec: labctl cannot reach its links and files; run there first: labctl up --host %s --until %s -f LABFILE (with this lab's --profile and --mode), and `labctl down --host %s` after down", h.Name, h.Name, spokeUntil, h.Name))
		} else {
			out, err := e.Remote.Labctl(ctx, h, p.Source, SpokeArgs(p, h, "up", "--until", spokeUntil)...)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			changed = changed || remoteChanged(out)
		}
		if err := verifySpokeUp(ctx, e, h); err != nil {
			errs = append(errs, fmt.Errorf("host %s: %w", h.Name, err))
		}
	}
	return changed, errors.Join(errs...)
}

// remoteChanged reads the status lines of a labctl run: a ✓ without "(no
// change)" is a step that changed something.
func remoteChanged(out []byte) bool {
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "✓ ") && !strings.Contains(l, "(no change)") {
			return true
		}
	}
	return false
}

// spokeView is libvirt's view of the lab on another host.
func spokeView(ctx context.Context, e *lab.Env, h plan.Host) (lab.HostView, error) {
	sv, ok := e.Host.(lab.Spokes)
	if !ok {
		return lab.HostView{}, errors.New("this host does not reach the lab's other hosts")
	}
	return sv.HostView(ctx, h.Name, e.Plan.Lab, e.Plan.Storage.Pool)
}

func verifySpokeUp(ctx context.Context, e *lab.Env, h plan.Host) error {
	p := e.Plan
	v, err := spokeView(ctx, e, h)
	if err != nil {
		return err
	}
	var missing []string
	for _, n := range p.LocalNodes(h.Name) {
		if !slices.Contains(v.Domains, n.Name) {
			missing = append(missing, "domain "+n.Name)
		}
		for _, d := range n.Disks {
			if !slices.Contains(v.Pool.Volumes, d.Volume) {
				missing = append(missing, "volume "+p.Storage.Pool+"/"+d.Volume)
			}
		}
	}
	if !v.Pool.Found || !v.Pool.Active || v.Pool.Dir != p.Storage.Dir {
		missing = append(missing, fmt.Sprintf("active storage pool %s at %s", p.Storage.Pool, p.Storage.Dir))
	}
	for _, name := range p.Network.BridgeNetworks {
		if !slices.Contains(v.Networks, name) {
			missing = append(missing, "libvirt network "+name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("libvirt there lacks %s: run `labctl up --host %s --until %s` on %s (or give it exec: in the lab file)", strings.Join(missing, ", "), h.Name, spokeUntil, h.Name)
	}
	if len(h.Exec) == 0 {
		return nil
	}
	rep, err := CheckSpokeNet(ctx, e.Remote, p, h)
	if err != nil {
		return err
	}
	if !rep.InSync {
		return fmt.Errorf("after up there, `net check` reports %s", rep.Summary())
	}
	return nil
}

func (Hosts) Delete(ctx context.Context, e *lab.Env) error {
	p := e.Plan
	var errs []error
	for _, h := range p.Spokes() {
		if len(h.Exec) > 0 {
			if _, err := e.Remote.Labctl(ctx, h, p.Source, SpokeArgs(p, h, "down")...); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if err := verifySpokeDown(ctx, e, h); err != nil {
			errs = append(errs, fmt.Errorf("host %s: %w", h.Name, err))
		}
	}
	return errors.Join(errs...)
}

func verifySpokeDown(ctx context.Context, e *lab.Env, h plan.Host) error {
	p := e.Plan
	v, err := spokeView(ctx, e, h)
	if err != nil {
		return err
	}
	var left []string
	for _, d := range v.Domains {
		left = append(left, "domain "+d)
	}
	for _, n := range v.Networks {
		left = append(left, "libvirt network "+n)
	}
	if v.Pool.Found {
		left = append(left, "storage pool "+p.Storage.Pool)
	}
	if len(h.Exec) > 0 {
		rep, err := CheckSpokeNet(ctx, e.Remote, p, h)
		if err != nil {
			return err
		}
		for _, l := range rep.OwnedLinks {
			left = append(left, "link "+l)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("still there: %s; run `labctl down --host %s` on %s", strings.Join(left, ", "), h.Name, h.Name)
	}
	if len(h.Exec) == 0 {
		e.Rep.Note("remove hosts", fmt.Sprintf("host %s has no exec: its links and files are not checked; run there: labctl down --host %s", h.Name, h.Name))
	}
	return nil
}

// SpokeNet is one other host's network, as labctl there reports it.
type SpokeNet struct {
	Host   plan.Host
	Report *NetReport // nil when not checked
	Err    error
}

// Checked says whether labctl reached the host (it has exec:).
func (s SpokeNet) Checked() bool { return len(s.Host.Exec) > 0 }

// String is the host's line in `labctl status` and `labctl net check`.
func (s SpokeNet) String() string {
	switch {
	case !s.Checked():
		return fmt.Sprintf("host %s: not checked (no exec: in the lab file); run there: labctl net check --host %s", s.Host.Name, s.Host.Name)
	case s.Err != nil:
		return fmt.Sprintf("host %s: not checked: %v", s.Host.Name, s.Err)
	}
	return fmt.Sprintf("host %s: %s", s.Host.Name, s.Report.Summary())
}

// CheckSpokes runs `net check` (with extra flags) on every other host that
// has exec:; `labctl status` and `labctl net check` on the hub both report
// it, so they say the same of every host.
func CheckSpokes(ctx context.Context, r lab.Runner, p *plan.Plan, extra ...string) []SpokeNet {
	var out []SpokeNet
	for _, h := range p.Spokes() {
		s := SpokeNet{Host: h}
		if s.Checked() {
			s.Report, s.Err = CheckSpokeNet(ctx, r, p, h, extra...)
		}
		out = append(out, s)
	}
	return out
}
