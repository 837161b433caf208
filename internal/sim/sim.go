package sim

import (
	"context"
	"crypto/sha1"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bmlab/bmlab/internal/machine"
)

// Backend is the simulated backend.
type Backend struct {
	delay time.Duration
	keys  machine.KeyStore // the factory secure boot keys of every machine

	mu     sync.RWMutex
	byID   map[string]*node
	byName map[string]*node
	order  []string

	gen  atomic.Uint64
	subs machine.Broadcaster
}

type node struct {
	m       *machine.Machine // current snapshot, replaced on change
	running bootConfig       // what the machine was started with
	timer   *time.Timer      // a pending power transition
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

// New returns a backend with n machines named sim-0001, sim-0002, ...
// Their UUIDs are derived from their names, so they are stable across runs.
func New(n int, opts ...Option) *Backend {
	b := &Backend{byID: map[string]*node{}, byName: map[string]*node{}}
	for _, o := range opts {
		o(b)
	}
	// Every machine starts from the same settings: one BIOS map for all
	// (each change gives a machine its own copy, see Save and the snapshot
	// in update), which keeps 100,000 machines' heap small for the GC.
	defaults := machine.DefaultSettings(machine.BootModeUEFI, false)
	for i := 1; i <= n; i++ {
		b.add(fmt.Sprintf("sim-%04d", i), i, defaults)
	}
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

func (b *Backend) add(name string, i int, settings machine.Settings) {
	id := UUIDFor(name)
	m := &machine.Machine{
		ID:   id,
		Name: name,
		Inventory: machine.Inventory{
			VCPUs: 4, Sockets: 1, Cores: 2, Threads: 2,
			MemoryBytes: 8 << 30,
			Arch:        "x86_64",
			MachineType: "q35",
			NICs: []machine.NIC{
				{MAC: fmt.Sprintf("52:54:00:%02x:%02x:%02x", (i>>16)&0xff, (i>>8)&0xff, i&0xff), Network: "baremetal", Model: "virtio", PCI: "0000:01:00.0"},
			},
			PCI: simPCI,
			Disks: []machine.Disk{
				{ID: "vda", Device: machine.DeviceDisk, Bus: "virtio", Source: "/sim/" + name + ".qcow2", Capacity: 120 << 30},
				{ID: "sda", Device: machine.DeviceCDROM, Bus: "sata", ReadOnly: true},
			},
		},
		Power:      machine.PowerOff,
		Mode:       machine.BootModeUEFI,
		Settings:   settings,
		Generation: b.gen.Add(1),
	}
	n := &node{m: m}
	b.byID[id] = n
	b.byName[name] = n
	b.order = append(b.order, id)
}

// List implements machine.Backend.
func (b *Backend) List() []*machine.Machine {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([]*machine.Machine, 0, len(b.order))
	for _, id := range b.order {
		out = append(out, b.byID[id].m)
	}
	return out
}

func (b *Backend) find(id string) (*node, error) {
	if n, ok := b.byID[strings.ToLower(id)]; ok {
		return n, nil
	}
	if n, ok := b.byName[id]; ok {
		return n, nil
	}
	return nil, fmt.Errorf("%w: %q", machine.ErrNotFound, id)
}

// findOn finds a machine that is on; an operation that needs a running
// machine gets ErrConflict otherwise. Callers hold b.mu.
func (b *Backend) findOn(id string) (*node, error) {
	n, err := b.find(id)
	if err != nil {
		return nil, err
	}
	if n.m.Power != machine.PowerOn {
		return nil, fmt.Errorf("%w: %s is not on", machine.ErrConflict, n.m.Name)
	}
	return n, nil
}

// Get implements machine.Backend.
func (b *Backend) Get(id string) (*machine.Machine, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	n, err := b.find(id)
	if err != nil {
		return nil, err
	}
	return n.m, nil
}

// update replaces a node's snapshot with a changed copy and announces it.
// Callers hold b.mu.
func (b *Backend) update(n *node, fn func(m *machine.Machine)) {
	c := *n.m
	c.Settings = n.m.Settings.Clone()
	fn(&c)
	c.Generation = b.gen.Add(1)
	n.m = &c
	b.subs.Send(machine.Event{Kind: machine.EventChanged, ID: c.ID, Machine: &c})
}

// Save implements machine.Backend.
func (b *Backend) Save(_ context.Context, id string, s machine.Settings) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.find(id)
	if err != nil {
		return err
	}
	b.update(n, func(m *machine.Machine) {
		m.Settings = s.Clone()
		if m.Power == machine.PowerOff {
			m.Mode, m.SecureBootActive = s.Boot.Mode, s.SecureBoot
		}
	})
	return nil
}

// transition moves n to state mid now and to final after the delay.
// Callers hold b.mu.
func (b *Backend) transition(n *node, mid, final machine.PowerState, then func(*machine.Machine)) {
	if n.timer != nil {
		n.timer.Stop()
		n.timer = nil
	}
	if b.delay <= 0 {
		b.update(n, func(m *machine.Machine) { m.Power = final; then(m) })
		return
	}
	b.update(n, func(m *machine.Machine) { m.Power = mid })
	n.timer = time.AfterFunc(b.delay, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		n.timer = nil
		b.update(n, func(m *machine.Machine) { m.Power = final; then(m) })
	})
}

