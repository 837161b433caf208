package sim

import (
	"context"
	"crypto/sha1"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bmlab/bmlab/internal/machine"
)

// Backend is the simulated backend.
//
// A machine that was never changed has no state of its own: its snapshot
// is made from its index when asked for (all are alike but for their
// names, UUIDs, MACs and disk paths, which are slices of one string each).
// Only machines that changed keep a snapshot. So 100,000 machines cost the
// garbage collector nothing to walk, which at that size was most of the
// daemon's tail latency under load: every cycle walked each machine's
// snapshot, about 100 MB of pointers.
type Backend struct {
	delay time.Duration
	keys  machine.KeyStore // the factory secure boot keys of every machine

	n                      int
	ids, names, macs, srcs string  // machine k's is the k-th slice of each
	nameAt, srcAt          []int32 // where machine k's name and disk path end
	// byUUID finds a machine's index by its UUID. Neither its keys nor its
	// values hold pointers, so the garbage collector never walks it.
	byUUID   map[[16]byte]int32
	defaults machine.Settings // every machine's at the start, shared

	mu      sync.RWMutex
	changed map[int32]*node // the machines that left their first state
	// view holds every unchanged machine's snapshot, made in a few large
	// allocations by List and kept viewKeep after its last use, so that
	// paging through a collection does not make 100,000 snapshots a page.
	view     []*machine.Machine
	viewUsed atomic.Int64 // when List last used view (UnixNano)
	// recent keeps the snapshots made lately for single machines, by
	// index modulo its size, so that GETs of the same machines do not make
	// them again each time: a few thousand pointers, nothing for the GC.
	recent [recentSize]atomic.Pointer[machine.Machine]

	gen  atomic.Uint64
	subs machine.Broadcaster

	// specs are the machines a systems file described (NewSystems), in
	// its order; nil for machines made by New, which are all alike.
	specs  []spec
	byName map[string]int32 // with specs: a machine's index by its name
	// notify is told what sushy-tools' fake driver would announce for the
	// machines whose System says Notify (announce.go).
	notify func(name string, body []byte)
	media  MediaMode // how machines without a mode of their own take media
	// kcsDir holds every machine's in-band IPMI socket, <uuid>.sock
	// ("": none), where a synthetic client plays qemu.
	kcsDir string
}

// viewKeep is how long List's snapshots outlive their last use.
const viewKeep = 30 * time.Second

// recentSize is how many single machines' first snapshots are kept.
const recentSize = 4096

type node struct {
	k       int32            // the machine's index
	m       *machine.Machine // current snapshot, replaced on change
	running bootConfig       // what the machine was started with
	timer   *time.Timer      // a pending power transition
	fake    fakeState        // what the fake driver's announcements say (announce.go)
	typed   []string         // what was typed on its screen since it started (screen.go)
}

// bootConfig is what a start fixes until the next start.
type bootConfig struct {
	target machine.BootSource
	mode   machine.BootMode
	secure bool
	keys   string // the deleted key databases, when secure
}

func configOf(s machine.Settings) bootConfig {
	c := bootConfig{target: s.Boot.Effective(), mode: s.Boot.Mode, secure: s.SecureBoot}
	if s.SecureBoot {
		c.keys = fmt.Sprint(s.DeletedKeys)
	}
	return c
}

// Option configures the backend.
type Option func(*Backend)

// WithDelay sets how long power transitions take (default 0: instantaneous).
func WithDelay(d time.Duration) Option { return func(b *Backend) { b.delay = d } }

// WithFactoryKeys gives every machine's firmware these secure boot keys
// (default: none, so every database is empty).
func WithFactoryKeys(ks machine.KeyStore) Option { return func(b *Backend) { b.keys = ks } }

// WithIPMISockets gives every machine an in-band IPMI socket in dir,
// <uuid>.sock (machine.Inventory.IPMISocket), where vbmcd's in-band face
// listens and a synthetic client (ipmi/client.KCS) can play the machine's
// qemu.
func WithIPMISockets(dir string) Option { return func(b *Backend) { b.kcsDir = dir } }

// socketOf is machine k's in-band IPMI socket; "" without WithIPMISockets.
func (b *Backend) socketOf(k int) string {
	if b.kcsDir == "" {
		return ""
	}
	return b.kcsDir + "/" + b.ids[36*k:36*(k+1)] + ".sock"
}

