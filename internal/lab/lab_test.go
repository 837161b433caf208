package lab

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"golang.org/x/crypto/ssh"

	"github.com/bmlab/bmlab/internal/labconfig"
	"github.com/bmlab/bmlab/internal/netaddr"
	"github.com/bmlab/bmlab/internal/plan"
)

// fakeHost keeps objects in maps: kind → name → owner ("" for foreign).
// It is for the pipeline's logic only; the real host is tested against
// libvirtd and netlink in labctl/up.
type fakeHost struct {
	objs    map[Kind]map[string]string
	poolDir map[string]string
	daemons map[int][]string // pid → args, all of the one lab
	nextPID int
	// fail makes the named call fail (once when failOnce).
	fail     map[string]error
	failOnce bool
	// ignoreDelete makes Delete of these names succeed without deleting.
	ignoreDelete map[string]bool
	calls        []string
	// shared are the libvirt networks other labs could share, with the
	// entries labs added (Ensure of SharedEntries).
	shared []Network
}

func newFake() *fakeHost {
	return &fakeHost{objs: map[Kind]map[string]string{}, poolDir: map[string]string{}, daemons: map[int][]string{}, nextPID: 100, fail: map[string]error{}, ignoreDelete: map[string]bool{}}
}

func (f *fakeHost) call(name string) error {
	f.calls = append(f.calls, name)
	if err, ok := f.fail[name]; ok {
		if f.failOnce {
			delete(f.fail, name)
		}
		return err
	}
	return nil
}

func (f *fakeHost) put(kind Kind, name, owner string) bool {
	if f.objs[kind] == nil {
		f.objs[kind] = map[string]string{}
	}
	if o, ok := f.objs[kind][name]; ok && o == owner {
		return false
	}
	f.objs[kind][name] = owner
	return true
}

func (f *fakeHost) Owner(_ context.Context, kind Kind, name string) (bool, string, error) {
	o, ok := f.objs[kind][name]
	return ok, o, nil
}

