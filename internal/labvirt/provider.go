package labvirt

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/lab/bmcclient"
	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/plan"
	"github.com/bmlab/bmlab/internal/virt"
	"github.com/bmlab/bmlab/internal/virt/domain"
)

// Host is the libvirt provider on one host (lab.Provider): libvirt
// through a Conn, the kernel's links through netlink in the lab's
// namespace, and vbmcd as a process. It maps the steps' objects onto
// libvirt's (domainSpec, natSpec, sharedSpec below).
type Host struct {
	c   *Conn // nil: links only (labctl net --no-libvirt)
	h   *netlink.Handle
	log *zap.Logger
}

// Open connects to the plan's libvirt and opens the plan's network
// namespace.
func Open(ctx context.Context, p *plan.Plan, log *zap.Logger) (*Host, error) {
	return OpenAt(ctx, p, p.LibvirtURI, log)
}

// OpenLinks opens the plan's network namespace without libvirt: a
// provider whose libvirt objects are none (labctl net --no-libvirt).
func OpenLinks(p *plan.Plan, log *zap.Logger) (*Host, error) {
	h, err := netplumb.OpenNamespace(p.Netns)
	if err != nil {
		return nil, err
	}
	return &Host{h: h, log: log}, nil
}

// OpenAt is Open for the libvirt at uri.
func OpenAt(ctx context.Context, p *plan.Plan, uri string, log *zap.Logger) (*Host, error) {
	h, err := netplumb.OpenNamespace(p.Netns)
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	c, err := Dial(dctx, uri)
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("%w; is libvirtd running?", err)
	}
	return &Host{c: c, h: h, log: log}, nil
}

// Close ends the connection.
func (r *Host) Close() {
	if r.c != nil {
		_ = r.c.Close()
	}
	r.h.Close()
}

// errNoLibvirt is what a libvirt call answers on a links-only host.
var errNoLibvirt = errors.New("libvirt left out (--no-libvirt)")

func (r *Host) conn() (*Conn, error) {
	if r.c == nil {
		return nil, errNoLibvirt
	}
	return r.c, nil
}

func (r *Host) plumber(lab string) *netplumb.Plumber {
	return netplumb.New(r.h, lab, r.log.Named("netplumb"))
}

// Owner implements lab.Provider. On a links-only host, no libvirt object
// exists.
func (r *Host) Owner(ctx context.Context, kind lab.Kind, name string) (bool, string, error) {
	if kind == lab.KindUnmanaged || kind == lab.KindResolver {
		return fileOwner(kind, name)
	}
	if kind == lab.KindLink {
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
	case lab.KindDomain:
		return domainOwner(ctx, r.c.l, name)
	case lab.KindNetwork:
		return networkOwnerOf(ctx, r.c.l, name)
	case lab.KindPool:
		return poolOwner(ctx, r.c.l, name)
	}
	return false, "", fmt.Errorf("owner of a %s: not supported", kind)
}

// Marked implements lab.Provider.
func (r *Host) Marked(ctx context.Context, kind lab.Kind, labName string) ([]string, error) {
	switch kind {
	case lab.KindLink:
		return r.plumber(labName).Owned()
	case lab.KindRule:
		return r.plumber(labName).OwnedRules()
	case lab.KindDaemon, lab.KindLLDP, lab.KindDHCP:
		ds, err := markedOf(labName, kind)
		var pids []string
		for _, d := range ds {
			pids = append(pids, strconv.Itoa(d.pid))
		}
		return pids, err
	}
	if r.c == nil {
		return nil, nil
	}
	switch kind {
	case lab.KindDomain:
		return r.c.MarkedDomains(ctx, labName)
	case lab.KindNetwork:
		return r.c.MarkedNetworks(ctx, labName)
	case lab.KindPool:
		marked, _, err := r.c.MarkedPools(ctx, labName)
		return marked, err
	}
	return nil, fmt.Errorf("marked %ss: not supported", kind)
}

