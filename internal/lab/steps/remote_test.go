package steps

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/lab/labtest"
	"github.com/bmlab/bmlab/internal/labconfig"
	"github.com/bmlab/bmlab/internal/plan"
	"github.com/bmlab/bmlab/internal/plan/plantest"
)

// spokeFake is the fake host of a lab over several hosts: libvirt's view of
// each other host is what the fake runner's labctl runs leave there.
type spokeFake struct {
	*labtest.Host
	views map[string]lab.HostView
}

func (s *spokeFake) HostView(_ context.Context, host, _, _ string) (lab.HostView, error) {
	return s.views[host], nil
}

// fakeRunner stands for labctl on the other hosts: "up" makes the host's
// part (unless partial), "down" removes it (unless sticky), "net check"
// reports in sync.
type fakeRunner struct {
	s       *spokeFake
	p       *plan.Plan
	calls   []string
	stdin   []string
	fail    error
	partial bool // up leaves a volume out
	sticky  bool // down leaves the pool
	links   []string
}

func (r *fakeRunner) Labctl(_ context.Context, h plan.Host, stdin []byte, args ...string) ([]byte, error) {
	r.calls = append(r.calls, h.Name+": "+strings.Join(args, " "))
	r.stdin = append(r.stdin, string(stdin))
	if r.fail != nil {
		return nil, r.fail
	}
	switch args[0] {
	case "up":
		v := lab.HostView{Networks: r.p.Network.BridgeNetworks, Pool: lab.PoolView{Found: true, Active: true, Dir: r.p.Storage.Dir}}
		for _, n := range r.p.LocalNodes(h.Name) {
			v.Domains = append(v.Domains, n.Name)
			for _, d := range n.Disks {
				v.Pool.Volumes = append(v.Pool.Volumes, d.Volume)
			}
		}
		if r.partial {
			v.Pool.Volumes = v.Pool.Volumes[1:]
		}
		r.s.views[h.Name] = v
		return []byte(" ✓ network 1s\n ✓ storage (no change) 1s\n"), nil
	case "down":
		v := lab.HostView{}
		if r.sticky {
			v.Pool.Found = true
		}
		r.s.views[h.Name] = v
		return nil, nil
	}
	return json.Marshal(map[string]any{"lab": r.p.Lab, "inSync": true, "differences": []string{}, "ownedLinks": r.links})
}

// multiEnv is testEnv's lab spread over alpha (the hub) and beta, beta with
// exec: when withExec.
func multiEnv(t *testing.T, withExec bool) (*lab.Env, *labtest.Recorder, *fakeRunner) {
	t.Helper()
	e, rec := labtest.Env(t, labtest.NewHost(), "")
	beta := "- {name: beta, libvirtURI: 'qemu+ssh://root@beta/system', underlay: 10.254.0.2}\n"
	if withExec {
		beta = "- {name: beta, libvirtURI: 'qemu+ssh://root@beta/system', underlay: 10.254.0.2, exec: [ssh, root@beta], labctl: /opt/labctl}\n"
	}
	src := []byte("name: fk\ncluster: {sshKey: id.pub, installer: /nonexistent/openshift-install}\nhosts:\n" +
		"- {name: alpha, libvirtURI: 'qemu:///system', underlay: 10.254.0.1}\n" + beta)
	cfg, err := labconfig.Parse(src)
	labtest.Must(t, err)
	labtest.Must(t, cfg.ApplyProfile("tiny"))
	p, err := plan.Resolve(cfg, plan.Options{Modes: plantest.Modes(), Dir: e.Plan.Dir, Profile: "tiny", Vbmcd: "/bin/vbmcd"})
	labtest.Must(t, err)
	p.Source = src
	s := &spokeFake{Host: e.Host.(*labtest.Host), views: map[string]lab.HostView{}}
	r := &fakeRunner{s: s, p: p}
	e.Plan, e.Host, e.Remote = p, s, r
	return e, rec, r
}

// TestHostsStepRunsLabctlThere: with exec:, up runs `labctl up --host beta
// --until nodes` on beta with the lab file on its standard input, then
// checks beta through libvirt and net check; down runs `labctl down --host
// beta` there and checks that nothing is left.
func TestHostsStepRunsLabctlThere(t *testing.T) {
	e, rec, r := multiEnv(t, true)
	labtest.Must(t, lab.Up(context.Background(), e, sharedActions(), "hosts"))
	args := " --host beta -f - --dir " + e.Plan.Dir + " --mode ipi-baremetal --profile tiny"
	want := []string{"beta: up --until nodes" + args, "beta: net check -o json" + args}
	if d := cmp.Diff(want, r.calls); d != "" {
		t.Errorf("labctl runs on beta (-want +got):\n%s", d)
	}
	if r.stdin[0] != string(e.Plan.Source) {
		t.Errorf("beta's labctl got %q on its standard input, want the lab file", r.stdin[0])
	}
	if d := cmp.Diff([]string{"✓ preflight (no change)", "✓ hosts"}, rec.Ticks()); d != "" {
		t.Errorf("ticks (-want +got):\n%s", d)
	}

	r.calls, rec.Lines = nil, nil
	labtest.Must(t, lab.Down(context.Background(), e, []lab.Action{Hosts{}}))
	want = []string{"beta: down" + args, "beta: net check -o json" + args}
	if d := cmp.Diff(want, r.calls); d != "" {
		t.Errorf("labctl runs on beta at down (-want +got):\n%s", d)
	}
}

