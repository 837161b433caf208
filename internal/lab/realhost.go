package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/labvirt"
	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/plan"
)

// RealHost is the lab's Provider on one host: libvirt through a
// labvirt.Conn, the kernel's links through netlink in the lab's namespace,
// and vbmcd as a process. Its methods are grouped by the interface they
// serve (Objects here; the others below).
type RealHost struct {
	c   *labvirt.Conn // nil: links only (labctl net --no-libvirt)
	h   *netlink.Handle
	log *zap.Logger
}

// OpenHost connects to the plan's libvirt and opens the plan's network
// namespace.
func OpenHost(ctx context.Context, p *plan.Plan, log *zap.Logger) (*RealHost, error) {
	return openHostAt(ctx, p, p.LibvirtURI, log)
}

// OpenLinks opens the plan's network namespace without libvirt: a Provider
// whose libvirt objects are none (labctl net --no-libvirt).
func OpenLinks(p *plan.Plan, log *zap.Logger) (*RealHost, error) {
	h, err := netplumb.OpenNamespace(p.Netns)
	if err != nil {
		return nil, err
	}
	return &RealHost{h: h, log: log}, nil
}

// openHostAt is OpenHost for the libvirt at uri.
func openHostAt(ctx context.Context, p *plan.Plan, uri string, log *zap.Logger) (*RealHost, error) {
	h, err := netplumb.OpenNamespace(p.Netns)
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	c, err := labvirt.Dial(dctx, uri)
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("%w; is libvirtd running?", err)
	}
	return &RealHost{c: c, h: h, log: log}, nil
}

// Close ends the connection.
func (r *RealHost) Close() {
	if r.c != nil {
		_ = r.c.Close()
	}
	r.h.Close()
}

// Objects implements Provider.
func (r *RealHost) Objects() Objects { return r }

// Nodes implements Provider.
func (r *RealHost) Nodes() Nodes { return r }

// Storage implements Provider.
func (r *RealHost) Storage() Storage { return r }

// Networks implements Provider.
func (r *RealHost) Networks() Networks { return r }

// BMCs implements Provider.
func (r *RealHost) BMCs() BMCs { return r }

// errNoLibvirt is what a libvirt call answers on a links-only host.
var errNoLibvirt = errors.New("libvirt left out (--no-libvirt)")

func (r *RealHost) conn() (*labvirt.Conn, error) {
	if r.c == nil {
		return nil, errNoLibvirt
	}
	return r.c, nil
}

func (r *RealHost) plumber(lab string) *netplumb.Plumber {
	return netplumb.New(r.h, lab, r.log.Named("netplumb"))
}

// Owner implements Objects. On a links-only host, no libvirt object
// exists.
func (r *RealHost) Owner(ctx context.Context, kind Kind, name string) (bool, string, error) {
	if kind == KindLink {
		l, err := r.h.LinkByName(name)
		if err != nil {
			var nf netlink.LinkNotFoundError
			if errors.As(err, &nf) {
				return false, "", nil
			}
			return false, "", fmt.Errorf("link %s: %w", name, err)
		}
		owner, ok := strings.CutPrefix(l.Attrs().Alias, netplumb.Owner(""))
		if !ok {
			owner = ""
		}
		return true, owner, nil
	}
	if r.c == nil {
		return false, "", nil
	}
	switch kind {
	case KindDomain:
		return r.c.DomainOwner(ctx, name)
	case KindNetwork:
		return r.c.NetworkOwner(ctx, name)
	case KindPool:
		return r.c.PoolOwner(ctx, name)
	}
	return false, "", fmt.Errorf("owner of a %s: not supported", kind)
}

// Marked implements Objects.
func (r *RealHost) Marked(ctx context.Context, kind Kind, lab string) ([]string, error) {
	if kind == KindLink {
		return r.plumber(lab).Owned()
	}
	if r.c == nil {
		return nil, nil
	}
	switch kind {
	case KindDomain:
		return r.c.MarkedDomains(ctx, lab)
	case KindNetwork:
		return r.c.MarkedNetworks(ctx, lab)
	case KindPool:
		marked, _, err := r.c.MarkedPools(ctx, lab)
		return marked, err
	}
	return nil, fmt.Errorf("marked %ss: not supported", kind)
}