// Delete implements lab.Provider.
func (r *Host) Delete(ctx context.Context, kind lab.Kind, name, labName string) error {
	switch kind {
	case lab.KindUnmanaged, lab.KindResolver:
		return deleteFile(kind, name, labName)
	case lab.KindLink:
		res, err := r.plumber(labName).Down(ctx, netplumb.Topology{VLANs: []netplumb.VLAN{{Name: name}}})
		if err == nil && len(res.Foreign) > 0 {
			err = fmt.Errorf("link %s: %w", strings.Join(res.Foreign, ", "), lab.ErrForeign)
		}
		return err
	case lab.KindRule:
		return r.plumber(labName).DeleteRule(name)
	case lab.KindDaemon, lab.KindLLDP, lab.KindDHCP:
		pid, err := strconv.Atoi(name)
		if err != nil {
			return fmt.Errorf("%s %q: not a PID", kind, name)
		}
		ds, err := markedOf(labName, kind)
		if err != nil || !slices.ContainsFunc(ds, func(d daemon) bool { return d.pid == pid }) {
			return err // gone already, or not the lab's
		}
		return stopDaemon(pid)
	case lab.KindShared:
		if r.c == nil {
			return nil
		}
		unlock, err := lockShared(ctx, name)
		if err != nil {
			return err
		}
		defer unlock()
		_, err = removeShared(ctx, r.c.l, name, labName)
		return err
	}
	c, err := r.conn()
	if err != nil {
		return err
	}
	switch kind {
	case lab.KindDomain:
		found, owner, err := domainOwner(ctx, c.l, name)
		if err != nil || !found {
			return err
		}
		if owner != labName {
			return fmt.Errorf("domain %s bears the mark of %q: %w", name, owner, lab.ErrForeign)
		}
		return domain.Delete(ctx, c.l, name)
	case lab.KindNetwork:
		found, owner, err := networkOwnerOf(ctx, c.l, name)
		if err != nil || !found {
			return err
		}
		if owner != labName {
			return fmt.Errorf("libvirt network %s bears the mark of %q: %w", name, owner, lab.ErrForeign)
		}
		_, err = deleteNetwork(ctx, c.l, name, labName)
		return err
	case lab.KindPool:
		_, err := deletePool(ctx, c.l, name, labName)
		if errors.Is(err, ErrPoolForeign) {
			return fmt.Errorf("%w: %w", err, lab.ErrForeign)
		}
		return err
	case lab.KindDanglingPool:
		_, err := deleteDanglingPool(ctx, c.l, name)
		return err
	case lab.KindVolume:
		pool, vol, ok := strings.Cut(name, "/")
		if !ok {
			return fmt.Errorf("volume %q: want pool/volume", name)
		}
		_, err := deleteVolume(ctx, c.l, pool, vol, labName)
		return err
	}
	return fmt.Errorf("delete a %s: not supported", kind)
}

// Validate implements lab.Provider.
func (r *Host) Validate(o lab.Object) error { return Validate(o) }

// Validate says what libvirt would refuse, or report badly, in an object:
// the lab's own network as it would be given (LabNetworkSpec.Validate).
// It needs no connection.
func Validate(o lab.Object) error {
	switch o := o.(type) {
	case lab.NATNetwork:
		return natSpec(o).Validate()
	case lab.Machine:
		// The domain as it would be defined: an architecture's firmware
		// (AAVMF for aarch64) must be on this host.
		_, err := domainSpec(o).XML(virt.DetectFirmware())
		return err
	}
	return nil
}