func (f *fakeHost) Marked(_ context.Context, kind Kind, lab string) ([]string, error) {
	var out []string
	if kind == KindDaemon {
		for pid := range f.daemons {
			out = append(out, strconv.Itoa(pid))
		}
		slices.Sort(out)
		return out, nil
	}
	for name, o := range f.objs[kind] {
		if o == lab && lab != "" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (f *fakeHost) Delete(_ context.Context, kind Kind, name, lab string) error {
	switch kind {
	case KindDaemon:
		pid, _ := strconv.Atoi(name)
		delete(f.daemons, pid)
		return f.call("stop vbmcd")
	case KindShared:
		n := f.sharedNet(name)
		if n != nil {
			n.Labs = slices.DeleteFunc(n.Labs, func(e Entries) bool { return e.Lab == lab })
		}
		return f.call("unshare " + name)
	case KindDanglingPool:
		delete(f.objs[KindPool], name)
		f.dropVolumes(name) // they were files in the directory
		return f.call("delete dangling " + name)
	}
	if err := f.call("delete " + name); err != nil {
		return err
	}
	o, ok := f.objs[kind][name]
	if !ok || f.ignoreDelete[name] {
		return nil
	}
	if o != lab {
		return fmt.Errorf("%s %s: %w", kind, name, ErrForeign)
	}
	delete(f.objs[kind], name)
	if kind == KindPool {
		f.dropVolumes(name)
	}
	return nil
}

// dropVolumes forgets a pool's volumes, as deleting a pool does.
func (f *fakeHost) dropVolumes(pool string) {
	for v := range f.objs[KindVolume] {
		if strings.HasPrefix(v, pool+"/") {
			delete(f.objs[KindVolume], v)
		}
	}
}

func (f *fakeHost) Validate(Object) error { return nil }

func (f *fakeHost) Ensure(_ context.Context, o Object) ([]string, error) {
	changed := func(c bool, err error, what string) ([]string, error) {
		if c {
			return []string{what}, err
		}
		return nil, err
	}
	switch o := o.(type) {
	case NATNetwork:
		if err := f.call("nat " + o.NAT.Name); err != nil {
			return nil, err
		}
		f.put(KindLink, o.NAT.Bridge, o.Lab)
		return changed(f.put(KindNetwork, o.NAT.Name, o.Lab), nil, "nat")
	case LinkAddress:
		return nil, nil
	case BridgeNetwork:
		return changed(f.put(KindNetwork, o.Name, o.Lab), f.call("network "+o.Name), "network")
	case Links:
		var steps []string
		for _, n := range o.Topology.Names() {
			if f.put(KindLink, n, o.Lab) {
				steps = append(steps, "create "+n)
			}
		}
		return steps, f.call("links")
	case SharedEntries:
		if err := f.call("shared " + o.Shared.Network); err != nil {
			return nil, err
		}
		n := f.sharedNet(o.Shared.Network)
		if n == nil {
			return nil, fmt.Errorf("shared libvirt network %q: missing", o.Shared.Network)
		}
		want := entriesOf(o)
		if i := slices.IndexFunc(n.Labs, func(e Entries) bool { return e.Lab == o.Lab }); i >= 0 {
			if reflect.DeepEqual(n.Labs[i], want) {
				return nil, nil
			}
			n.Labs[i] = want
		} else {
			n.Labs = append(n.Labs, want)
		}
		return []string{"entries of " + o.Lab + " in " + o.Shared.Network}, nil
	case Pool:
		if err := os.MkdirAll(o.Dir, 0o755); err != nil {
			return nil, err
		}
		f.poolDir[o.Name] = o.Dir
		return changed(f.put(KindPool, o.Name, o.Lab), f.call("pool "+o.Name), "pool")
	case Volume:
		if err := f.call("volume " + o.Disk.Volume); err != nil {
			return nil, err
		}
		return changed(f.put(KindVolume, o.Pool+"/"+o.Disk.Volume, o.Lab), nil, "volume")
	case Machine:
		if err := f.call("define " + o.Node.Name); err != nil {
			return nil, err
		}
		f.put(KindDomain, o.Node.Name, o.Lab)
		return []string{"domain"}, nil
	case MachineBMC:
		return nil, nil
	case BMCDaemon:
		var done []string
		ok := false
		for pid, args := range f.daemons {
			if slices.Equal(args, o.Plan.Vbmcd.Args) && !o.Restart {
				ok = true
				continue
			}
			done = append(done, fmt.Sprintf("restarting vbmcd (pid %d): its settings changed", pid))
			delete(f.daemons, pid)
			if err := f.call("stop vbmcd"); err != nil {
				return done, err
			}
		}
		if !ok {
			if err := f.call("start vbmcd"); err != nil {
				return done, err
			}
			f.nextPID++
			f.daemons[f.nextPID] = o.Plan.Vbmcd.Args
			done = append(done, "started")
		}
		return done, f.call("check bmcs")
	}
	return nil, fmt.Errorf("fake: ensure %T", o)
}

// entriesOf is what the lab adds to a shared network, as the fake keeps it.
func entriesOf(o SharedEntries) Entries {
	sh := o.Shared
	e := Entries{Lab: o.Lab, Block: netaddr.Range{Start: sh.BlockStart, End: sh.BlockEnd}}
	for _, r := range sh.Reservations {
		r.MAC = strings.ToLower(r.MAC)
		e.Hosts = append(e.Hosts, r)
	}
	e.Records = append(e.Records, sh.Records...)
	return e
}

func (f *fakeHost) Differences(_ context.Context, o Object) ([]Difference, error) {
	gone := func(name, lab string) []Difference {
		if o, ok := f.objs[KindNetwork][name]; !ok {
			return []Difference{{Got: "absent"}}
		} else if o != lab {
			return []Difference{{Got: "owned by " + o}}
		}
		return nil
	}
	switch o := o.(type) {
	case NATNetwork:
		return gone(o.NAT.Name, o.Lab), nil
	case BridgeNetwork:
		return gone(o.Name, o.Lab), nil
	case Links:
		// A link of the topology that is missing, or another's
		// (blocking), as netplumb reports them.
		var out []Difference
		for _, n := range o.Topology.Names() {
			switch own, ok := f.objs[KindLink][n]; {
			case !ok:
				out = append(out, Difference{Object: n, Kind: "missing", Fix: "create it"})
			case own != o.Lab:
				out = append(out, Difference{Object: n, Kind: "foreign", Blocking: true, Fix: "ip link del " + n})
			}
		}
		return out, f.call("link differences")
	case SharedEntries:
		n := f.sharedNet(o.Shared.Network)
		if n == nil {
			return []Difference{{Got: "missing"}}, nil
		}
		want := entriesOf(o)
		if !slices.ContainsFunc(n.Labs, func(e Entries) bool { return reflect.DeepEqual(e, want) }) {
			return []Difference{{Got: "the lab's entries are missing"}}, nil
		}
		return nil, nil
	}
	return nil, fmt.Errorf("fake: differences of %T", o)
}

func (f *fakeHost) sharedNet(name string) *Network {
	for i := range f.shared {
		if f.shared[i].Name == name {
			return &f.shared[i]
		}
	}
	return nil
}

// Survey: one other network with an address; the shared networks; every
// marked domain's mark; pools whose directory is gone (their mark went
// with it, so they no longer count as the lab's, as on a real host).
func (f *fakeHost) Survey(_ context.Context, kinds ...Kind) (*Survey, error) {
	s := &Survey{
		Addresses: map[string][]netip.Prefix{"default": {netip.MustParsePrefix("192.168.122.1/24")}},
		Networks:  slices.Clone(f.shared),
		Marks:     map[string]map[string]string{},
	}
	for name, owner := range f.objs[KindDomain] {
		if owner != "" {
			s.Marks[name] = map[string]string{"name": owner}
		}
	}
	for name, dir := range f.poolDir {
		if len(kinds) > 0 && !slices.Contains(kinds, KindPool) {
			break
		}
		if _, ok := f.objs[KindPool][name]; !ok {
			continue
		}
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			f.objs[KindPool][name] = ""
			s.Dangling = append(s.Dangling, DanglingPool{Name: name, Dir: dir})
		}
	}
	return s, nil
}

func (f *fakeHost) Start(_ context.Context, name string) (bool, error) {
	if err := f.call("start " + name); err != nil {
		return false, err
	}
	if _, ok := f.objs[KindDomain][name]; !ok {
		return false, fmt.Errorf("no domain %s", name)
	}
	return f.put(Kind("running"), name, "on"), nil
}

func (f *fakeHost) Power(_ context.Context, name string) (string, error) {
	if _, ok := f.objs[KindDomain][name]; ok {
		if _, on := f.objs["running"][name]; on {
			return "On", nil
		}
		return "Off", nil
	}
	return "absent", nil
}

// recorder keeps the status lines.
type recorder struct{ lines, progress []string }

func (r *recorder) Start(string)          {}
func (r *recorder) Note(step, msg string) { r.lines = append(r.lines, step+": "+msg) }
func (r *recorder) Progress(step, msg string) {
	r.progress = append(r.progress, step+": "+msg)
}
func (r *recorder) Done(step string, changed bool, err error) {
	switch {
	case err != nil && !errors.Is(err, ErrStop):
		r.lines = append(r.lines, "✗ "+step)
	case err != nil:
		r.lines = append(r.lines, "stopped "+step)
	case changed:
		r.lines = append(r.lines, "✓ "+step)
	default:
		r.lines = append(r.lines, "✓ "+step+" (no change)")
	}
}

func (r *recorder) ticks() []string {
	var out []string
	for _, l := range r.lines {
		if strings.HasPrefix(l, "✓") || strings.HasPrefix(l, "✗") || strings.HasPrefix(l, "stopped") {
			out = append(out, l)
		}
	}
	return out
}

// testEnv is the tiny seed lab in a temporary directory, with a pull
// secret and an SSH key, and an openshift-install that is not there.
func testEnv(t *testing.T, f *fakeHost, dir string) (*Env, *recorder) {
	t.Helper()
	if dir == "" {
		dir = filepath.Join(t.TempDir(), "lab")
	}
	// t.TempDir's are 0700: open the way for the qemu check in preflight.
	for d := filepath.Dir(dir); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		_ = os.Chmod(d, 0o755)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(filepath.Join(dir, "pull-secret.json"), []byte(`{"auths":{"registry.invalid":{"auth":"dXNlcjpwYXNz"}}}`), 0o600))
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	must(t, err)
	sp, err := ssh.NewPublicKey(pub)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "id.pub"), ssh.MarshalAuthorizedKey(sp), 0o644))
	cfg, err := labconfig.Parse([]byte("name: fk\ncluster: {sshKey: id.pub, installer: /nonexistent/openshift-install}\n"))
	must(t, err)
	must(t, cfg.ApplyProfile("tiny"))
	p, err := plan.Resolve(cfg, plan.Options{Dir: dir, Profile: "tiny", Vbmcd: "/bin/vbmcd"})
	must(t, err)
	rec := &recorder{}
	return &Env{Plan: p, Host: f, Rep: rec, Log: zap.NewNop()}, rec
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func ipiActions(t *testing.T) []Action {
	a, err := Pipeline(plan.ModeIPI)
	must(t, err)
	return a
}