// Delete implements Objects.
func (r *RealHost) Delete(ctx context.Context, kind Kind, name, lab string) error {
	if kind == KindLink {
		res, err := r.plumber(lab).Down(ctx, netplumb.Topology{VLANs: []netplumb.VLAN{{Name: name}}})
		if err == nil && len(res.Foreign) > 0 {
			err = fmt.Errorf("link %s: %w", strings.Join(res.Foreign, ", "), ErrForeign)
		}
		return err
	}
	c, err := r.conn()
	if err != nil {
		return err
	}
	switch kind {
	case KindDomain:
		found, owner, err := c.DomainOwner(ctx, name)
		if err != nil || !found {
			return err
		}
		if owner != lab {
			return fmt.Errorf("domain %s bears the mark of %q: %w", name, owner, ErrForeign)
		}
		return c.DeleteDomain(ctx, name)
	case KindNetwork:
		found, owner, err := c.NetworkOwner(ctx, name)
		if err != nil || !found {
			return err
		}
		if owner != lab {
			return fmt.Errorf("libvirt network %s bears the mark of %q: %w", name, owner, ErrForeign)
		}
		_, err = c.DeleteNetwork(ctx, name, lab)
		return err
	case KindPool:
		_, err := c.DeletePool(ctx, name, lab)
		if errors.Is(err, labvirt.ErrPoolForeign) {
			return fmt.Errorf("%w: %w", err, ErrForeign)
		}
		return err
	case KindVolume:
		pool, vol, ok := strings.Cut(name, "/")
		if !ok {
			return fmt.Errorf("volume %q: want pool/volume", name)
		}
		_, err := c.DeleteVolume(ctx, pool, vol, lab)
		return err
	}
	return fmt.Errorf("delete a %s: not supported", kind)
}

// EnsureNAT implements Networks.
func (r *RealHost) EnsureNAT(ctx context.Context, spec labvirt.LabNetworkSpec) (bool, error) {
	c, err := r.conn()
	if err != nil {
		return false, err
	}
	return c.EnsureLabNetwork(ctx, spec)
}

// SharedLockDir holds one lock file per shared network: labctl processes
// on this host that change one network's entries take turns, so that one
// lab's list in the network's metadata (read, changed, written back) is
// never lost to another's write.
var SharedLockDir = "/run/lock/bmlab"