// Start implements machine.Backend.
func (b *Backend) Start(_ context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.find(id)
	if err != nil {
		return err
	}
	if n.m.Power == machine.PowerOn || n.m.Power == machine.PowerPoweringOn {
		return fmt.Errorf("%w: %s is already on", machine.ErrConflict, n.m.Name)
	}
	n.running = configOf(n.m.Settings)
	mode, secure := n.m.Settings.Boot.Mode, n.m.Settings.SecureBoot
	b.transition(n, machine.PowerPoweringOn, machine.PowerOn, func(m *machine.Machine) {
		m.Mode, m.SecureBootActive = mode, secure
	})
	return nil
}

// Stop implements machine.Backend.
func (b *Backend) Stop(_ context.Context, id string, force bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.find(id)
	if err != nil {
		return err
	}
	if n.m.Power == machine.PowerOff {
		return nil
	}
	if force {
		if n.timer != nil {
			n.timer.Stop()
			n.timer = nil
		}
		b.update(n, func(m *machine.Machine) { m.Power = machine.PowerOff })
		return nil
	}
	b.transition(n, machine.PowerPoweringOff, machine.PowerOff, func(*machine.Machine) {})
	return nil
}

// Reboot implements machine.Backend: the guest reboots after the delay.
func (b *Backend) Reboot(_ context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.findOn(id)
	if err != nil {
		return err
	}
	mid := n.m.ID
	time.AfterFunc(b.delay, func() { b.subs.Send(machine.Event{Kind: machine.EventReboot, ID: mid}) })
	return nil
}

// Reset implements machine.Backend.
func (b *Backend) Reset(_ context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.findOn(id)
	if err != nil {
		return err
	}
	b.update(n, func(*machine.Machine) {})
	return nil
}

// NMI implements machine.Backend.
func (b *Backend) NMI(_ context.Context, id string) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	_, err := b.findOn(id)
	return err
}

// SetIndicator implements machine.Backend.
func (b *Backend) SetIndicator(id string, on bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.find(id)
	if err != nil {
		return err
	}
	if n.m.IndicatorLED != on {
		b.update(n, func(m *machine.Machine) { m.IndicatorLED = on })
	}
	return nil
}

// Stale implements machine.Backend.
func (b *Backend) Stale(id string) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	n, err := b.find(id)
	if err != nil || n.m.Power == machine.PowerOff {
		return false
	}
	return n.running != configOf(n.m.Settings)
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
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.find(id)
	if err != nil {
		return err
	}
	disks := slices.Clone(n.m.Disks)
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
			disks = append(disks, machine.Disk{ID: "sdy", Device: machine.DeviceDisk, Bus: "usb", Source: src, ReadOnly: true})
		default:
			return nil
		}
	default:
		return fmt.Errorf("%w: no virtual media %q", machine.ErrNotFound, slot)
	}
	b.update(n, func(m *machine.Machine) { m.Disks = disks })
	return nil
}