func TestUpUntil(t *testing.T) {
	f := newFake()
	e, rec := testEnv(t, f, "")
	must(t, Up(context.Background(), e, ipiActions(t), "storage"))
	if d := cmp.Diff([]string{"✓ preflight (no change)", "✓ network", "✓ storage"}, rec.ticks()); d != "" {
		t.Errorf("ticks (-want +got):\n%s", d)
	}
	if len(f.objs[KindDomain]) != 0 || len(f.daemons) != 0 {
		t.Errorf("--until storage went further: %v, %v", f.objs[KindDomain], f.daemons)
	}
	st, err := LoadState(e.Plan)
	must(t, err)
	if st.Done != "storage" {
		t.Errorf("state done = %q", st.Done)
	}
	if err := Up(context.Background(), e, ipiActions(t), "nodez"); err == nil || !strings.Contains(err.Error(), `--until "nodez": not a step; the steps are preflight, hosts, network, storage, nodes, bmcs, install-config, installer`) {
		t.Errorf("Up(--until nodez) = %v", err)
	}
}

func TestResumeAfterFailure(t *testing.T) {
	f := newFake()
	e, rec := testEnv(t, f, "")
	f.fail["define fk-master-2"] = errors.New("libvirt: out of memory")
	f.failOnce = true
	err := Up(context.Background(), e, ipiActions(t), "bmcs")
	if err == nil || err.Error() != "nodes: libvirt: out of memory" {
		t.Fatalf("Up with a failing define = %v", err)
	}
	if got := rec.ticks(); got[len(got)-1] != "✗ nodes" {
		t.Errorf("ticks %v, want the last to be ✗ nodes", got)
	}
	if len(f.objs[KindDomain]) != 2 {
		t.Errorf("domains after the failure: %v", f.objs[KindDomain])
	}
	rec.lines = nil
	f.calls = nil
	must(t, Up(context.Background(), e, ipiActions(t), "bmcs"))
	want := []string{"✓ preflight (no change)", "✓ network (no change)", "✓ storage (no change)", "✓ nodes", "✓ bmcs"}
	if d := cmp.Diff(want, rec.ticks()); d != "" {
		t.Errorf("resume ticks (-want +got):\n%s", d)
	}
	var defines []string
	for _, c := range f.calls {
		if strings.HasPrefix(c, "define ") {
			defines = append(defines, c)
		}
	}
	if d := cmp.Diff([]string{"define fk-master-2", "define fk-worker-0", "define fk-worker-1"}, defines); d != "" {
		t.Errorf("resume defined (-want +got):\n%s", d)
	}
}