// New returns a backend with n machines named sim-0001, sim-0002, ...
// Their UUIDs are derived from their names, so they are stable across runs.
func New(n int, opts ...Option) *Backend {
	b := &Backend{n: n, changed: map[int32]*node{}}
	for _, o := range opts {
		o(b)
	}
	b.defaults = machine.DefaultSettings(machine.BootModeUEFI, false)
	var ids, names, macs, srcs strings.Builder
	b.nameAt, b.srcAt = make([]int32, n+1), make([]int32, n+1)
	b.byUUID = make(map[[16]byte]int32, n)
	for k := range n {
		name := fmt.Sprintf("sim-%04d", k+1)
		id := UUIDFor(name)
		ids.WriteString(id)
		names.WriteString(name)
		fmt.Fprintf(&macs, "52:54:00:%02x:%02x:%02x", ((k+1)>>16)&0xff, ((k+1)>>8)&0xff, (k+1)&0xff)
		srcs.WriteString("/sim/" + name + ".qcow2")
		b.nameAt[k+1], b.srcAt[k+1] = int32(names.Len()), int32(srcs.Len())
		u, _ := parseUUID(id)
		b.byUUID[u] = int32(k)
	}
	b.ids, b.names, b.macs, b.srcs = ids.String(), names.String(), macs.String(), srcs.String()
	// Machine k's first snapshot has Generation k+1; changes count on.
	b.gen.Store(uint64(n))
	return b
}

// simPCI is what libvirt and QEMU give a q35 VM with the sim's devices;
// shared, never changed.
var simPCI = []machine.PCIDevice{
	{Address: "0000:00:1f.2", Class: "MassStorageController", VendorID: 0x8086, DeviceID: 0x2922, Vendor: "Intel Corporation", Name: "82801IR/IO/IH (ICH9R/DO/DH) 6 port SATA Controller [AHCI mode]"},
	{Address: "0000:01:00.0", Class: "NetworkController", VendorID: 0x1af4, DeviceID: 0x1041, Vendor: "Red Hat, Inc.", Name: "Virtio network device"},
	{Address: "0000:04:00.0", Class: "MassStorageController", VendorID: 0x1af4, DeviceID: 0x1042, Vendor: "Red Hat, Inc.", Name: "Virtio block device"},
}

// UUIDFor returns the UUID a machine of the given name gets.
func UUIDFor(name string) string {
	h := sha1.Sum([]byte("bmlab-sim/" + name))
	h[6] = (h[6] & 0x0f) | 0x50 // version 5
	h[8] = (h[8] & 0x3f) | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// fill writes machine k's first snapshot into m, with its NIC and disks
// in nics (one) and disks (two).
func (b *Backend) fill(k int, m *machine.Machine, nics []machine.NIC, disks []machine.Disk) {
	name := b.names[b.nameAt[k]:b.nameAt[k+1]]
	nics[0] = machine.NIC{MAC: b.macs[17*k : 17*(k+1)], Network: "baremetal", Model: "virtio", PCI: "0000:01:00.0"}
	disks[0] = machine.Disk{ID: "vda", Device: machine.DeviceDisk, Bus: "virtio", Source: b.srcs[b.srcAt[k]:b.srcAt[k+1]], Capacity: 120 << 30}
	disks[1] = machine.Disk{ID: "sda", Device: machine.DeviceCDROM, Bus: "sata", ReadOnly: true}
	*m = machine.Machine{
		ID:   b.ids[36*k : 36*(k+1)],
		Name: name,
		Inventory: machine.Inventory{
			VCPUs: 4, Sockets: 1, Cores: 2, Threads: 2,
			MemoryBytes: 8 << 30,
			Arch:        "x86_64",
			MachineType: "q35",
			// Capacity-limited: an append copies rather than writing
			// into the next machine's.
			NICs:       nics[:1:1],
			PCI:        simPCI,
			Disks:      disks[:2:2],
			IPMISocket: b.socketOf(k),
		},
		Power:      machine.PowerOff,
		Mode:       machine.BootModeUEFI,
		Settings:   b.defaults,
		Generation: uint64(k + 1),
	}
}

// first makes machine k's first snapshot in one allocation (a described
// machine's in a few).
func (b *Backend) first(k int) *machine.Machine {
	if b.specs != nil {
		return b.described(k)
	}
	f := new(struct {
		m     machine.Machine
		nics  [1]machine.NIC
		disks [2]machine.Disk
	})
	b.fill(k, &f.m, f.nics[:], f.disks[:])
	return &f.m
}

// snapshot returns machine k's current snapshot. Callers hold b.mu.
func (b *Backend) snapshot(k int32) *machine.Machine {
	if n := b.changed[k]; n != nil {
		return n.m
	}
	if b.view != nil {
		return b.view[k]
	}
	slot := &b.recent[int(k)%recentSize]
	if m := slot.Load(); m != nil && m.Generation == uint64(k)+1 { // machine k's first
		return m
	}
	m := b.first(int(k))
	slot.Store(m)
	return m
}

// node returns machine k's state, giving it one if it has none yet.
// Callers hold b.mu for writing.
func (b *Backend) node(k int32) *node {
	n := b.changed[k]
	if n == nil {
		n = &node{k: k, m: b.snapshot(k)}
		b.changed[k] = n
	}
	return n
}

// parseUUID reads a UUID in its 36-character form, any case.
func parseUUID(s string) (u [16]byte, ok bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, false
	}
	// Every Redfish request of a machine names it: a table, not a
	// switch per digit (about 40 ns a lookup against 100 on this
	// project's 2-core machine: BenchmarkParseUUID).
	var bad byte
	for j, i := range uuidDigits {
		hi, lo := hexVal[s[i]], hexVal[s[i+1]]
		bad |= hi | lo
		u[j] = hi<<4 | lo&0xf
	}
	return u, bad&0x80 == 0
}

