package virt

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/machine"
)

// Host is one libvirt daemon of a Hosts set.
type Host struct {
	Name string // shown as the machines' Host; unique in the set
	URI  string
	// Domains are shell patterns of this host's domains to serve; empty
	// serves every domain.
	Domains []string
}

// Hosts is a machine.Backend over several libvirt daemons: one Backend (one
// connection, keepalive, reconnect loop and event stream) per host, with
// machines addressed by domain UUID across all of them. A UUID (or name)
// found on two hosts is served by neither: it is left out of List, and Get
// and every operation answer ErrConflict naming both hosts, so a client
// never drives the wrong copy. A host that cannot be reached makes only its
// own machines ErrUnavailable.
type Hosts struct {
	hosts []*Backend
	log   *zap.Logger
	subs  machine.Broadcaster

	mu     sync.Mutex
	dupLog map[string]bool // clashes already logged
}

// NewHosts returns a backend over hosts; common supplies the settings they
// share (Keepalive, Firmware, Resync). Run or Connect starts them.
func NewHosts(hosts []Host, common Config, log *zap.Logger) (*Hosts, error) {
	if len(hosts) == 0 {
		return nil, fmt.Errorf("no libvirt host given")
	}
	if log == nil {
		log = zap.NewNop()
	}
	h := &Hosts{log: log, dupLog: map[string]bool{}}
	seen := map[string]string{}
	gen := new(atomic.Uint64) // one generation sequence: snapshots stay unique if a domain moves
	for _, hc := range hosts {
		if hc.Name == "" && len(hosts) > 1 {
			return nil, fmt.Errorf("libvirt host %s has no name", hc.URI)
		}
		if u, dup := seen[hc.Name]; dup {
			return nil, fmt.Errorf("libvirt host name %q is given twice (%s and %s)", hc.Name, u, hc.URI)
		}
		seen[hc.Name] = hc.URI
		cfg := common
		cfg.Name, cfg.URI, cfg.Domains = hc.Name, hc.URI, hc.Domains
		b, err := New(cfg, log)
		if err != nil {
			return nil, fmt.Errorf("libvirt host %s: %w", hc.Name, err)
		}
		b.gen = gen
		h.hosts = append(h.hosts, b)
	}
	return h, nil
}

// Backends returns one backend per host, in the order given.
func (h *Hosts) Backends() []*Backend { return h.hosts }

// Run keeps every host connected and forwards their events until ctx ends.
func (h *Hosts) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, b := range h.hosts {
		events, cancel := b.Subscribe()
		wg.Add(2)
		go func() { defer wg.Done(); b.Run(ctx) }()
		go func() {
			defer wg.Done()
			defer cancel()
			machine.ForEach(ctx, events, h.subs.Send)
		}()
	}
	wg.Wait()
}

// Connect starts every host and waits up to wait for their first sync. It
// fails only when no host answers: the others join when they come up.
func (h *Hosts) Connect(ctx context.Context, wait time.Duration) error {
	go h.Run(ctx)
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var down []string
	for _, b := range h.hosts {
		if err := b.WaitSynced(wctx); err != nil {
			down = append(down, strings.TrimSpace(b.cfg.Name+" "+b.cfg.URI))
		}
	}
	if len(down) == len(h.hosts) {
		return fmt.Errorf("no libvirt host answered within %s: %s (is libvirtd running and listening there? hack/start-libvirtd.sh starts a local one)", wait, strings.Join(down, ", "))
	}
	if len(down) > 0 {
		h.log.Warn("libvirt hosts not reachable yet; their machines are served once they are", zap.Strings("hosts", down))
	}
	return nil
}