// TestHostsStepTicksOnlyWhatIsThere: a run on beta that succeeds but
// leaves a volume out, a down there that leaves the pool, links left on
// beta, and a failed run are each an ✗ that names the host and what to do.
func TestHostsStepTicksOnlyWhatIsThere(t *testing.T) {
	e, rec, r := multiEnv(t, true)
	r.partial = true
	err := lab.Up(context.Background(), e, sharedActions(), "hosts")
	if err == nil || !strings.Contains(err.Error(), "host beta: libvirt there lacks volume fk-disks/fk-master-1") {
		t.Errorf("up with a volume missing on beta = %v", err)
	}
	if slices.Contains(rec.Ticks(), "✓ hosts") {
		t.Errorf("hosts ticked with a volume missing: %v", rec.Ticks())
	}
	r.partial = false
	labtest.Must(t, lab.Up(context.Background(), e, sharedActions(), "hosts"))

	for name, setup := range map[string]func(){
		"storage pool fk-disks; run `labctl down --host beta` on beta": func() { r.sticky = true },
		"link vxb-alpha": func() { r.links = []string{"vxb-alpha"} },
		"ssh does not reach beta: check that `ssh root@beta true` works": func() {
			r.fail = &RemoteError{Host: "beta", Exec: []string{"ssh", "root@beta"}, Argv: []string{"ssh", "root@beta", "/opt/labctl", "down"}, Err: exitErr(t, 255)}
		},
		"labctl is not found on beta: install it there, or set hosts[].labctl": func() {
			r.fail = &RemoteError{Host: "beta", Exec: []string{"ssh", "root@beta"}, Argv: []string{"ssh", "root@beta", "/opt/labctl", "down"}, Err: exitErr(t, 127)}
		},
	} {
		r.sticky, r.links, r.fail = false, nil, nil
		setup()
		if err := lab.Down(context.Background(), e, []lab.Action{Hosts{}}); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("down = %v, want %q", err, name)
		}
	}
}

func exitErr(t *testing.T, code int) error {
	t.Helper()
	err := exec.Command("sh", "-c", "exit "+strconv.Itoa(code)).Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("sh exit %d: %v", code, err)
	}
	return err
}

// TestHostsStepWithoutExec: a host without exec: is the user's to build;
// the step says what to run there and ticks only when libvirt there has
// the host's part.
func TestHostsStepWithoutExec(t *testing.T) {
	e, rec, r := multiEnv(t, false)
	err := lab.Up(context.Background(), e, sharedActions(), "hosts")
	if err == nil || !strings.Contains(err.Error(), "run `labctl up --host beta --until nodes` on beta") {
		t.Errorf("up with nothing on beta = %v", err)
	}
	if !slices.ContainsFunc(rec.Lines, func(l string) bool {
		return strings.Contains(l, "host beta has no exec:") && strings.Contains(l, "labctl up --host beta --until nodes")
	}) {
		t.Errorf("no note says what to run on beta: %v", rec.Lines)
	}
	if len(r.calls) != 0 {
		t.Errorf("labctl ran on a host without exec: %v", r.calls)
	}
	// The user ran it there.
	_, _ = r.Labctl(context.Background(), e.Plan.Spokes()[0], nil, "up")
	r.calls = nil
	labtest.Must(t, lab.Up(context.Background(), e, sharedActions(), "hosts"))
	if len(r.calls) != 0 {
		t.Errorf("labctl ran on a host without exec: %v", r.calls)
	}
}

// TestHostsStepOnOneHost: a lab on one host has no hosts step.
func TestHostsStepOnOneHost(t *testing.T) {
	e, rec := labtest.Env(t, labtest.NewHost(), "")
	labtest.Must(t, lab.Up(context.Background(), e, sharedActions(), "network"))
	if d := cmp.Diff([]string{"✓ preflight (no change)", "✓ network"}, rec.Ticks()); d != "" {
		t.Errorf("ticks (-want +got):\n%s", d)
	}
}

// TestSpokeArgsAndQuoting: the words for ssh are quoted for the remote
// shell; other exec: programs get them as they are.
func TestSpokeArgsAndQuoting(t *testing.T) {
	p := &plan.Plan{Dir: "/srv/my lab", Mode: plantest.IPI}
	h := plan.Host{Name: "beta", Exec: []string{"ssh", "root@beta"}, Labctl: "labctl"}
	got := SpokeArgs(p, h, "net", "check")
	if d := cmp.Diff([]string{"net", "check", "--host", "beta", "-f", "-", "--dir", "/srv/my lab", "--mode", "ipi-baremetal"}, got); d != "" {
		t.Errorf("SpokeArgs (-want +got):\n%s", d)
	}
	for in, want := range map[string]string{"/srv/my lab": `'/srv/my lab'`, "--dir": "--dir", "it's": `'it'\''s'`, "": "''"} {
		if q := shellQuote(in); q != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, q, want)
		}
	}
}

// sharedActions are the steps every mode shares, in up's order.
func sharedActions() []lab.Action {
	return []lab.Action{Preflight{}, Hosts{}, Network{}, Storage{}, Nodes{}, BMCs{}}
}