// uuidDigits are where each byte's two hex digits start in a UUID's
// 8-4-4-4-12 form.
var uuidDigits = [16]int{0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34}

// hexVal is a hex digit's value, 0x80 for any other byte.
var hexVal = func() (t [256]byte) {
	for c := range t {
		switch {
		case '0' <= c && c <= '9':
			t[c] = byte(c - '0')
		case 'a' <= c && c <= 'f':
			t[c] = byte(c - 'a' + 10)
		case 'A' <= c && c <= 'F':
			t[c] = byte(c - 'A' + 10)
		default:
			t[c] = 0x80
		}
	}
	return t
}()

// List implements machine.Backend.
func (b *Backend) List() []*machine.Machine {
	b.viewUsed.Store(time.Now().UnixNano())
	b.mu.RLock()
	for b.view == nil {
		b.mu.RUnlock()
		b.makeView()
		b.mu.RLock()
	}
	out := slices.Clone(b.view)
	for k, n := range b.changed {
		out[k] = n.m
	}
	b.mu.RUnlock()
	return out
}

// makeView makes every machine's first snapshot, in three allocations,
// and drops them once List has not used them for viewKeep.
func (b *Backend) makeView() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.view != nil {
		return
	}
	view := make([]*machine.Machine, b.n)
	if b.specs != nil {
		for k := range b.n {
			view[k] = b.described(k)
		}
	} else {
		ms := make([]machine.Machine, b.n)
		nics := make([]machine.NIC, b.n)
		disks := make([]machine.Disk, 2*b.n)
		for k := range b.n {
			b.fill(k, &ms[k], nics[k:k+1], disks[2*k:2*k+2])
			view[k] = &ms[k]
		}
	}
	b.view = view
	var drop func()
	drop = func() {
		if idle := time.Since(time.Unix(0, b.viewUsed.Load())); idle < viewKeep {
			time.AfterFunc(viewKeep-idle, drop)
			return
		}
		b.mu.Lock()
		b.view = nil
		b.mu.Unlock()
	}
	time.AfterFunc(viewKeep, drop)
}

// The Systems collection and the machine count go through Indexed, not
// through a snapshot of every machine.
var _ machine.Indexed = (*Backend)(nil)

// Len is the number of machines.
func (b *Backend) Len() int { return b.n }

// IDAt is the UUID of the i-th machine in List's order.
func (b *Backend) IDAt(i int) string { return b.ids[36*i : 36*(i+1)] }

