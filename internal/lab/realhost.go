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

	"github.com/digitalocean/go-libvirt"
	"github.com/vishvananda/netlink"
	"go.uber.org/zap"
	"libvirt.org/go/libvirtxml"

	"github.com/bmlab/bmlab/internal/labvirt"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/plan"
	"github.com/bmlab/bmlab/internal/virt"
)

// RealHost is the host as libvirt, the kernel's links and its processes
// show it.
type RealHost struct {
	be     *virt.Backend
	cancel context.CancelFunc // ends the backend's connection
	h      *netlink.Handle
	log    *zap.Logger
}

// OpenHost connects to the plan's libvirt and opens the plan's network
// namespace.
func OpenHost(ctx context.Context, p *plan.Plan, log *zap.Logger) (*RealHost, error) {
	return openHostAt(ctx, p, p.LibvirtURI, log)
}

// openHostAt is OpenHost for the libvirt at uri.
func openHostAt(ctx context.Context, p *plan.Plan, uri string, log *zap.Logger) (*RealHost, error) {
	h, err := netplumb.OpenNamespace(p.Netns)
	if err != nil {
		return nil, err
	}
	be, err := virt.New(virt.Config{URI: uri, Domains: p.NodeNames()}, log.Named("libvirt"))
	if err != nil {
		h.Close()
		return nil, err
	}
	// The connection lives until Close, not until ctx ends.
	run, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if err := be.Connect(run, 20*time.Second); err != nil {
		cancel()
		h.Close()
		return nil, err
	}
	return &RealHost{be: be, cancel: cancel, h: h, log: log}, nil
}

// Close ends the connection.
func (r *RealHost) Close() {
	r.cancel()
	r.h.Close()
}

func (r *RealHost) client() (*libvirt.Libvirt, error) { return r.be.Conn().Client() }

func (r *RealHost) plumber(lab string) *netplumb.Plumber {
	return netplumb.New(r.h, lab, r.log.Named("netplumb"))
}

// Owner implements Host.
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
		owner, _ := strings.CutPrefix(l.Attrs().Alias, netplumb.Owner(""))
		if !strings.HasPrefix(l.Attrs().Alias, netplumb.Owner("")) {
			owner = ""
		}
		return true, owner, nil
	}
	lc, err := r.client()
	if err != nil {
		return false, "", err
	}
	switch kind {
	case KindDomain:
		return labvirt.DomainOwner(ctx, lc, name)
	case KindNetwork:
		return labvirt.NetworkOwner(ctx, lc, name)
	case KindPool:
		return labvirt.PoolOwner(ctx, lc, name)
	}
	return false, "", fmt.Errorf("owner of a %s: not supported", kind)
}

// Marked implements Host.
func (r *RealHost) Marked(ctx context.Context, kind Kind, lab string) ([]string, error) {
	if kind == KindLink {
		return r.plumber(lab).Owned()
	}
	lc, err := r.client()
	if err != nil {
		return nil, err
	}
	switch kind {
	case KindDomain:
		return labvirt.MarkedDomains(ctx, lc, lab)
	case KindNetwork:
		return labvirt.MarkedNetworks(ctx, lc, lab)
	case KindPool:
		marked, _, err := labvirt.MarkedPools(ctx, lc, lab)
		return marked, err
	}
	return nil, fmt.Errorf("marked %ss: not supported", kind)
}

// Delete implements Host.
func (r *RealHost) Delete(ctx context.Context, kind Kind, name, lab string) error {
	if kind == KindLink {
		res, err := r.plumber(lab).Down(ctx, netplumb.Topology{VLANs: []netplumb.VLAN{{Name: name}}})
		if err == nil && len(res.Foreign) > 0 {
			err = fmt.Errorf("link %s: %w", strings.Join(res.Foreign, ", "), ErrForeign)
		}
		return err
	}
	lc, err := r.client()
	if err != nil {
		return err
	}
	switch kind {
	case KindDomain:
		found, owner, err := labvirt.DomainOwner(ctx, lc, name)
		if err != nil || !found {
			return err
		}
		if owner != lab {
			return fmt.Errorf("domain %s bears the mark of %q: %w", name, owner, ErrForeign)
		}
		return labvirt.DeleteDomain(ctx, lc, name)
	case KindNetwork:
		found, owner, err := labvirt.NetworkOwner(ctx, lc, name)
		if err != nil || !found {
			return err
		}
		if owner != lab {
			return fmt.Errorf("libvirt network %s bears the mark of %q: %w", name, owner, ErrForeign)
		}
		_, err = labvirt.DeleteNetwork(ctx, lc, name, lab)
		return err
	case KindPool:
		_, err := labvirt.DeletePool(ctx, lc, name, lab)
		if errors.Is(err, labvirt.ErrPoolForeign) {
			return fmt.Errorf("%w: %w", err, ErrForeign)
		}
		return err
	case KindVolume:
		pool, vol, ok := strings.Cut(name, "/")
		if !ok {
			return fmt.Errorf("volume %q: want pool/volume", name)
		}
		_, err := labvirt.DeleteVolume(ctx, lc, pool, vol, lab)
		return err
	}
	return fmt.Errorf("delete a %s: not supported", kind)
}

// EnsureNAT implements Host.
func (r *RealHost) EnsureNAT(ctx context.Context, spec labvirt.LabNetworkSpec) (bool, error) {
	lc, err := r.client()
	if err != nil {
		return false, err
	}
	return labvirt.EnsureLabNetwork(ctx, lc, spec)
}

// EnsureBridgeNetwork implements Host.
func (r *RealHost) EnsureBridgeNetwork(ctx context.Context, spec labvirt.NetworkSpec) (bool, error) {
	lc, err := r.client()
	if err != nil {
		return false, err
	}
	return labvirt.EnsureNetwork(ctx, lc, spec)
}

