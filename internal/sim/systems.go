package sim

import (
	"fmt"
	"maps"
	"strings"

	"github.com/bmlab/bmlab/internal/machine"
)

// System describes one simulated machine, as a systems file gives it
// (package simfile reads vbmcd's own form and sushy-tools' fake driver's).
// Zero fields take the defaults of New's machines.
type System struct {
	Name string
	UUID string // any case; kept lower case
	// Power is the state the machine starts in: machine.PowerOn or
	// machine.PowerOff (the default).
	Power       machine.PowerState
	VCPUs       int
	MemoryBytes int64
	NICs        []NIC
	Disks       []Disk
	BootMode    machine.BootMode // UEFI (the default) or Legacy
	SecureBoot  bool
	// BootDevice, when set, is a Continuous boot override from the start,
	// as the fake driver's boot_device is kept until changed.
	BootDevice machine.BootSource
	BIOS       map[string]any // attributes other than BootMode and SecureBoot
	Firmware   map[machine.FirmwareComponent]string
	// Notify: the machine's changes are announced as sushy-tools' fake
	// driver announces them for a system with external_notifier
	// (WithNotify).
	Notify bool
	// Media says how the machine takes virtual media; "" is the backend's
	// (WithMedia).
	Media MediaMode
	// Fake is the file's entry as sushy-tools' fake driver keeps it (every
	// key, those vbmcd does not know included), for the announcements;
	// nil for vbmcd's own form, whose announcements carry the fields the
	// fake driver's have.
	Fake map[string]any
}

// NIC is a simulated network interface.
type NIC struct {
	MAC     string
	IP      string // the address the fake driver announces ("" none)
	Network string // "" is baremetal
}

// Disk is a simulated disk.
type Disk struct {
	ID       string // the target device name: vda, sdb
	Capacity int64
	Bus      string // virtio (the default), sata, scsi
	SSD      bool
}

// MediaMode says how a simulated machine takes virtual media.
type MediaMode string

// Media modes.
const (
	// MediaFetch downloads an inserted image into the cache, as a real BMC
	// (and sushy-tools) copies it.
	MediaFetch MediaMode = "fetch"
	// MediaProbe reads an image's first bytes only: it must be reachable
	// and of the right kind (an ISO for the CD), and is then inserted
	// without the rest of the download, so that hundreds of machines can
	// take their own deploy ISOs.
	MediaProbe MediaMode = "probe"
)

// WithMedia sets how machines without a mode of their own take virtual
// media (default MediaFetch).
func WithMedia(m MediaMode) Option { return func(b *Backend) { b.media = m } }

// spec is a described machine and what is derived from it once.
type spec struct {
	System
	settings  machine.Settings // its settings at the start
	pci       []machine.PCIDevice
	cd        string // the CD drive's ID
	removable string // the USB stick's ID, when plugged in
}

// NewSystems returns a backend with the machines systems describe, in that
// order. Names and UUIDs must be unique and every UUID well formed; a
// systems file's reader checks the rest (package simfile).
func NewSystems(systems []System, opts ...Option) (*Backend, error) {
	n := len(systems)
	b := &Backend{n: n, changed: map[int32]*node{}, byName: make(map[string]int32, n), byUUID: make(map[[16]byte]int32, n)}
	for _, o := range opts {
		o(b)
	}
	b.specs = make([]spec, n)
	var ids, names strings.Builder
	b.nameAt = make([]int32, n+1)
	for k, s := range systems {
		id := strings.ToLower(s.UUID)
		u, ok := parseUUID(id)
		if !ok {
			return nil, fmt.Errorf("system %d (%s): %q is not a UUID", k+1, s.Name, s.UUID)
		}
		if j, dup := b.byUUID[u]; dup {
			return nil, fmt.Errorf("systems %d and %d have the same UUID %s", j+1, k+1, id)
		}
		if j, dup := b.byName[s.Name]; dup || s.Name == "" {
			return nil, fmt.Errorf("system %d: name %q is empty or that of system %d", k+1, s.Name, j+1)
		}
		s.UUID = id
		b.byUUID[u], b.byName[s.Name] = int32(k), int32(k)
		ids.WriteString(id)
		names.WriteString(s.Name)
		b.nameAt[k+1] = int32(names.Len())
		b.specs[k] = describe(s)
	}
	b.ids, b.names = ids.String(), names.String()
	b.gen.Store(uint64(n))
	return b, nil
}