// Ensure implements lab.Provider.
func (r *Host) Ensure(ctx context.Context, o lab.Object) ([]string, error) {
	if wrote, ok, err := ensureFile(o); ok {
		return wrote, err
	}
	if o, ok := o.(lab.Links); ok {
		p, err := r.plumber(o.Lab).Apply(ctx, o.Topology)
		if err != nil {
			return nil, err
		}
		var steps []string
		for _, s := range p.Steps {
			steps = append(steps, s.String())
		}
		return steps, nil
	}
	if o, ok := o.(lab.LinkAddress); ok {
		return nil, netplumb.WaitAddress(ctx, r.h, o.Link, o.Addr, addressWait)
	}
	if o, ok := o.(lab.BMCDaemon); ok {
		return ensureDaemon(ctx, o)
	}
	if o, ok := o.(lab.LLDPSender); ok {
		return ensureSender(o)
	}
	if o, ok := o.(lab.DHCPServer); ok {
		return ensureDHCP(o)
	}
	c, err := r.conn()
	if err != nil {
		return nil, err
	}
	switch o := o.(type) {
	case lab.Pool:
		ok, err := ensurePool(ctx, c.l, PoolSpec{Name: o.Name, Dir: o.Dir, Lab: o.Lab})
		return lab.Changed(ok, err, "storage pool "+o.Name)
	case lab.Volume:
		_, ok, err := ensureVolume(ctx, c.l, VolumeSpec{Pool: o.Pool, Name: o.Disk.Volume, CapacityBytes: o.Capacity,
			Format: "qcow2", Lab: o.Lab, Backing: o.Disk.Backing})
		return lab.Changed(ok, err, "volume "+o.Pool+"/"+o.Disk.Volume)
	case lab.Machine:
		_, err := c.DefineDomain(ctx, domainSpec(o))
		return lab.Changed(err == nil, err, "domain "+o.Node.Name)
	case lab.MachineBMC:
		ok, err := setNodeBMC(c.l, o)
		return lab.Changed(ok, err, "the BMC settings of "+o.Node)
	case lab.NATNetwork:
		ok, err := ensureLabNetwork(ctx, c.l, natSpec(o))
		return lab.Changed(ok, err, "libvirt network "+o.NAT.Name)
	case lab.BridgeNetwork:
		ok, err := ensureNetwork(ctx, c.l, bridgeSpec(o))
		return lab.Changed(ok, err, "libvirt network "+o.Name)
	case lab.SharedEntries:
		unlock, err := lockShared(ctx, o.Shared.Network)
		if err != nil {
			return nil, err
		}
		defer unlock()
		return ensureShared(ctx, c.l, sharedSpec(o))
	}
	return nil, fmt.Errorf("ensure a %T: not supported", o)
}

// Differences implements lab.Provider.
func (r *Host) Differences(ctx context.Context, o lab.Object) ([]lab.Difference, error) {
	if out, ok, err := fileDifferences(o); ok {
		return out, err
	}
	if o, ok := o.(lab.Links); ok {
		p, err := r.plumber(o.Lab).Plan(o.Topology)
		if err != nil {
			return nil, err
		}
		var out []lab.Difference
		for _, d := range p.Differences {
			out = append(out, lab.Difference{Object: d.Link, Kind: string(d.Kind), Want: d.Want, Got: d.Got, Blocking: d.Blocking, Fix: d.Fix})
		}
		return out, nil
	}
	if o, ok := o.(lab.LLDPSender); ok {
		return senderDifferences(o)
	}
	if o, ok := o.(lab.DHCPServer); ok {
		return dhcpDifferences(o)
	}
	c, err := r.conn()
	if err != nil {
		return nil, err
	}
	var problems []string
	switch o := o.(type) {
	case lab.NATNetwork:
		problems, err = labNetworkDrift(ctx, c.l, natSpec(o))
	case lab.BridgeNetwork:
		var st NetworkState
		if st, err = getNetworkState(ctx, c.l, o.Name); err == nil {
			problems = NetworkProblems(bridgeSpec(o), st)
		}
	case lab.SharedEntries:
		problems, err = sharedProblems(ctx, c.l, sharedSpec(o))
	case lab.Machine:
		problems, err = domain.NICProblems(c.l, domainSpec(o))
	default:
		return nil, fmt.Errorf("differences of a %T: not supported", o)
	}
	var out []lab.Difference
	for _, pr := range problems {
		out = append(out, lab.Difference{Got: pr})
	}
	return out, err
}

// Power implements lab.Provider.
func (r *Host) Power(ctx context.Context, name string) (string, error) {
	c, err := r.conn()
	if err != nil {
		return "", err
	}
	return c.DomainPower(ctx, name)
}

// Start implements lab.Provider.
func (r *Host) Start(ctx context.Context, name string) (bool, error) {
	c, err := r.conn()
	if err != nil {
		return false, err
	}
	return c.StartDomain(ctx, name)
}