// owner returns the one backend that holds id, ErrNotFound when none does,
// ErrConflict when several do.
func (h *Hosts) owner(id string) (*Backend, error) {
	var found []*Backend
	for _, b := range h.hosts {
		if b.Has(id) {
			found = append(found, b)
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("%w: no domain %q on any libvirt host", machine.ErrNotFound, id)
	case 1:
		return found[0], nil
	}
	names := make([]string, len(found))
	for i, b := range found {
		names[i] = b.cfg.Name
	}
	h.logClash(id, names)
	return nil, fmt.Errorf("%w: domain %q exists on libvirt hosts %s; it is served by none of them until only one has it", machine.ErrConflict, id, strings.Join(names, " and "))
}

func (h *Hosts) logClash(id string, hosts []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dupLog[id] {
		return
	}
	h.dupLog[id] = true
	h.log.Error("a domain exists on several libvirt hosts; serving it from none", zap.String("domain", id), zap.Strings("hosts", hosts))
}

// List implements machine.Backend: every host's machines by name, without
// the UUIDs and names that more than one host has.
func (h *Hosts) List() []*machine.Machine {
	var all []*machine.Machine
	ids := map[string][]string{}
	names := map[string]int{}
	for _, b := range h.hosts {
		for _, m := range b.List() {
			all = append(all, m)
			ids[m.ID] = append(ids[m.ID], m.Host)
			names[m.Name]++
		}
	}
	out := all[:0]
	for _, m := range all {
		if len(ids[m.ID]) > 1 {
			h.logClash(m.ID, ids[m.ID])
			continue
		}
		if names[m.Name] > 1 {
			continue // reachable by UUID; by name Get answers ErrConflict
		}
		out = append(out, m)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Get implements machine.Backend.
func (h *Hosts) Get(id string) (*machine.Machine, error) {
	b, err := h.owner(id)
	if err != nil {
		return nil, err
	}
	return b.Get(id)
}

// Stale implements machine.Backend.
func (h *Hosts) Stale(id string) bool {
	b, err := h.owner(id)
	return err == nil && b.Stale(id)
}

// SetIndicator implements machine.Backend.
func (h *Hosts) SetIndicator(id string, on bool) error {
	b, err := h.availableOwner(id)
	if err != nil {
		return err
	}
	return b.SetIndicator(id, on)
}

// Subscribe implements machine.Backend: the events of every host.
func (h *Hosts) Subscribe() (<-chan machine.Event, func()) { return h.subs.Subscribe() }

// availableOwner is the backend of the host that has machine id, when
// that host answers (else the machine is unavailable).
func (h *Hosts) availableOwner(id string) (*Backend, error) {
	b, err := h.owner(id)
	if err != nil {
		return nil, err
	}
	if !b.Available() {
		return nil, b.unavailable(id)
	}
	return b, nil
}

// onOwner calls do with the backend of the host that has machine id.
func (h *Hosts) onOwner(id string, do func(*Backend) error) error {
	b, err := h.owner(id)
	if err != nil {
		return err
	}
	return do(b)
}

// Save implements machine.Backend.
func (h *Hosts) Save(ctx context.Context, id string, s machine.Settings) error {
	return h.onOwner(id, func(b *Backend) error { return b.Save(ctx, id, s) })
}

// Start implements machine.Backend.
func (h *Hosts) Start(ctx context.Context, id string) error {
	return h.onOwner(id, func(b *Backend) error { return b.Start(ctx, id) })
}

// Stop implements machine.Backend.
func (h *Hosts) Stop(ctx context.Context, id string, force bool) error {
	return h.onOwner(id, func(b *Backend) error { return b.Stop(ctx, id, force) })
}

// Reboot implements machine.Backend.
func (h *Hosts) Reboot(ctx context.Context, id string) error {
	return h.onOwner(id, func(b *Backend) error { return b.Reboot(ctx, id) })
}

// Reset implements machine.Backend.
func (h *Hosts) Reset(ctx context.Context, id string) error {
	return h.onOwner(id, func(b *Backend) error { return b.Reset(ctx, id) })
}

// NMI implements machine.Backend.
func (h *Hosts) NMI(ctx context.Context, id string) error {
	return h.onOwner(id, func(b *Backend) error { return b.NMI(ctx, id) })
}

// SetMedia implements machine.Backend. The image path must exist on the
// machine's host: vbmcd's media cache is local to vbmcd.
func (h *Hosts) SetMedia(ctx context.Context, id string, slot machine.MediaSlot, src string) error {
	return h.onOwner(id, func(b *Backend) error { return b.SetMedia(ctx, id, slot, src) })
}

// FactoryKeys implements machine.KeyStorer for a machine on its host.
func (h *Hosts) FactoryKeys(id string) (machine.KeyStore, error) {
	b, err := h.owner(id)
	if err != nil {
		return nil, err
	}
	return b.FactoryKeys(id)
}

// OpenConsole opens the serial console of a machine on its host.
func (h *Hosts) OpenConsole(ctx context.Context, id string) (io.ReadWriteCloser, error) {
	b, err := h.availableOwner(id)
	if err != nil {
		return nil, err
	}
	return b.OpenConsole(ctx, id)
}

// OpenDisplay opens the VNC display of a machine on its host (see
// Backend.OpenDisplay).
func (h *Hosts) OpenDisplay(ctx context.Context, id string) (io.ReadWriteCloser, error) {
	b, err := h.availableOwner(id)
	if err != nil {
		return nil, err
	}
	return b.OpenDisplay(ctx, id)
}

// ConsoleLog returns the serial log file of a machine on a host that is
// this one (see Backend.ConsoleLog).
func (h *Hosts) ConsoleLog(id string) (string, error) {
	b, err := h.owner(id)
	if err != nil {
		return "", err
	}
	return b.ConsoleLog(id)
}
