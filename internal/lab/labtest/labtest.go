// Package labtest is the steps' test fixture: a fake provider that keeps
// the lab's objects in maps (Host), a Reporter that keeps the status lines
// (Recorder), and the tiny seed lab in a temporary directory (Env).
package labtest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/zap"
	"golang.org/x/crypto/ssh"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/labconfig"
	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/plan"
	"github.com/bmlab/bmlab/internal/plan/plantest"
)

// Host keeps objects in maps: kind → name → owner ("" for foreign).
// It is for the pipeline's logic only; the real host is tested against
// libvirtd and netlink in labctl/up.
type Host struct {
	// Objs are the objects: kind → name → owner ("" for foreign).
	Objs    map[lab.Kind]map[string]string
	PoolDir map[string]string
	Daemons map[int]plan.Vbmcd // pid → what it serves, all of the one lab
	NextPID int
	// BMCs are the BMC settings recorded with each node (MachineBMC).
	BMCs map[string]lab.MachineBMC
	// Fail makes the named call fail (once when FailOnce).
	Fail     map[string]error
	FailOnce bool
	// IgnoreDelete makes Delete of these names succeed without deleting.
	IgnoreDelete map[string]bool
	// Calls are the calls made, as Fail names them.
	Calls []string
	// Shared are the libvirt networks other labs could share, with the
	// entries labs added (Ensure of SharedEntries).
	Shared []lab.SharedNetwork
	// HostInfo is what Info answers (NewHost: a roomy KVM host); Info
	// fails with Fail["info"].
	HostInfo lab.HostInfo
	// Images are what Image answers, by path.
	Images map[string]lab.ImageInfo
	// Marks, when set, are the cluster marks Survey answers (domain →
	// mark) in place of those of the domains in Objs: other labs' domains.
	Marks map[string]map[string]string
	// Addresses, when set, are the libvirt networks' addresses Survey
	// answers (network → prefixes) in place of the default network's.
	Addresses map[string][]netip.Prefix
}

// NewHost is an empty fake provider.
func NewHost() *Host {
	return &Host{Objs: map[lab.Kind]map[string]string{}, PoolDir: map[string]string{}, Daemons: map[int]plan.Vbmcd{}, NextPID: 100, Fail: map[string]error{}, IgnoreDelete: map[string]bool{},
		HostInfo: lab.HostInfo{KVM: true, Arch: "amd64", CPUs: 64, MemoryMiB: 256 << 10, FreeGiB: 1 << 10, FreeKnown: true}}
}

// Info implements lab.Provider: f.HostInfo, recorded in no call list.
func (f *Host) Info(context.Context, string) (lab.HostInfo, error) {
	if err := f.Fail["info"]; err != nil {
		return lab.HostInfo{}, err
	}
	return f.HostInfo, nil
}

// Image implements lab.Provider: Images[path], recorded as "image PATH";
// an image not listed is an error, as qemu-img's for a missing file.
func (f *Host) Image(_ context.Context, path string) (lab.ImageInfo, error) {
	if err := f.Call("image " + path); err != nil {
		return lab.ImageInfo{}, err
	}
	info, ok := f.Images[path]
	if !ok {
		return lab.ImageInfo{}, fmt.Errorf("qemu-img info %s: %w", path, os.ErrNotExist)
	}
	return info, nil
}

// Fetch implements lab.Provider: recorded as "fetch URL"; it writes a few
// bytes to path through watch, as a download would, unless path is there.
func (f *Host) Fetch(_ context.Context, url, path string, watch func(io.Reader, int64) io.Reader) (bool, error) {
	if err := f.Call("fetch " + url); err != nil {
		return false, err
	}
	if _, err := os.Stat(path); err == nil {
		return false, nil
	}
	data := "image from " + url
	b, err := io.ReadAll(watch(strings.NewReader(data), int64(len(data))))
	if err != nil {
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, err
	}
	return true, os.WriteFile(path, b, 0o644)
}