// Survey implements lab.Provider; a links-only host has nothing.
func (r *Host) Survey(ctx context.Context, kinds ...lab.Kind) (*lab.Survey, error) {
	s := &lab.Survey{}
	if r.c == nil {
		return s, nil
	}
	want := func(k lab.Kind) bool { return len(kinds) == 0 || slices.Contains(kinds, k) }
	var err error
	if want(lab.KindNetwork) {
		if s.Addresses, err = networkCIDRs(ctx, r.c.l); err != nil {
			return nil, err
		}
		if s.Networks, err = sharedNetworks(ctx, r.c.l); err != nil {
			return nil, err
		}
	}
	if want(lab.KindDomain) {
		if s.Marks, err = domainMarks(ctx, r.c.l); err != nil {
			return nil, err
		}
	}
	if want(lab.KindPool) {
		_, dangling, err := r.c.MarkedPools(ctx, "")
		if err != nil {
			return nil, err
		}
		for _, d := range dangling {
			s.Dangling = append(s.Dangling, lab.DanglingPool{Name: d.Name, Dir: d.Dir})
		}
	}
	return s, nil
}

// view is what libvirt shows of the lab on this host, without reading any
// file (the pool's directory may be another machine's).
func (r *Host) view(ctx context.Context, labName, pool string) (lab.HostView, error) {
	c, err := r.conn()
	if err != nil {
		return lab.HostView{}, err
	}
	var v lab.HostView
	if v.Domains, err = c.MarkedDomains(ctx, labName); err != nil {
		return v, err
	}
	if v.Networks, err = c.MarkedNetworks(ctx, labName); err != nil {
		return v, err
	}
	rp, err := remotePoolState(ctx, c.l, pool)
	v.Pool = lab.PoolView(rp)
	return v, err
}

// addressWait bounds the wait for a usable address: duplicate address
// detection takes a second or two once the link has a carrier.
const addressWait = 30 * time.Second

// domainSpec is a node's domain as libvirt defines it.
func domainSpec(m lab.Machine) domain.Spec {
	n := m.Node
	spec := domain.Spec{
		Name: n.Name, UUID: n.UUID, MemoryMiB: n.MemoryMiB, VCPUs: n.VCPUs, UEFI: true, Arch: n.Arch,
		SerialLog: n.SerialLog,
		BootOrder: []string{"hd", "network"},
		Metadata:  MarkXML(m.Lab, m.Attrs...),
		Ignition:  n.Ignition,
	}
	if m.CDROM != "" {
		spec.Ignition, spec.CDROM = "", m.CDROM
		spec.BootOrder = []string{"hd", "cdrom"}
	}
	for _, d := range n.Disks {
		spec.Disks = append(spec.Disks, domain.Disk{Path: d.Path})
	}
	// The NICs in the plan's order: the first is the one os/boot's
	// "network" boots from (libvirt gives it the bootindex), the
	// provisioning NIC where the lab has one.
	for _, nic := range n.NICs {
		spec.NICs = append(spec.NICs, domain.NIC{Network: nic.Network, Bridge: nic.Bridge, MAC: nic.MAC})
	}
	if len(spec.NICs) == 0 {
		spec.NICs = []domain.NIC{{Network: m.Network, MAC: n.MAC}}
	}
	if n.BMC.Inband {
		// The lab's vbmcd serves the socket the definition names, in its
		// own default directory: UUIDs keep labs apart there.
		spec.KCSSocket = virt.KCSSocketPath(virt.DefaultKCSDir, n.UUID)
	}
	return spec
}

// natSpec is the lab's NAT network as libvirt builds it.
func natSpec(o lab.NATNetwork) LabNetworkSpec {
	nat := o.NAT
	spec := LabNetworkSpec{
		Name: nat.Name, Bridge: nat.Bridge, Lab: o.Lab, Family: nat.Family, Secondary: nat.Secondary,
		MTU: uint(nat.MTU), Domain: nat.Domain, NodeHoldsVIPs: o.NodeHoldsVIPs,
	}
	for _, n := range o.Nodes {
		spec.Hosts = append(spec.Hosts, LabHost{MAC: n.MAC, IP: n.IP, SecondaryIP: n.SecondaryIP, Hostname: n.Name})
	}
	return spec
}

