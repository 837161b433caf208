package machine

import (
	"context"
	"fmt"
	"io"
	"sync"
)

// Backend carries out what the Service decides, on real VMs (libvirt) or in
// memory (sim). Backends hold no BMC semantics: a Once override, pending BIOS
// settings and the like are the Service's business.
//
// Every method is safe for concurrent use. Reads (List, Get, Stale) are served
// from memory and cost no round trip to a hypervisor.
type Backend interface {
	// List returns a snapshot of every machine, in a stable order.
	List() []*Machine
	// Get returns one machine by ID (UUID, any case) or by name.
	Get(id string) (*Machine, error)

	// Save stores s with the machine and prepares the machine's definition so
	// that its next start boots as s says (s.Boot's effective target first,
	// s.Boot.Mode firmware, s.SecureBoot). A running machine keeps running as
	// it was started. Idempotent.
	Save(ctx context.Context, id string, s Settings) error
	// Start powers the machine on with its stored definition. Starting a
	// machine that is on is an ErrConflict.
	Start(ctx context.Context, id string) error
	// Stop powers the machine off: at once when force, else by an ACPI request
	// that the guest may ignore. Stopping a machine that is off succeeds.
	Stop(ctx context.Context, id string, force bool) error
	// Reboot asks the guest to reboot (ACPI).
	Reboot(ctx context.Context, id string) error
	// Reset restarts a running machine at once, keeping the configuration it
	// runs with (a warm reset).
	Reset(ctx context.Context, id string) error
	// NMI injects a non-maskable interrupt.
	NMI(ctx context.Context, id string) error
	// SetIndicator turns the identify light on or off (in memory).
	SetIndicator(id string, on bool) error
	// SetMedia puts the local file src into the machine's drive for slot, or
	// empties it when src is "": live on a running machine and in its
	// persistent definition. The CD drive stays when emptied (so "boot from
	// Cd" keeps a target); the removable drive is plugged in with its medium
	// and unplugged on eject. Media is always read-only to the guest.
	// Idempotent.
	SetMedia(ctx context.Context, id string, slot MediaSlot, src string) error
	// Stale reports whether a running machine runs with a boot configuration
	// (boot order, firmware) other than the one its next start would use, so
	// that only a cold restart applies the stored settings.
	Stale(id string) bool

	// Subscribe delivers events until cancel is called. Slow readers lose
	// events rather than block the backend; List and Get stay authoritative.
	Subscribe() (events <-chan Event, cancel func())
}

// EventKind says what happened to a machine.
type EventKind int

// Event kinds.
const (
	// EventChanged: anything about the machine changed (power, definition,
	// settings). The snapshot in the event is the new one.
	EventChanged EventKind = iota + 1
	// EventReboot: the guest rebooted itself (or was rebooted by ACPI) and the
	// machine kept running.
	EventReboot
	// EventRemoved: the machine is gone.
	EventRemoved
)

// Event is a change of one machine.
type Event struct {
	Kind    EventKind
	ID      string
	Machine *Machine // nil for EventRemoved
	// Prev is the snapshot Machine replaced, when the backend knew one.
	Prev *Machine
}

// Indexed is a backend that can count and name its machines without making
// their snapshots (the sim, which makes an unchanged machine's snapshot
// only when asked for it).
type Indexed interface {
	Len() int
	IDAt(i int) string // the i-th machine's ID, in List's order
}

// Count returns how many machines be serves, without their snapshots when
// be is Indexed.
func Count(be Backend) int {
	if ix, ok := be.(Indexed); ok {
		return ix.Len()
	}
	return len(be.List())
}

// PageIDs returns the IDs of at most limit of ms, from the skip-th on.
func PageIDs(ms []*Machine, skip, limit int) []string {
	ms = ms[min(skip, len(ms)):]
	ms = ms[:min(limit, len(ms))]
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	return ids
}

// ConsoleOpener is what a backend implements when its machines have a
// serial console: a stream of the console's output, which also takes input.
// The stream ends when the machine stops; a reader (IPMI SOL, the web
// console) opens it again to show the next boot. Closing the stream must
// not affect the machine.
type ConsoleOpener interface {
	OpenConsole(ctx context.Context, id string) (io.ReadWriteCloser, error)
}

// DisplayOpener is what a backend implements when its machines have a
// screen a BMC's graphical console (KVM) shows: a connection to a running
// machine's display that speaks RFB (VNC, RFC 6143) from its first byte.
// An off machine is an ErrConflict. Closing it must not affect the machine.
type DisplayOpener interface {
	OpenDisplay(ctx context.Context, id string) (io.ReadWriteCloser, error)
}

// ConsoleLogger is what a backend implements when a machine's serial
// output is also written to a file this process can read (libvirt's serial
// log on the local host): the web console's scroll-back then holds what the
// machine printed while no console was connected (the first lines of a
// boot, before the console connects after a start).
type ConsoleLogger interface {
	ConsoleLog(id string) (path string, err error)
}

// Read returns what read makes of the entry find resolves id to, holding mu
// for reading across both: the lock-and-lookup of a backend's accessors. An
// error of find (ErrNotFound) is returned as it is.
func Read[E, T any](mu *sync.RWMutex, find func(id string) (E, error), id string, read func(E) (T, error)) (T, error) {
	mu.RLock()
	defer mu.RUnlock()
	e, err := find(id)
	if err != nil {
		var zero T
		return zero, err
	}
	return read(e)
}

// Change calls change with the entry find resolves id to, holding mu for
// writing across both: the lock-and-lookup of a backend's actions. An error
// of find (ErrNotFound) is returned as it is.
func Change[E any](mu *sync.RWMutex, find func(id string) (E, error), id string, change func(E) error) error {
	mu.Lock()
	defer mu.Unlock()
	e, err := find(id)
	if err != nil {
		return err
	}
	return change(e)
}

// CheckOn is the ErrConflict of an action that needs a running machine (a
// reset, an NMI) when m is not on; nil when it is.
func (m *Machine) CheckOn() error {
	if m.Power != PowerOn {
		return fmt.Errorf("%w: %s is not on", ErrConflict, m.Name)
	}
	return nil
}

// CheckOff is the ErrConflict of a start when m is on or powering on; nil
// when it is not.
func (m *Machine) CheckOff() error {
	if m.Power == PowerOn || m.Power == PowerPoweringOn {
		return fmt.Errorf("%w: %s is already on", ErrConflict, m.Name)
	}
	return nil
}