// describe fills a system's defaults and derives its settings, PCI
// devices and drive names.
func describe(s System) spec {
	if s.Power == "" {
		s.Power = machine.PowerOff
	}
	if s.VCPUs == 0 {
		s.VCPUs = 4
	}
	if s.MemoryBytes == 0 {
		s.MemoryBytes = 8 << 30
	}
	if s.BootMode == "" {
		s.BootMode = machine.BootModeUEFI
	}
	if len(s.Disks) == 0 {
		s.Disks = []Disk{{ID: "vda", Capacity: 120 << 30}}
	}
	st := machine.DefaultSettings(s.BootMode, s.SecureBoot)
	maps.Copy(st.BIOS, s.BIOS)
	if len(s.Firmware) > 0 {
		st.Firmware = maps.Clone(s.Firmware)
	}
	if s.BootDevice != "" && s.BootDevice != machine.BootNone {
		st.Boot.Target, st.Boot.Enabled = s.BootDevice, machine.BootContinuous
	}
	sp := spec{System: s, settings: st}
	used := map[string]bool{}
	for _, d := range s.Disks {
		used[d.ID] = true
	}
	free := func(skip string) string {
		for c := 'a'; c <= 'z'; c++ {
			if id := "sd" + string(c); !used[id] && id != skip {
				return id
			}
		}
		return "sr0"
	}
	sp.cd = free("")
	sp.removable = free(sp.cd)
	// As libvirt lays out a q35 VM: the SATA controller on the root bus,
	// then each NIC and each virtio disk behind a root port of its own.
	sp.pci = []machine.PCIDevice{simPCI[0]}
	slot := 1
	for range s.NICs {
		d := simPCI[1]
		d.Address = fmt.Sprintf("0000:%02x:00.0", slot)
		sp.pci = append(sp.pci, d)
		slot++
	}
	for _, d := range s.Disks {
		if d.Bus == "" || d.Bus == "virtio" {
			p := simPCI[2]
			p.Address = fmt.Sprintf("0000:%02x:00.0", slot)
			sp.pci = append(sp.pci, p)
			slot++
		}
	}
	return sp
}

// described makes machine k's first snapshot from its description.
func (b *Backend) described(k int) *machine.Machine {
	s := &b.specs[k]
	nics := make([]machine.NIC, len(s.NICs))
	for i, n := range s.NICs {
		network := n.Network
		if network == "" {
			network = "baremetal"
		}
		nics[i] = machine.NIC{MAC: n.MAC, Network: network, Model: "virtio", PCI: s.pci[1+i].Address}
	}
	disks := make([]machine.Disk, 0, len(s.Disks)+1)
	for _, d := range s.Disks {
		bus := d.Bus
		if bus == "" {
			bus = "virtio"
		}
		var rate uint
		if d.SSD {
			rate = 1
		}
		disks = append(disks, machine.Disk{ID: d.ID, Device: machine.DeviceDisk, Bus: bus, Capacity: d.Capacity,
			Source: "/sim/" + s.Name + "-" + d.ID + ".qcow2", RotationRate: rate})
	}
	disks = append(disks, machine.Disk{ID: s.cd, Device: machine.DeviceCDROM, Bus: "sata", ReadOnly: true})
	threads := 2
	if s.VCPUs%2 != 0 {
		threads = 1
	}
	return &machine.Machine{
		ID:   b.ids[36*k : 36*(k+1)],
		Name: b.names[b.nameAt[k]:b.nameAt[k+1]],
		Inventory: machine.Inventory{
			VCPUs: s.VCPUs, Sockets: 1, Cores: s.VCPUs / threads, Threads: threads,
			MemoryBytes: s.MemoryBytes,
			Arch:        "x86_64",
			MachineType: "q35",
			NICs:        nics,
			PCI:         s.pci,
			Disks:       disks,
			IPMISocket:  b.socketOf(k),
		},
		Power:            s.Power,
		Mode:             s.settings.Boot.Mode,
		SecureBootActive: s.settings.SecureBoot,
		Settings:         s.settings,
		Generation:       uint64(k + 1),
	}
}

// Probes reports whether machine id takes virtual media by MediaProbe.
func (b *Backend) Probes(id string) bool {
	mode := b.media
	if b.specs != nil {
		k, err := b.find(id) // the indexes never change: no lock
		if err != nil {
			return false
		}
		if m := b.specs[k].Media; m != "" {
			mode = m
		}
	}
	return mode == MediaProbe
}