func (f *Host) Call(name string) error {
	f.Calls = append(f.Calls, name)
	if err, ok := f.Fail[name]; ok {
		if f.FailOnce {
			delete(f.Fail, name)
		}
		return err
	}
	return nil
}

func (f *Host) Put(kind lab.Kind, name, owner string) bool {
	if f.Objs[kind] == nil {
		f.Objs[kind] = map[string]string{}
	}
	if o, ok := f.Objs[kind][name]; ok && o == owner {
		return false
	}
	f.Objs[kind][name] = owner
	return true
}

func (f *Host) Owner(_ context.Context, kind lab.Kind, name string) (bool, string, error) {
	switch kind {
	case lab.KindUnmanaged:
		return netplumb.UnmanagedSnippetOwner(name)
	case lab.KindResolver:
		return netplumb.ResolverDropInOwner(name)
	}
	o, ok := f.Objs[kind][name]
	return ok, o, nil
}

func (f *Host) Marked(_ context.Context, kind lab.Kind, labName string) ([]string, error) {
	var out []string
	if kind == lab.KindDaemon {
		for pid := range f.Daemons {
			out = append(out, strconv.Itoa(pid))
		}
		slices.Sort(out)
		return out, nil
	}
	for name, o := range f.Objs[kind] {
		if o == labName && labName != "" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (f *Host) Delete(_ context.Context, kind lab.Kind, name, labName string) error {
	switch kind {
	case lab.KindDaemon:
		pid, _ := strconv.Atoi(name)
		delete(f.Daemons, pid)
		return f.Call("stop vbmcd")
	case lab.KindShared:
		n := f.SharedNet(name)
		if n != nil {
			n.Labs = slices.DeleteFunc(n.Labs, func(e lab.Entries) bool { return e.Lab == labName })
		}
		return f.Call("unshare " + name)
	case lab.KindUnmanaged:
		_, _, err := netplumb.RemoveUnmanagedSnippet(filepath.Dir(name), labName)
		return errors.Join(err, f.Call("remove "+name))
	case lab.KindResolver:
		_, _, err := netplumb.RemoveResolverDropIn(name, labName)
		return errors.Join(err, f.Call("remove "+name))
	case lab.KindDanglingPool:
		delete(f.Objs[lab.KindPool], name)
		f.dropVolumes(name) // they were files in the directory
		return f.Call("delete dangling " + name)
	}
	if err := f.Call("delete " + name); err != nil {
		return err
	}
	o, ok := f.Objs[kind][name]
	if !ok || f.IgnoreDelete[name] {
		return nil
	}
	if o != labName {
		return fmt.Errorf("%s %s: %w", kind, name, lab.ErrForeign)
	}
	delete(f.Objs[kind], name)
	if kind == lab.KindPool {
		f.dropVolumes(name)
	}
	return nil
}

// dropVolumes forgets a pool's volumes, as deleting a pool does.
func (f *Host) dropVolumes(pool string) {
	for v := range f.Objs[lab.KindVolume] {
		if strings.HasPrefix(v, pool+"/") {
			delete(f.Objs[lab.KindVolume], v)
		}
	}
}

func (f *Host) Validate(lab.Object) error { return nil }

func (f *Host) Ensure(_ context.Context, o lab.Object) ([]string, error) {
	switch o := o.(type) {
	case lab.NATNetwork:
		if err := f.Call("nat " + o.NAT.Name); err != nil {
			return nil, err
		}
		f.Put(lab.KindLink, o.NAT.Bridge, o.Lab)
		return lab.Changed(f.Put(lab.KindNetwork, o.NAT.Name, o.Lab), nil, "nat")
	case lab.LinkAddress:
		return nil, nil
	case lab.Unmanaged:
		// The host's files are real files, in the test's directories.
		c, err := o.Ensure()
		return lab.Changed(c, err, o.Path())
	case lab.ResolverDropIn:
		c, err := o.Write()
		return lab.Changed(c, err, o.Path)
	case lab.BridgeNetwork:
		return lab.Changed(f.Put(lab.KindNetwork, o.Name, o.Lab), f.Call("network "+o.Name), "network")
	case lab.Links:
		var steps []string
		for _, n := range o.Topology.Names() {
			if f.Put(lab.KindLink, n, o.Lab) {
				steps = append(steps, "create "+n)
			}
		}
		return steps, f.Call("links")
	case lab.SharedEntries:
		if err := f.Call("shared " + o.Shared.Network); err != nil {
			return nil, err
		}
		n := f.SharedNet(o.Shared.Network)
		if n == nil {
			return nil, fmt.Errorf("shared libvirt network %q: missing", o.Shared.Network)
		}
		want := entriesOf(o)
		if i := slices.IndexFunc(n.Labs, func(e lab.Entries) bool { return e.Lab == o.Lab }); i >= 0 {
			if reflect.DeepEqual(n.Labs[i], want) {
				return nil, nil
			}
			n.Labs[i] = want
		} else {
			n.Labs = append(n.Labs, want)
		}
		return []string{"entries of " + o.Lab + " in " + o.Shared.Network}, nil
	case lab.Pool:
		if err := os.MkdirAll(o.Dir, 0o755); err != nil {
			return nil, err
		}
		f.PoolDir[o.Name] = o.Dir
		return lab.Changed(f.Put(lab.KindPool, o.Name, o.Lab), f.Call("pool "+o.Name), "pool")
	case lab.Volume:
		if err := f.Call("volume " + o.Disk.Volume); err != nil {
			return nil, err
		}
		return lab.Changed(f.Put(lab.KindVolume, o.Pool+"/"+o.Disk.Volume, o.Lab), nil, "volume")
	case lab.Machine:
		if err := f.Call("define " + o.Node.Name); err != nil {
			return nil, err
		}
		f.Put(lab.KindDomain, o.Node.Name, o.Lab)
		return []string{"domain"}, nil
	case lab.MachineBMC:
		if f.BMCs == nil {
			f.BMCs = map[string]lab.MachineBMC{}
		}
		f.BMCs[o.Node] = o
		return nil, nil
	case lab.LLDPSender:
		// One sender a lab, named as a process is.
		return lab.Changed(f.Put(lab.KindLLDP, "lldp-"+o.Lab, o.Lab), f.Call("lldp"), "LLDP sender")
	case lab.DHCPServer:
		return lab.Changed(f.Put(lab.KindDHCP, "dhcp-"+o.Lab, o.Lab), f.Call("dhcp"), "provisioning DHCP server")
	case lab.BMCDaemon:
		var done []string
		ok := false
		for pid, v := range f.Daemons {
			if reflect.DeepEqual(v, o.Plan.Vbmcd) && !o.Restart {
				ok = true
				continue
			}
			done = append(done, fmt.Sprintf("restarting vbmcd (pid %d): its settings changed", pid))
			delete(f.Daemons, pid)
			if err := f.Call("stop vbmcd"); err != nil {
				return done, err
			}
		}
		if !ok {
			if err := f.Call("start vbmcd"); err != nil {
				return done, err
			}
			f.NextPID++
			f.Daemons[f.NextPID] = o.Plan.Vbmcd
			done = append(done, "started")
		}
		return done, f.Call("check bmcs")
	}
	return nil, fmt.Errorf("fake: ensure %T", o)
}

// entriesOf is what the lab adds to a shared network, as the fake keeps it.
func entriesOf(o lab.SharedEntries) lab.Entries {
	sh := o.Shared
	e := lab.Entries{Lab: o.Lab, Block: sh.Block()}
	for _, r := range sh.Reservations {
		r.MAC = strings.ToLower(r.MAC)
		e.Hosts = append(e.Hosts, r)
	}
	e.Records = append(e.Records, sh.Records...)
	return e
}

func (f *Host) Differences(_ context.Context, o lab.Object) ([]lab.Difference, error) {
	gone := func(name, labName string) []lab.Difference {
		if o, ok := f.Objs[lab.KindNetwork][name]; !ok {
			return []lab.Difference{{Got: "absent"}}
		} else if o != labName {
			return []lab.Difference{{Got: "owned by " + o}}
		}
		return nil
	}
	switch o := o.(type) {
	case lab.NATNetwork:
		return gone(o.NAT.Name, o.Lab), nil
	case lab.BridgeNetwork:
		return gone(o.Name, o.Lab), nil
	case lab.Unmanaged:
		if o.Stale() {
			return []lab.Difference{{Object: o.Path(), Got: "stale"}}, nil
		}
		return nil, nil
	case lab.ResolverDropIn:
		problem, foreign, err := o.State()
		if problem == "" {
			return nil, err
		}
		return []lab.Difference{{Object: o.Path, Got: problem, Blocking: foreign}}, err
	case lab.Links:
		// A link of the topology that is missing, or another's
		// (blocking), as netplumb reports them.
		var out []lab.Difference
		for _, n := range o.Topology.Names() {
			switch own, ok := f.Objs[lab.KindLink][n]; {
			case !ok:
				out = append(out, lab.Difference{Object: n, Kind: "missing", Fix: "create it"})
			case own != o.Lab:
				out = append(out, lab.Difference{Object: n, Kind: "foreign", Blocking: true, Fix: "ip link del " + n})
			}
		}
		return out, f.Call("link differences")
	case lab.LLDPSender:
		if _, ok := f.Objs[lab.KindLLDP]["lldp-"+o.Lab]; !ok {
			return []lab.Difference{{Got: "not running"}}, nil
		}
		return nil, nil
	case lab.DHCPServer:
		if _, ok := f.Objs[lab.KindDHCP]["dhcp-"+o.Lab]; !ok {
			return []lab.Difference{{Got: "not running"}}, nil
		}
		return nil, nil
	case lab.Machine:
		// A node's NICs as defined: the fake defines every node as the
		// plan says, but a test may mark one drifted.
		if err, ok := f.Fail["nics:"+o.Node.Name]; ok {
			return []lab.Difference{{Got: err.Error()}}, nil
		}
		return nil, nil
	case lab.SharedEntries:
		n := f.SharedNet(o.Shared.Network)
		if n == nil {
			return []lab.Difference{{Got: "missing"}}, nil
		}
		want := entriesOf(o)
		if !slices.ContainsFunc(n.Labs, func(e lab.Entries) bool { return reflect.DeepEqual(e, want) }) {
			return []lab.Difference{{Got: "the lab's entries are missing"}}, nil
		}
		return nil, nil
	}
	return nil, fmt.Errorf("fake: differences of %T", o)
}

func (f *Host) SharedNet(name string) *lab.SharedNetwork {
	for i := range f.Shared {
		if f.Shared[i].Name == name {
			return &f.Shared[i]
		}
	}
	return nil
}

// Survey: one other network with an address; the shared networks; every
// marked domain's mark; pools whose directory is gone (their mark went
// with it, so they no longer count as the lab's, as on a real host).
func (f *Host) Survey(_ context.Context, kinds ...lab.Kind) (*lab.Survey, error) {
	s := &lab.Survey{
		Addresses: map[string][]netip.Prefix{"default": {netip.MustParsePrefix("192.168.122.1/24")}},
		Networks:  slices.Clone(f.Shared),
		Marks:     map[string]map[string]string{},
	}
	for name, owner := range f.Objs[lab.KindDomain] {
		if owner != "" {
			s.Marks[name] = map[string]string{"name": owner}
		}
	}
	if f.Marks != nil {
		s.Marks = f.Marks
	}
	if f.Addresses != nil {
		s.Addresses = f.Addresses
	}
	for name, dir := range f.PoolDir {
		if len(kinds) > 0 && !slices.Contains(kinds, lab.KindPool) {
			break
		}
		if _, ok := f.Objs[lab.KindPool][name]; !ok {
			continue
		}
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			f.Objs[lab.KindPool][name] = ""
			s.Dangling = append(s.Dangling, lab.DanglingPool{Name: name, Dir: dir})
		}
	}
	return s, nil
}

func (f *Host) Start(_ context.Context, name string) (bool, error) {
	if err := f.Call("start " + name); err != nil {
		return false, err
	}
	if _, ok := f.Objs[lab.KindDomain][name]; !ok {
		return false, fmt.Errorf("no domain %s", name)
	}
	return f.Put(lab.Kind("running"), name, "on"), nil
}

func (f *Host) Power(_ context.Context, name string) (string, error) {
	if _, ok := f.Objs[lab.KindDomain][name]; ok {
		if _, on := f.Objs["running"][name]; on {
			return "On", nil
		}
		return "Off", nil
	}
	return "absent", nil
}

// Recorder keeps the status lines.
type Recorder struct{ Lines, Progressed []string }

func (r *Recorder) Start(string)          {}
func (r *Recorder) Note(step, msg string) { r.Lines = append(r.Lines, step+": "+msg) }
func (r *Recorder) Progress(step, msg string) {
	r.Progressed = append(r.Progressed, step+": "+msg)
}
func (r *Recorder) Done(step string, changed bool, err error) {
	switch {
	case err != nil && !errors.Is(err, lab.ErrStop):
		r.Lines = append(r.Lines, "✗ "+step)
	case err != nil:
		r.Lines = append(r.Lines, "stopped "+step)
	case changed:
		r.Lines = append(r.Lines, "✓ "+step)
	default:
		r.Lines = append(r.Lines, "✓ "+step+" (no change)")
	}
}

// Ticks are the lines that end a step.
func (r *Recorder) Ticks() []string {
	var out []string
	for _, l := range r.Lines {
		if strings.HasPrefix(l, "✓") || strings.HasPrefix(l, "✗") || strings.HasPrefix(l, "stopped") {
			out = append(out, l)
		}
	}
	return out
}

// Env is the tiny seed lab in a temporary directory (dir, or a new one), with
// a pull secret and an SSH key, and an openshift-install that is not there.
func Env(t *testing.T, f *Host, dir string) (*lab.Env, *Recorder) {
	t.Helper()
	return EnvFor(t, f, dir, "name: fk\ncluster: {sshKey: id.pub, installer: /nonexistent/openshift-install}\n")
}

// EnvFor is Env over the lab file labText (its sshKey id.pub and the pull
// secret are written beside it), with the tiny profile.
func EnvFor(t *testing.T, f *Host, dir, labText string) (*lab.Env, *Recorder) {
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
	Must(t, os.WriteFile(filepath.Join(dir, "pull-secret.json"), []byte(`{"auths":{"registry.invalid":{"auth":"dXNlcjpwYXNz"}}}`), 0o600))
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	Must(t, err)
	sp, err := ssh.NewPublicKey(pub)
	Must(t, err)
	Must(t, os.WriteFile(filepath.Join(dir, "id.pub"), ssh.MarshalAuthorizedKey(sp), 0o644))
	cfg, err := labconfig.Parse([]byte(labText))
	Must(t, err)
	Must(t, cfg.ApplyProfile("tiny"))
	p, err := plan.Resolve(cfg, plan.Options{Modes: plantest.Modes(), Dir: dir, Profile: "tiny", Vbmcd: "/bin/vbmcd"})
	Must(t, err)
	rec := &Recorder{}
	return &lab.Env{Plan: p, Host: f, Rep: rec, Log: zap.NewNop()}, rec
}

// Must fails the test on an error.
func Must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