func TestInstallerStop(t *testing.T) {
	f := newFake()
	e, rec := testEnv(t, f, "")
	must(t, Up(context.Background(), e, ipiActions(t), ""))
	ticks := rec.ticks()
	if ticks[len(ticks)-1] != "stopped installer" || ticks[len(ticks)-2] != "✓ install-config" {
		t.Errorf("ticks %v", ticks)
	}
	if !slices.ContainsFunc(rec.lines, func(l string) bool {
		return strings.HasPrefix(l, "installer: ") && strings.Contains(l, "openshift-install")
	}) {
		t.Errorf("no note says where openshift-install is missing: %v", rec.lines)
	}
	st, err := LoadState(e.Plan)
	must(t, err)
	if st.Done != "install-config" {
		t.Errorf("state done = %q, want install-config (the installer is not done)", st.Done)
	}
	if _, err := os.Stat(filepath.Join(e.Plan.Installer.Dir, "install-config.yaml")); err != nil {
		t.Error(err)
	}
}

// TestDownAfterLostState: the lab's directory is gone and down runs from
// another directory; it removes every object that bears the lab's mark,
// the dangling pool proven by name and layout, and nothing foreign.
func TestDownAfterLostState(t *testing.T) {
	f := newFake()
	dir := filepath.Join(t.TempDir(), "lab")
	e, _ := testEnv(t, f, dir)
	must(t, Up(context.Background(), e, ipiActions(t), "bmcs"))
	f.put(KindDomain, "fk-master-9", "")      // foreign, with a lab-like name
	f.put(KindDomain, "other-master-0", "ot") // another lab's
	must(t, os.RemoveAll(dir))

	e2, rec := testEnv(t, f, filepath.Join(t.TempDir(), "elsewhere"))
	must(t, Down(context.Background(), e2, ipiActions(t)))
	for kind, objs := range f.objs {
		for name, owner := range objs {
			if owner == "fk" {
				t.Errorf("down left %s %s", kind, name)
			}
		}
	}
	if _, ok := f.objs[KindPool]["fk-disks"]; ok {
		t.Errorf("down left the dangling pool")
	}
	if len(f.daemons) != 0 {
		t.Errorf("down left vbmcd running: %v", f.daemons)
	}
	if f.objs[KindDomain]["fk-master-9"] != "" || f.objs[KindDomain]["other-master-0"] != "ot" {
		t.Errorf("down touched foreign domains: %v", f.objs[KindDomain])
	}
	want := []string{"✓ remove install-config", "✓ remove bmcs", "✓ remove nodes", "✓ remove storage", "✓ remove network"}
	if d := cmp.Diff(want, rec.ticks()); d != "" {
		t.Errorf("down ticks (-want +got):\n%s", d)
	}
}