// bridgeSpec is the libvirt network named like a lab bridge.
func bridgeSpec(o lab.BridgeNetwork) NetworkSpec {
	return NetworkSpec{Name: o.Name, Bridge: o.Name, Lab: o.Lab}
}

// sharedSpec is the lab's part of the network it shares, as libvirt
// takes it.
func sharedSpec(o lab.SharedEntries) SharedSpec {
	sh := o.Shared
	spec := SharedSpec{Network: sh.Network, Bridge: sh.Bridge, CIDR: sh.CIDR, Entries: SharedEntries{
		Lab: o.Lab, Block: sh.Block(),
	}}
	for _, r := range sh.Reservations {
		spec.Entries.Hosts = append(spec.Entries.Hosts, SharedHost{MAC: strings.ToLower(r.MAC), IP: r.IP.String(), Name: r.Name})
	}
	for _, r := range sh.Records {
		spec.Entries.Records = append(spec.Entries.Records, SharedRecord{IP: r.IP.String(), Names: r.Names})
	}
	return spec
}

// labEntries are a lab's entries in a shared network in the steps' terms;
// an address that does not parse stays invalid (it matches no lab's).
func labEntries(e SharedEntries) lab.Entries {
	return lab.Entries{Lab: e.Lab, Block: e.Block, Hosts: reservations(e.Hosts), Records: records(e.Records)}
}

func reservations(hs []SharedHost) []plan.Reservation { return mapped(hs, reservation) }

func records(rs []SharedRecord) []plan.Record { return mapped(rs, record) }

// mapped is f of each of xs (nil for none).
func mapped[T, U any](xs []T, f func(T) U) []U {
	var out []U
	for _, x := range xs {
		out = append(out, f(x))
	}
	return out
}

func reservation(h SharedHost) plan.Reservation {
	ip, _ := netip.ParseAddr(h.IP)
	return plan.Reservation{MAC: h.MAC, IP: ip, Name: h.Name}
}