// lockShared takes the network's lock (flock, released when the process
// dies) and returns its release.
func lockShared(ctx context.Context, network string) (func(), error) {
	if err := os.MkdirAll(SharedLockDir, 0o755); err != nil {
		return nil, fmt.Errorf("shared network lock: %w", err)
	}
	name := strings.NewReplacer("/", "_", "..", "_").Replace(network)
	f, err := os.OpenFile(filepath.Join(SharedLockDir, "shared-"+name+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("shared network lock: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("shared network lock %s: %w", f.Name(), err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for another labctl to finish with shared network %s: %w", network, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// EnsureShared implements Networks, holding the network's lock.
func (r *RealHost) EnsureShared(ctx context.Context, spec labvirt.SharedSpec) ([]string, error) {
	c, err := r.conn()
	if err != nil {
		return nil, err
	}
	unlock, err := lockShared(ctx, spec.Network)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return c.EnsureShared(ctx, spec)
}

// SharedProblems implements Networks.
func (r *RealHost) SharedProblems(ctx context.Context, spec labvirt.SharedSpec) ([]string, error) {
	c, err := r.conn()
	if err != nil {
		return nil, err
	}
	return c.SharedProblems(ctx, spec)
}

// SharedNetworks implements Networks; a links-only host has none.
func (r *RealHost) SharedNetworks(ctx context.Context) ([]labvirt.SharedNetwork, error) {
	if r.c == nil {
		return nil, nil
	}
	return r.c.SharedNetworks(ctx)
}

// RemoveShared implements Networks, holding the network's lock.
func (r *RealHost) RemoveShared(ctx context.Context, network, lab string) (bool, error) {
	if r.c == nil {
		return false, nil
	}
	unlock, err := lockShared(ctx, network)
	if err != nil {
		return false, err
	}
	defer unlock()
	return r.c.RemoveShared(ctx, network, lab)
}

// NATProblems implements Networks.
func (r *RealHost) NATProblems(ctx context.Context, spec labvirt.LabNetworkSpec) ([]string, error) {
	c, err := r.conn()
	if err != nil {
		return nil, err
	}
	return c.LabNetworkDrift(ctx, spec)
}

// EnsureBridgeNetwork implements Networks.
func (r *RealHost) EnsureBridgeNetwork(ctx context.Context, spec labvirt.NetworkSpec) (bool, error) {
	c, err := r.conn()
	if err != nil {
		return false, err
	}
	return c.EnsureNetwork(ctx, spec)
}

// BridgeNetworkProblems implements Networks.
func (r *RealHost) BridgeNetworkProblems(ctx context.Context, spec labvirt.NetworkSpec) ([]string, error) {
	c, err := r.conn()
	if err != nil {
		return nil, err
	}
	st, err := c.NetworkState(ctx, spec.Name)
	if err != nil {
		return nil, err
	}
	return labvirt.NetworkProblems(spec, st), nil
}

// NetworkCIDRs implements Networks.
func (r *RealHost) NetworkCIDRs(ctx context.Context) (map[string][]netip.Prefix, error) {
	if r.c == nil {
		return nil, nil
	}
	return r.c.NetworkCIDRs(ctx)
}

// EnsureLinks implements Networks.
func (r *RealHost) EnsureLinks(ctx context.Context, lab string, t netplumb.Topology) ([]string, error) {
	p, err := r.plumber(lab).Apply(ctx, t)
	if err != nil {
		return nil, err
	}
	var steps []string
	for _, s := range p.Steps {
		steps = append(steps, s.String())
	}
	return steps, nil
}

// addressWait bounds WaitAddress: duplicate address detection takes a
// second or two once the link has a carrier.
const addressWait = 30 * time.Second

// WaitAddress implements Networks.
func (r *RealHost) WaitAddress(ctx context.Context, link string, addr netip.Addr) error {
	return netplumb.WaitAddress(ctx, r.h, link, addr, addressWait)
}

// LinkDifferences implements Networks.
func (r *RealHost) LinkDifferences(_ context.Context, lab string, t netplumb.Topology) ([]netplumb.Difference, error) {
	p, err := r.plumber(lab).Plan(t)
	if err != nil {
		return nil, err
	}
	return p.Differences, nil
}

// EnsurePool implements Storage.
func (r *RealHost) EnsurePool(ctx context.Context, spec labvirt.PoolSpec) (bool, error) {
	c, err := r.conn()
	if err != nil {
		return false, err
	}
	return c.EnsurePool(ctx, spec)
}

// EnsureVolume implements Storage.
func (r *RealHost) EnsureVolume(ctx context.Context, spec labvirt.VolumeSpec) (bool, error) {
	c, err := r.conn()
	if err != nil {
		return false, err
	}
	_, changed, err := c.EnsureVolume(ctx, spec)
	return changed, err
}

// DanglingPools implements Storage.
func (r *RealHost) DanglingPools(ctx context.Context) ([]labvirt.DanglingPool, error) {
	c, err := r.conn()
	if err != nil {
		return nil, err
	}
	_, dangling, err := c.MarkedPools(ctx, "")
	return dangling, err
}

// DeleteDanglingPool implements Storage.
func (r *RealHost) DeleteDanglingPool(ctx context.Context, name string) error {
	c, err := r.conn()
	if err != nil {
		return err
	}
	_, err = c.DeleteDanglingPool(ctx, name)
	return err
}

// DefineDomain implements Nodes.
func (r *RealHost) DefineDomain(ctx context.Context, spec labvirt.DomainSpec) error {
	c, err := r.conn()
	if err != nil {
		return err
	}
	_, err = c.DefineDomain(ctx, spec)
	return err
}

// DomainMarks implements Nodes.
func (r *RealHost) DomainMarks(ctx context.Context) (map[string]map[string]string, error) {
	c, err := r.conn()
	if err != nil {
		return nil, err
	}
	return c.DomainMarks(ctx)
}

// Start implements Nodes.
func (r *RealHost) Start(ctx context.Context, name string) (bool, error) {
	c, err := r.conn()
	if err != nil {
		return false, err
	}
	return c.StartDomain(ctx, name)
}

// Power implements Nodes.
func (r *RealHost) Power(ctx context.Context, name string) (string, error) {
	c, err := r.conn()
	if err != nil {
		return "", err
	}
	return c.DomainPower(ctx, name)
}

// SetNodeBMC implements Nodes: the endpoint and the user go into the
// domain's BMC settings, where vbmcd reads them.
func (r *RealHost) SetNodeBMC(ctx context.Context, name string, ipmiPort int, user, password string) (bool, error) {
	c, err := r.conn()
	if err != nil {
		return false, err
	}
	return c.SetNodeBMC(ctx, name, ipmiPort, user, password)
}

// Daemons implements BMCs: processes whose environment carries the lab's
// mark (plan.MarkEnv=<lab>) and whose program is vbmcd.
func (r *RealHost) Daemons(_ context.Context, lab string) ([]Daemon, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	mark := plan.MarkEnv + "=" + lab
	var out []Daemon
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		args := procStrings(pid, "cmdline")
		if len(args) == 0 || filepath.Base(args[0]) != "vbmcd" || !slices.Contains(procStrings(pid, "environ"), mark) {
			continue
		}
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && zombie(st) {
			continue
		}
		out = append(out, Daemon{PID: pid, Args: args[1:]})
	}
	return out, nil
}

func procStrings(pid int, file string) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// zombie reads the state field of /proc/PID/stat.
func zombie(stat []byte) bool {
	i := strings.LastIndexByte(string(stat), ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// StartDaemon implements BMCs: vbmcd runs in its own session, in the lab's
// namespace, with the lab's mark in its environment.
func (r *RealHost) StartDaemon(_ context.Context, v plan.Vbmcd, netns string) (Daemon, error) {
	if v.Path == "" {
		return Daemon{}, errors.New("vbmcd not found next to labctl or on PATH: run `make build` (it puts both in bin/) or pass --vbmcd")
	}
	if err := os.MkdirAll(filepath.Dir(v.Log), 0o755); err != nil {
		return Daemon{}, err
	}
	f, err := os.OpenFile(v.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return Daemon{}, err
	}
	defer f.Close()
	cmd := exec.Command(v.Path, v.Args...)
	if netns != "" {
		// ip netns exec execs vbmcd in place: same PID, same argv.
		cmd = exec.Command("ip", append([]string{"netns", "exec", netns, v.Path}, v.Args...)...)
	}
	cmd.Env = append(os.Environ(), v.Env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return Daemon{}, fmt.Errorf("start vbmcd (%s): %w", v.Path, err)
	}
	go func() { _ = cmd.Wait() }() // reap it if it dies while labctl runs
	return Daemon{PID: cmd.Process.Pid, Args: v.Args}, nil
}

// StopDaemon implements BMCs: SIGTERM, then SIGKILL after 5 s.
func (r *RealHost) StopDaemon(_ context.Context, pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return nil // gone already
	}
	for range 100 {
		if !alive(pid) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = p.Signal(syscall.SIGKILL)
	for range 40 {
		if !alive(pid) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("vbmcd (pid %d) does not stop", pid)
}

func alive(pid int) bool {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !zombie(st)
}

// view is what libvirt shows of the lab on this host, without reading any
// file (the pool's directory may be another machine's).
func (r *RealHost) view(ctx context.Context, lab, pool string) (HostView, error) {
	c, err := r.conn()
	if err != nil {
		return HostView{}, err
	}
	var v HostView
	if v.Domains, err = c.MarkedDomains(ctx, lab); err != nil {
		return v, err
	}
	if v.Networks, err = c.MarkedNetworks(ctx, lab); err != nil {
		return v, err
	}
	v.Pool, err = c.RemotePoolState(ctx, pool)
	return v, err
}