// TestDownAggregatesErrors: one stuck domain does not keep the rest; the
// error names every failure; the steps that failed show ✗.
func TestDownAggregatesErrors(t *testing.T) {
	f := newFake()
	e, rec := testEnv(t, f, "")
	must(t, Up(context.Background(), e, ipiActions(t), "bmcs"))
	f.fail["delete fk-master-1"] = errors.New("domain is locked")
	f.fail["delete baremetal"] = errors.New("network busy")
	rec.lines = nil
	err := Down(context.Background(), e, ipiActions(t))
	if err == nil || !strings.Contains(err.Error(), "domain is locked") || !strings.Contains(err.Error(), "network busy") {
		t.Fatalf("Down = %v, want both failures", err)
	}
	want := []string{"✓ remove install-config", "✓ remove bmcs", "✗ remove nodes", "✓ remove storage", "✗ remove network"}
	if d := cmp.Diff(want, rec.ticks()); d != "" {
		t.Errorf("down ticks (-want +got):\n%s", d)
	}
	if len(f.objs[KindDomain]) != 1 || len(f.objs[KindPool]) != 0 {
		t.Errorf("down stopped at the first failure: %v %v", f.objs[KindDomain], f.objs[KindPool])
	}
}

// TestDownNeverTicksWithLeftovers: a Delete that returns success but leaves
// the object is caught by the look afterwards.
func TestDownNeverTicksWithLeftovers(t *testing.T) {
	f := newFake()
	e, rec := testEnv(t, f, "")
	must(t, Up(context.Background(), e, ipiActions(t), "nodes"))
	f.ignoreDelete["fk-worker-0"] = true
	rec.lines = nil
	err := Down(context.Background(), e, ipiActions(t))
	if err == nil || !strings.Contains(err.Error(), `domains of lab "fk" still there: fk-worker-0`) {
		t.Fatalf("Down = %v", err)
	}
	if !slices.Contains(rec.ticks(), "✗ remove nodes") {
		t.Errorf("ticks %v", rec.ticks())
	}
}