func record(r SharedRecord) plan.Record {
	ip, _ := netip.ParseAddr(r.IP)
	return plan.Record{IP: ip, Names: r.Names}
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

var _ lab.Provider = (*Host)(nil)

// bmcWait is what the BMC daemon's check waits when the object says
// nothing.
const bmcWait = 30 * time.Second

// ensureDaemon keeps the lab's vbmcd running with the arguments the plan's
// facts make (vbmcdProcess)
// (restarting one that runs with others, or whose settings files changed),
// then waits until every node's BMC answers.
func ensureDaemon(ctx context.Context, o lab.BMCDaemon) ([]string, error) {
	p := o.Plan
	running, err := daemons(p.Lab)
	if err != nil {
		return nil, err
	}
	var done []string
	ok := false
	want := vbmcdProcess(p.Vbmcd)
	for _, d := range running {
		if slices.Equal(d.args, want.Args) && !o.Restart {
			ok = true
			continue
		}
		done = append(done, fmt.Sprintf("restarting vbmcd (pid %d): its settings changed", d.pid))
		if err := stopDaemon(d.pid); err != nil {
			return done, err
		}
	}
	if !ok {
		pid, err := startDaemon(want, p.Netns)
		if err != nil {
			return done, err
		}
		done = append(done, fmt.Sprintf("started vbmcd (pid %d)", pid))
	}
	wait := o.Wait
	if wait == 0 {
		wait = bmcWait
	}
	return done, bmcclient.WaitAnswer(ctx, p, wait, o.Progress)
}

// ensureSender keeps the lab's LLDP sender running with the plan's
// arguments, restarting one that runs with others.
func ensureSender(o lab.LLDPSender) ([]string, error) {
	want := senderProcess(o.Sender)
	if want.Path == "" {
		if running, err := senders(o.Lab); err != nil || !slices.ContainsFunc(running, func(d daemon) bool { return slices.Equal(d.args, want.Args) }) {
			// Checked before anything is stopped.
			return nil, errors.Join(err, errors.New("LLDP sender: vbmcd not found next to labctl or on PATH: run `make build` (it puts both in bin/), pass --vbmcd, or set network.lldp: false"))
		}
	}
	return ensureProcess(o.Lab, lab.KindLLDP, want, o.Netns, false)
}

// ensureProcess keeps one process of the lab's of a kind running as want
// invokes it: one with other arguments (or any, with restart) is stopped,
// and when none is left one is started, and waited for until it reads
// as its kind (`ip netns exec` execs it in place), or it died.
func ensureProcess(labName string, kind lab.Kind, want process, netns string, restart bool) ([]string, error) {
	running, err := markedOf(labName, kind)
	if err != nil {
		return nil, err
	}
	var done []string
	kept := false
	for _, d := range running {
		if slices.Equal(d.args, want.Args) && !kept && !restart {
			kept = true
			continue
		}
		done = append(done, fmt.Sprintf("restarting the %s (pid %d): its arguments or settings changed", kind, d.pid))
		if err := stopDaemon(d.pid); err != nil {
			return done, err
		}
	}
	if kept {
		return done, nil
	}
	pid, err := startDaemon(want, netns)
	if err != nil {
		return done, err
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		running, err := markedOf(labName, kind)
		if err != nil {
			return done, err
		}
		if slices.ContainsFunc(running, func(d daemon) bool { return d.pid == pid }) {
			break
		}
		if !alive(pid) || time.Now().After(deadline) {
			return done, fmt.Errorf("%s (pid %d) did not start; its log: %s", kind, pid, want.Log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	prog := filepath.Base(want.Path)
	if len(want.Args) > 0 && !strings.HasPrefix(want.Args[0], "-") {
		prog += " " + want.Args[0] // vbmcd lldp
	}
	return append(done, fmt.Sprintf("%s: started %s (pid %d)", kind, prog, pid)), nil
}

// ensureDHCP writes the provisioning DHCP server's configuration and keeps
// it running with it: a configuration that changed restarts it (dnsmasq
// reads it at start).
func ensureDHCP(o lab.DHCPServer) ([]string, error) {
	s := o.Server
	have, err := os.ReadFile(s.ConfigFile)
	changed := err != nil || string(have) != s.Config
	if changed {
		if err := os.MkdirAll(filepath.Dir(s.ConfigFile), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(s.ConfigFile, []byte(s.Config), 0o644); err != nil {
			return nil, fmt.Errorf("%s: %w", lab.KindDHCP, err)
		}
	}
	done, err := ensureProcess(o.Lab, lab.KindDHCP, dhcpProcess(s), o.Netns, changed)
	if changed {
		done = append([]string{"wrote " + s.ConfigFile}, done...)
	}
	return done, err
}

// dhcpDifferences says when the provisioning DHCP server does not run as
// the plan invokes it, or its configuration file is not the plan's.
func dhcpDifferences(o lab.DHCPServer) ([]lab.Difference, error) {
	out, err := processDifferences(o.Lab, lab.KindDHCP, dhcpProcess(o.Server))
	if have, rerr := os.ReadFile(o.Server.ConfigFile); rerr != nil || string(have) != o.Server.Config {
		out = append(out, lab.Difference{Got: "its configuration " + o.Server.ConfigFile + " is not the plan's"})
	}
	return out, err
}

// senderDifferences says when the lab's LLDP sender does not run, or runs
// with other arguments.
func senderDifferences(o lab.LLDPSender) ([]lab.Difference, error) {
	return processDifferences(o.Lab, lab.KindLLDP, senderProcess(o.Sender))
}

// processDifferences says when no process of the lab's of a kind runs as
// want invokes it.
func processDifferences(labName string, kind lab.Kind, want process) ([]lab.Difference, error) {
	running, err := markedOf(labName, kind)
	if err != nil {
		return nil, err
	}
	var pids []string
	for _, d := range running {
		if slices.Equal(d.args, want.Args) {
			return nil, nil
		}
		pids = append(pids, strconv.Itoa(d.pid))
	}
	got := "not running (log: " + want.Log + ")"
	if len(pids) > 0 {
		got = "running with other arguments: pid " + strings.Join(pids, ", ")
	}
	return []lab.Difference{{Got: got}}, nil
}