// find returns the index of a machine named by UUID (any case) or name.
func (b *Backend) find(id string) (int32, error) {
	if u, ok := parseUUID(id); ok {
		if k, ok := b.byUUID[u]; ok {
			return k, nil
		}
	} else if b.specs != nil {
		if k, ok := b.byName[id]; ok {
			return k, nil
		}
	} else if num, ok := strings.CutPrefix(id, "sim-"); ok {
		if k, err := strconv.Atoi(num); err == nil && k >= 1 && k <= b.n && b.names[b.nameAt[k-1]:b.nameAt[k]] == id {
			return int32(k - 1), nil
		}
	}
	return 0, fmt.Errorf("%w: %q", machine.ErrNotFound, id)
}

// findOn finds a machine that is on; an operation that needs a running
// machine gets ErrConflict otherwise. Callers hold b.mu.
func (b *Backend) findOn(id string) (int32, *machine.Machine, error) {
	k, err := b.find(id)
	if err != nil {
		return 0, nil, err
	}
	m := b.snapshot(k)
	if err := m.CheckOn(); err != nil {
		return 0, nil, err
	}
	return k, m, nil
}

// mutableOn finds a machine that is on to change. Callers hold b.mu for
// writing.
func (b *Backend) mutableOn(id string) (*node, error) {
	k, _, err := b.findOn(id)
	if err != nil {
		return nil, err
	}
	return b.node(k), nil
}

// mutable finds a machine to change. Callers hold b.mu for writing.
func (b *Backend) mutable(id string) (*node, error) {
	k, err := b.find(id)
	if err != nil {
		return nil, err
	}
	return b.node(k), nil
}

// Get implements machine.Backend.
func (b *Backend) Get(id string) (*machine.Machine, error) {
	return machine.Read(&b.mu, b.find, id, func(k int32) (*machine.Machine, error) { return b.snapshot(k), nil })
}

// update replaces a node's snapshot with a changed copy and announces it.
// Callers hold b.mu.
func (b *Backend) update(n *node, fn func(m *machine.Machine)) {
	c := *n.m
	c.Settings = n.m.Settings.Clone()
	fn(&c)
	c.Generation = b.gen.Add(1)
	prev := n.m
	n.m = &c
	b.announce(n)
	b.subs.Send(machine.Event{Kind: machine.EventChanged, ID: c.ID, Machine: &c, Prev: prev})
}

// Save implements machine.Backend.
func (b *Backend) Save(_ context.Context, id string, s machine.Settings) error {
	return machine.Change(&b.mu, b.mutable, id, func(n *node) error {
		b.update(n, func(m *machine.Machine) {
			m.Settings = s.Clone()
			if m.Power == machine.PowerOff {
				m.Mode, m.SecureBootActive = s.Boot.Mode, s.SecureBoot
			}
		})
		return nil
	})
}

// transition moves n to state mid now and to final after the delay.
// Callers hold b.mu.
// The fake driver's announcements say the power state to come
// (pending_power) first, then the state reached.
func (b *Backend) transition(n *node, mid, final machine.PowerState, then func(*machine.Machine)) {
	if n.timer != nil {
		n.timer.Stop()
		n.timer = nil
	}
	if b.delay <= 0 {
		b.pending(n, string(final), 0)
		n.fake.pending = nil
		b.update(n, func(m *machine.Machine) { m.Power = final; then(m) })
		return
	}
	n.fake.pending = b.pendingPower(string(final), b.delay)
	b.update(n, func(m *machine.Machine) { m.Power = mid })
	n.timer = time.AfterFunc(b.delay, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		n.timer = nil
		n.fake.pending = nil
		b.update(n, func(m *machine.Machine) { m.Power = final; then(m) })
	})
}

// Start implements machine.Backend.
func (b *Backend) Start(_ context.Context, id string) error {
	return machine.Change(&b.mu, b.mutable, id, func(n *node) error {
		if err := n.m.CheckOff(); err != nil {
			return err
		}
		n.running = configOf(n.m.Settings)
		n.typed = nil // a new boot's screen
		mode, secure := n.m.Settings.Boot.Mode, n.m.Settings.SecureBoot
		b.transition(n, machine.PowerPoweringOn, machine.PowerOn, func(m *machine.Machine) {
			m.Mode, m.SecureBootActive = mode, secure
		})
		return nil
	})
}