// TestClashStopsBeforeAnything: a foreign bridge and another lab's network
// stop up in preflight, with the settings that avoid them.
func TestClashStopsBeforeAnything(t *testing.T) {
	f := newFake()
	e, _ := testEnv(t, f, "")
	f.put(KindLink, "baremetal", "")
	f.put(KindNetwork, "fk-machine", "other")
	err := Up(context.Background(), e, ipiActions(t), "")
	for _, want := range []string{
		"preflight: lab \"fk\" would clash with what is on this host; nothing was created:",
		"link baremetal has no lab's mark: give this lab its own (network.bridges[].name)",
		"libvirt network fk-machine belongs to lab \"other\": give this lab its own (name)",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Up = %v\nwant %q", err, want)
		}
	}
	for _, c := range f.calls {
		if !strings.HasPrefix(c, "delete") && c != "" {
			t.Errorf("preflight failed but %q was called", c)
		}
	}
}

// stepStub is an action that records its run and applies to plans as told.
type stepStub struct {
	name  string
	apply bool
	ran   *[]string
}

func (s stepStub) Name() string                       { return s.name }
func (s stepStub) applies(*plan.Plan) bool            { return s.apply }
func (s stepStub) Delete(context.Context, *Env) error { return nil }
func (s stepStub) Ensure(context.Context, *Env) (bool, error) {
	*s.ran = append(*s.ran, s.name)
	return false, nil
}

// TestUpUntilSharedName: the hybrid mode's two flows share step names
// (ignition): --until NAME stops after the plan's own step of that name,
// not at the other flow's, which the plan skips; a skipped step alone with
// the name still ends the run where it would have been.
func TestUpUntilSharedName(t *testing.T) {
	e, _ := testEnv(t, newFake(), "")
	var ran []string
	actions := []Action{
		stepStub{"storage", true, &ran}, stepStub{"ignition", false, &ran}, stepStub{"ignition", true, &ran},
		stepStub{"control-plane", false, &ran}, stepStub{"node", true, &ran},
	}
	must(t, Up(context.Background(), e, actions, "ignition"))
	if d := cmp.Diff([]string{"storage", "ignition"}, ran); d != "" {
		t.Errorf("--until ignition ran (-want +got):\n%s", d)
	}
	ran = nil
	must(t, Up(context.Background(), e, actions, "control-plane"))
	if d := cmp.Diff([]string{"storage", "ignition"}, ran); d != "" {
		t.Errorf("--until control-plane (skipped) ran (-want +got):\n%s", d)
	}
}