// NetworkCIDRs implements Host.
func (r *RealHost) NetworkCIDRs(ctx context.Context) (map[string][]netip.Prefix, error) {
	lc, err := r.client()
	if err != nil {
		return nil, err
	}
	nets, _, err := lc.ConnectListAllNetworks(1, 0)
	if err != nil {
		return nil, fmt.Errorf("list libvirt networks: %w", err)
	}
	out := map[string][]netip.Prefix{}
	for _, n := range nets {
		x, err := lc.NetworkGetXMLDesc(n, 0)
		if err != nil {
			continue // gone meanwhile
		}
		var def libvirtxml.Network
		if def.Unmarshal(x) != nil {
			continue
		}
		for _, ip := range def.IPs {
			a, err := netip.ParseAddr(ip.Address)
			if err != nil {
				continue
			}
			bits := int(ip.Prefix)
			if bits == 0 && ip.Netmask != "" {
				if m, err := netip.ParseAddr(ip.Netmask); err == nil {
					bits = maskBits(m)
				}
			}
			if p, err := a.Prefix(bits); err == nil {
				out[n.Name] = append(out[n.Name], p)
			}
		}
	}
	return out, nil
}

func maskBits(m netip.Addr) int {
	n := 0
	for _, b := range m.AsSlice() {
		for ; b&0x80 != 0; b <<= 1 {
			n++
		}
	}
	return n
}

// EnsureLinks implements Host.
func (r *RealHost) EnsureLinks(ctx context.Context, lab string, t netplumb.Topology) (bool, error) {
	p, err := r.plumber(lab).Apply(ctx, t)
	if err != nil {
		return false, err
	}
	return len(p.Steps) > 0, nil
}

// LinkDifferences implements Host.
func (r *RealHost) LinkDifferences(_ context.Context, lab string, t netplumb.Topology) ([]netplumb.Difference, error) {
	p, err := r.plumber(lab).Plan(t)
	if err != nil {
		return nil, err
	}
	return p.Differences, nil
}

// EnsurePool implements Host.
func (r *RealHost) EnsurePool(ctx context.Context, spec labvirt.PoolSpec) (bool, error) {
	lc, err := r.client()
	if err != nil {
		return false, err
	}
	return labvirt.EnsurePool(ctx, lc, spec)
}

// EnsureVolume implements Host.
func (r *RealHost) EnsureVolume(ctx context.Context, spec labvirt.VolumeSpec) (bool, error) {
	lc, err := r.client()
	if err != nil {
		return false, err
	}
	_, changed, err := labvirt.EnsureVolume(ctx, lc, spec)
	return changed, err
}

// DanglingPools implements Host.
func (r *RealHost) DanglingPools(ctx context.Context) ([]labvirt.DanglingPool, error) {
	lc, err := r.client()
	if err != nil {
		return nil, err
	}
	_, dangling, err := labvirt.MarkedPools(ctx, lc, "")
	return dangling, err
}

// DeleteDanglingPool implements Host.
func (r *RealHost) DeleteDanglingPool(ctx context.Context, name string) error {
	lc, err := r.client()
	if err != nil {
		return err
	}
	_, err = labvirt.DeleteDanglingPool(ctx, lc, name)
	return err
}

// DefineDomain implements Host.
func (r *RealHost) DefineDomain(ctx context.Context, spec labvirt.DomainSpec) error {
	lc, err := r.client()
	if err != nil {
		return err
	}
	_, err = labvirt.DefineDomain(ctx, lc, spec, virt.DetectFirmware())
	return err
}

// DomainMarks implements Host.
func (r *RealHost) DomainMarks(ctx context.Context) (map[string]map[string]string, error) {
	lc, err := r.client()
	if err != nil {
		return nil, err
	}
	return labvirt.DomainMarks(ctx, lc)
}

// Start implements Host.
func (r *RealHost) Start(ctx context.Context, name string) (bool, error) {
	lc, err := r.client()
	if err != nil {
		return false, err
	}
	return labvirt.StartDomain(ctx, lc, name)
}

// Power implements Host.
func (r *RealHost) Power(ctx context.Context, name string) (string, error) {
	lc, err := r.client()
	if err != nil {
		return "", err
	}
	return labvirt.DomainPower(ctx, lc, name)
}

// SetIPMIPort implements Host: the endpoint goes into the domain's BMC
// settings, where vbmcd reads it.
func (r *RealHost) SetIPMIPort(ctx context.Context, uuid string, port int) (bool, error) {
	svc := machine.NewService(r.be, r.log)
	m, err := svc.Await(ctx, uuid, 10*time.Second)
	if err != nil {
		return false, err
	}
	want := &machine.IPMIEndpoint{Port: port}
	if m.Settings.IPMI != nil && *m.Settings.IPMI == *want {
		return false, nil
	}
	_, err = svc.UpdateSettings(ctx, uuid, func(s *machine.Settings) error { s.IPMI = want; return nil })
	return err == nil, err
}

// Daemons implements Host: processes whose environment carries the lab's
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

// StartDaemon implements Host: vbmcd runs in its own session, in the lab's
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

// StopDaemon implements Host: SIGTERM, then SIGKILL after 5 s.
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
	lc, err := r.client()
	if err != nil {
		return HostView{}, err
	}
	var v HostView
	if v.Domains, err = labvirt.MarkedDomains(ctx, lc, lab); err != nil {
		return v, err
	}
	if v.Networks, err = labvirt.MarkedNetworks(ctx, lc, lab); err != nil {
		return v, err
	}
	v.Pool, err = labvirt.RemotePoolState(ctx, lc, pool)
	return v, err
}