// Stop implements machine.Backend.
func (b *Backend) Stop(_ context.Context, id string, force bool) error {
	return machine.Change(&b.mu, b.find, id, func(k int32) error {
		if b.snapshot(k).Power == machine.PowerOff {
			return nil
		}
		n := b.node(k)
		if force {
			if n.timer != nil {
				n.timer.Stop()
				n.timer = nil
			}
			b.pending(n, string(machine.PowerOff), 0)
			n.fake.pending = nil
			b.update(n, func(m *machine.Machine) { m.Power = machine.PowerOff })
			return nil
		}
		b.transition(n, machine.PowerPoweringOff, machine.PowerOff, func(*machine.Machine) {})
		return nil
	})
}

// Reboot implements machine.Backend: the guest reboots after the delay.
func (b *Backend) Reboot(_ context.Context, id string) error {
	return machine.Change(&b.mu, b.mutableOn, id, func(n *node) error {
		mid := n.m.ID
		b.pending(n, string(machine.ResetGracefulRestart), b.delay)
		time.AfterFunc(b.delay, func() {
			b.mu.Lock()
			if n.fake.pending != nil {
				n.fake.pending = nil
				b.announce(n)
			}
			b.mu.Unlock()
			b.subs.Send(machine.Event{Kind: machine.EventReboot, ID: mid})
		})
		return nil
	})
}

// Reset implements machine.Backend.
func (b *Backend) Reset(_ context.Context, id string) error {
	return machine.Change(&b.mu, b.mutableOn, id, func(n *node) error {
		b.pending(n, string(machine.ResetForceRestart), 0)
		n.fake.pending = nil
		b.update(n, func(*machine.Machine) {})
		return nil
	})
}

// NMI implements machine.Backend.
func (b *Backend) NMI(_ context.Context, id string) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	_, _, err := b.findOn(id)
	return err
}

// SetIndicator implements machine.Backend.
func (b *Backend) SetIndicator(id string, on bool) error {
	return machine.Change(&b.mu, b.find, id, func(k int32) error {
		if b.snapshot(k).IndicatorLED != on {
			b.update(b.node(k), func(m *machine.Machine) { m.IndicatorLED = on })
		}
		return nil
	})
}

// Stale implements machine.Backend.
func (b *Backend) Stale(id string) bool {
	s, _ := machine.Read(&b.mu, b.find, id, func(k int32) (bool, error) {
		n := b.changed[k] // a machine never changed was never started
		return n != nil && n.m.Power != machine.PowerOff && n.running != configOf(n.m.Settings), nil
	})
	return s
}

// FactoryKeys implements machine.KeyStorer.
func (b *Backend) FactoryKeys(id string) (machine.KeyStore, error) {
	if _, err := b.Get(id); err != nil {
		return nil, err
	}
	return b.keys, nil
}

// Subscribe implements machine.Backend.
func (b *Backend) Subscribe() (<-chan machine.Event, func()) { return b.subs.Subscribe() }

// SetMedia implements machine.Backend: the CD drive's source changes; the
// removable medium is a USB disk that appears and disappears with it.
func (b *Backend) SetMedia(_ context.Context, id string, slot machine.MediaSlot, src string) error {
	return machine.Change(&b.mu, b.mutable, id, func(n *node) error {
		disks := slices.Clone(n.m.Disks)
		removable := "sdy"
		if b.specs != nil {
			removable = b.specs[n.k].removable
		}
		switch slot {
		case machine.SlotCD:
			i := slices.IndexFunc(disks, func(d machine.Disk) bool { return d.Device == machine.DeviceCDROM })
			if i < 0 {
				return fmt.Errorf("%w: %s has no CD-ROM drive", machine.ErrUnsupported, n.m.Name)
			}
			if disks[i].Source == src {
				return nil
			}
			disks[i].Source = src
		case machine.SlotRemovable:
			i := slices.IndexFunc(disks, func(d machine.Disk) bool { return d.Bus == "usb" })
			switch {
			case i >= 0 && src == "":
				disks = slices.Delete(disks, i, i+1)
			case i >= 0:
				if disks[i].Source == src {
					return nil
				}
				disks[i].Source = src
			case src != "":
				disks = append(disks, machine.Disk{ID: removable, Device: machine.DeviceDisk, Bus: "usb", Source: src, ReadOnly: true})
			default:
				return nil
			}
		default:
			return fmt.Errorf("%w: no virtual media %q", machine.ErrNotFound, slot)
		}
		n.fake.media = true
		b.update(n, func(m *machine.Machine) { m.Disks = disks })
		return nil
	})
}
