package virt

import (
	"context"
	"errors"
	"fmt"
	"path"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/digitalocean/go-libvirt"
	"go.uber.org/zap"
	"libvirt.org/go/libvirtxml"

	"github.com/bmlab/bmlab/internal/machine"
)

// Config configures the libvirt backend.
type Config struct {
	// Name names the host in the machines' Host field and in logs; "" for
	// a backend that is the only one.
	Name      string
	URI       string        // default qemu:///system
	Keepalive time.Duration // default 5 s
	// Domains are shell patterns (path.Match) of domain names to serve;
	// empty serves every domain.
	Domains []string
	// Firmware defaults to DetectFirmware().
	Firmware *Firmware
	// Resync is how often the whole view is re-read as a safety net behind
	// events; default 60 s.
	Resync time.Duration
	// VarsDir is where variable store templates with some secure boot key
	// databases deleted are written (libvirtd must read them); default
	// DefaultVarsDir.
	VarsDir string
	// KCSDir is where the in-band IPMI sockets of the domains the backend
	// wires go (kcs.go): a domain without an IPMI device gets a KCS wired
	// to <KCSDir>/<uuid>.sock at its next start. "": none is added (the
	// sockets domains already name are still reported).
	KCSDir string
}

// Backend is a machine.Backend over libvirt domains.
type Backend struct {
	cfg     Config
	fw      Firmware
	factory factoryStore // the secure-boot template's keys
	log     *zap.Logger
	conn    *Conn

	mu     sync.RWMutex
	doms   map[string]*entry // by UUID
	byName map[string]string
	order  []string // UUIDs sorted by name

	gen *atomic.Uint64 // shared by the backends of a Hosts set
	// reads numbers the domain reads refresh starts: a read that started
	// before the one already stored is older and is dropped.
	reads  atomic.Uint64
	subs   machine.Broadcaster
	synced chan struct{} // closed after the first full sync
	once   sync.Once
	// ready is the connection count (Conn.Connects) whose first full sync
	// is done: the view is served only while it equals the current count
	// and the connection is up, never from before a disconnect.
	ready atomic.Int64
}

type entry struct {
	m      *machine.Machine
	dom    libvirt.Domain
	live   string // boot signature of the running definition; "" when off
	next   string // boot signature of the persistent definition
	meta   *bmcMeta
	led    bool
	xmlDef string // persistent XML, the base for the next Save
	read   uint64 // which refresh read this entry (Backend.reads)
	// serialLog is the log file of the domain's first serial port
	// (<log file=...>), "" when it has none.
	serialLog string
	// display is the unix socket of the running domain's VNC display
	// (display.go), "" when off or when it has none.
	display string
}

// New returns a backend; Run connects it and keeps its view current.
func New(cfg Config, log *zap.Logger) (*Backend, error) {
	if cfg.URI == "" {
		cfg.URI = "qemu:///system"
	}
	if cfg.Resync <= 0 {
		cfg.Resync = 60 * time.Second
	}
	for _, p := range cfg.Domains {
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("domain pattern %q: %w", p, err)
		}
	}
	if log == nil {
		log = zap.NewNop()
	}
	if cfg.Name != "" {
		log = log.With(zap.String("host", cfg.Name))
	}
	conn, err := NewConn(cfg.URI, cfg.Keepalive, log)
	if err != nil {
		return nil, err
	}
	fw := DetectFirmware()
	if cfg.Firmware != nil {
		fw = *cfg.Firmware
	}
	return &Backend{
		cfg: cfg, fw: fw, log: log, conn: conn,
		doms: map[string]*entry{}, byName: map[string]string{},
		synced: make(chan struct{}), gen: new(atomic.Uint64),
	}, nil
}

// Conn returns the backend's libvirt connection.
func (b *Backend) Conn() *Conn { return b.conn }

// Run connects to libvirt and keeps the view current until ctx ends.
func (b *Backend) Run(ctx context.Context) {
	b.conn.Run(ctx, b.onConnect)
}

// WaitSynced blocks until the first full read of the domains is done.
func (b *Backend) WaitSynced(ctx context.Context) error {
	select {
	case <-b.synced:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the first libvirt sync: %w", ctx.Err())
	}
}

// Connect connects and waits for the first sync; the backend then keeps
// itself current in the background until ctx ends.
func (b *Backend) Connect(ctx context.Context, wait time.Duration) error {
	go b.Run(ctx)
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if err := b.WaitSynced(wctx); err != nil {
		return fmt.Errorf("libvirt at %s: %w (is libvirtd running? hack/start-libvirtd.sh starts it)", b.cfg.URI, err)
	}
	return nil
}

var refreshEvents = []libvirt.DomainEventID{
	libvirt.DomainEventIDLifecycle,
	libvirt.DomainEventIDReboot,
	libvirt.DomainEventIDMetadataChange,
	libvirt.DomainEventIDDeviceAdded,
	libvirt.DomainEventIDDeviceRemoved,
	libvirt.DomainEventIDTrayChange,
	libvirt.DomainEventIDDiskChange,
}

func (b *Backend) onConnect(ctx context.Context, l *libvirt.Libvirt) {
	type ev struct {
		id  libvirt.DomainEventID
		dom libvirt.Domain
		evt int32
	}
	merged := make(chan ev, 1024)
	for _, id := range refreshEvents {
		ch, err := l.SubscribeEvents(ctx, id, libvirt.OptDomain{})
		if err != nil {
			b.log.Error("subscribing to libvirt events failed; relying on periodic resync", zap.Int32("event", int32(id)), zap.Error(err))
			continue
		}
		go func(id libvirt.DomainEventID) {
			for e := range ch {
				x := ev{id: id, evt: -1}
				switch m := e.(type) {
				case *libvirt.DomainEventCallbackLifecycleMsg:
					x.dom, x.evt = m.Msg.Dom, m.Msg.Event
				case *libvirt.DomainEventCallbackRebootMsg:
					x.dom = m.Msg.Dom
				case *libvirt.DomainEventCallbackMetadataChangeMsg:
					x.dom = m.Dom
				case *libvirt.DomainEventCallbackDeviceAddedMsg:
					x.dom = m.Dom
				case *libvirt.DomainEventCallbackDeviceRemovedMsg:
					x.dom = m.Msg.Dom
				case *libvirt.DomainEventCallbackTrayChangeMsg:
					x.dom = m.Msg.Dom
				case *libvirt.DomainEventCallbackDiskChangeMsg:
					x.dom = m.Msg.Dom
				default:
					continue
				}
				select {
				case merged <- x:
				case <-ctx.Done():
					return
				}
			}
		}(id)
	}
	connects := b.conn.Connects()
	b.syncAll(l)
	b.ready.Store(int64(connects))
	b.once.Do(func() { close(b.synced) })
	t := time.NewTicker(b.cfg.Resync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			b.syncAll(l)
		case e := <-merged:
			if e.id == libvirt.DomainEventIDLifecycle && e.evt == int32(libvirt.DomainEventUndefined) {
				b.remove(uuidString(e.dom.UUID), "undefined (libvirt event)")
				continue
			}
			b.refresh(l, e.dom)
			if e.id == libvirt.DomainEventIDReboot {
				b.subs.Send(machine.Event{Kind: machine.EventReboot, ID: uuidString(e.dom.UUID)})
			}
		}
	}
}

func uuidString(u libvirt.UUID) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

func (b *Backend) wanted(name string) bool {
	if len(b.cfg.Domains) == 0 {
		return true
	}
	for _, p := range b.cfg.Domains {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// syncAll re-reads every domain and drops the ones that are gone.
func (b *Backend) syncAll(l *libvirt.Libvirt) {
	doms, _, err := l.ConnectListAllDomains(1, 0)
	if err != nil {
		b.log.Warn("listing libvirt domains failed", zap.Error(err))
		return
	}
	seen := map[string]bool{}
	for _, d := range doms {
		if !b.wanted(d.Name) {
			continue
		}
		seen[uuidString(d.UUID)] = true
		b.refresh(l, d)
	}
	for _, id := range machine.Gone(b.mu.RLocker(), b.doms, seen) {
		b.remove(id, "absent from libvirt's domain list")
	}
}

func (b *Backend) remove(id, why string) {
	b.mu.Lock()
	e, ok := b.doms[id]
	if ok {
		b.log.Info("domain left the view", zap.String("domain", e.m.Name), zap.String("uuid", id), zap.String("why", why))
		delete(b.doms, id)
		delete(b.byName, e.m.Name)
		b.reorder()
	}
	b.mu.Unlock()
	if ok {
		b.subs.Send(machine.Event{Kind: machine.EventRemoved, ID: id})
	}
}

// reorder rebuilds the name order; callers hold b.mu.
func (b *Backend) reorder() {
	b.order = b.order[:0]
	for id := range b.doms {
		b.order = append(b.order, id)
	}
	sort.Slice(b.order, func(i, j int) bool { return b.doms[b.order[i]].m.Name < b.doms[b.order[j]].m.Name })
}

// refresh re-reads one domain: state, persistent and live definitions.
func (b *Backend) refresh(l *libvirt.Libvirt, d libvirt.Domain) {
	if !b.wanted(d.Name) {
		return
	}
	id := uuidString(d.UUID)
	// Reads run concurrently (after an operation, and for each event); an
	// event's read can see a change half made (a CD swap's open tray) and
	// finish after a later read of the whole change. The newer read wins.
	seq := b.reads.Add(1)
	e, err := b.read(l, d)
	if err != nil {
		if IsCode(err, libvirt.ErrNoDomain) {
			b.remove(id, "libvirt says no such domain: "+err.Error())
			return
		}
		b.log.Warn("reading domain failed", zap.String("domain", d.Name), zap.Error(err))
		return
	}
	b.mu.Lock()
	old, existed := b.doms[id]
	if existed && old.read > seq {
		b.mu.Unlock()
		return
	}
	e.read = seq
	if existed {
		e.led = old.led
		e.m.IndicatorLED = old.led
		if sameMachine(old.m, e.m) {
			e.m = old.m // nothing changed: keep the generation (and faces' caches)
		}
	}
	changed := !existed || e.m != old.m
	var prev *machine.Machine
	if changed {
		e.m.Generation = b.gen.Add(1)
		if existed {
			prev = old.m
		}
	}
	b.doms[id] = e
	if !existed || old.m.Name != e.m.Name {
		if existed {
			delete(b.byName, old.m.Name)
		}
		b.byName[e.m.Name] = id
		b.reorder()
	}
	b.mu.Unlock()
	if prev != nil && prev.Power != e.m.Power {
		b.log.Debug("domain's power changed", zap.String("domain", e.m.Name), zap.String("was", string(prev.Power)),
			zap.String("now", string(e.m.Power)), zap.Uint64("read", seq))
	}
	if changed {
		b.subs.Send(machine.Event{Kind: machine.EventChanged, ID: id, Machine: e.m, Prev: prev})
	}
}

// sameMachine compares snapshots by value, ignoring the generation.
func sameMachine(a, b *machine.Machine) bool {
	x, y := *a, *b
	x.Generation, y.Generation = 0, 0
	return reflect.DeepEqual(x, y)
}

func (b *Backend) read(l *libvirt.Libvirt, d libvirt.Domain) (*entry, error) {
	state, _, err := l.DomainGetState(d, 0)
	if err != nil {
		return nil, err
	}
	inactive, err := l.DomainGetXMLDesc(d, libvirt.DomainXMLInactive|libvirt.DomainXMLSecure)
	if err != nil {
		return nil, err
	}
	var def libvirtxml.Domain
	if err := def.Unmarshal(inactive); err != nil {
		return nil, fmt.Errorf("parse domain XML of %s: %w", d.Name, err)
	}
	e := &entry{dom: d, xmlDef: inactive, next: bootSignature(&def)}
	if def.Devices != nil {
		for _, sp := range def.Devices.Serials {
			if sp.Log != nil && sp.Log.File != "" {
				e.serialLog = sp.Log.File
				break
			}
		}
	}
	power := powerOf(libvirt.DomainState(state))
	running := &def
	if power != machine.PowerOff {
		liveXML, err := l.DomainGetXMLDesc(d, 0)
		if err != nil {
			return nil, err
		}
		var live libvirtxml.Domain
		if err := live.Unmarshal(liveXML); err != nil {
			return nil, fmt.Errorf("parse live XML of %s: %w", d.Name, err)
		}
		e.live = bootSignature(&live)
		e.display = displaySocket(&live)
		running = &live
	}
	mode, secure := firmwareOf(running)
	m := &machine.Machine{
		ID:               uuidString(d.UUID),
		Name:             d.Name,
		Host:             b.cfg.Name,
		Inventory:        inventoryOf(running),
		Power:            power,
		Mode:             mode,
		SecureBootActive: secure,
	}
	m.IPMISocket = b.socketOf(m.ID, running, power == machine.PowerOff)
	fillSwitches(l, m.NICs)
	for i, dk := range m.Disks {
		if dk.Device == machine.DeviceDisk && dk.Source != "" {
			if _, capacity, _, err := l.DomainGetBlockInfo(d, dk.ID, 0); err == nil {
				m.Disks[i].Capacity = int64(capacity)
			}
		}
	}
	var meta *bmcMeta
	if def.Metadata != nil {
		if meta, err = findMeta(def.Metadata.XML); err != nil {
			return nil, err
		}
	}
	e.meta = meta
	own := bootOrderOf(&def)
	if meta != nil && meta.DefaultBoot != "" {
		own = strings.Split(meta.DefaultBoot, ",")
	}
	m.DefaultBoot = bootKinds(own)
	switch {
	case meta != nil && meta.Boot.Mode == "":
		// Written by labctl (SetNodeBMC) before vbmcd saved any setting:
		// the domain's defaults, with labctl's IPMI endpoint, users and
		// personality.
		s, err := meta.settings()
		if err != nil {
			return nil, err
		}
		nm, ns := firmwareOf(&def)
		m.Settings = machine.DefaultSettings(nm, ns)
		m.Settings.IPMI, m.Settings.Credentials, m.Settings.Personality = s.IPMI, s.Credentials, s.Personality
	case meta != nil:
		if m.Settings, err = meta.settings(); err != nil {
			return nil, err
		}
	default:
		nm, ns := firmwareOf(&def)
		m.Settings = machine.DefaultSettings(nm, ns)
	}
	e.m = m
	return e, nil
}

func isInternal(err error) bool {
	return IsCode(err, libvirt.ErrInternalError)
}

func powerOf(s libvirt.DomainState) machine.PowerState {
	switch s {
	case libvirt.DomainRunning, libvirt.DomainBlocked, libvirt.DomainPaused, libvirt.DomainPmsuspended:
		return machine.PowerOn
	case libvirt.DomainShutdown:
		return machine.PowerPoweringOff
	default:
		return machine.PowerOff
	}
}

// List implements machine.Backend.
func (b *Backend) List() []*machine.Machine {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([]*machine.Machine, 0, len(b.order))
	for _, id := range b.order {
		out = append(out, b.doms[id].m)
	}
	return out
}

func (b *Backend) find(id string) (*entry, error) {
	if e, ok := b.doms[strings.ToLower(id)]; ok {
		return e, nil
	}
	if u, ok := b.byName[id]; ok {
		return b.doms[u], nil
	}
	return nil, fmt.Errorf("%w: no domain %q", machine.ErrNotFound, id)
}

// Available reports whether the backend's view is current: connected, and
// read in full since it connected.
func (b *Backend) Available() bool {
	return b.conn.Connected() && b.ready.Load() == int64(b.conn.Connects())
}

// unavailable is the error for a machine whose host cannot be reached.
func (b *Backend) unavailable(name string) error {
	host := b.cfg.Name
	if host == "" {
		host = b.cfg.URI
	}
	return fmt.Errorf("%w: %s lives on libvirt host %s, which is unreachable", machine.ErrUnavailable, name, host)
}

// Get implements machine.Backend. A machine of a host that is not
// connected is its last known state marked Unavailable: the model refuses
// changes to it, and readers see both. Its generation is the known
// snapshot's with the top bit set, so faces' caches tell the two apart.
func (b *Backend) Get(id string) (*machine.Machine, error) {
	return machine.Read(&b.mu, b.find, id, func(e *entry) (*machine.Machine, error) {
		if !b.Available() {
			c := *e.m
			c.Unavailable = b.unavailable(e.m.Name).Error()
			c.Generation |= 1 << 63
			return &c, nil
		}
		return e.m, nil
	})
}

// Has reports whether the view holds the machine (UUID or name), whether or
// not the host is reachable now.
func (b *Backend) Has(id string) bool {
	_, err := machine.Read(&b.mu, b.find, id, func(e *entry) (*entry, error) { return e, nil })
	return err == nil
}

// Stale implements machine.Backend.
func (b *Backend) Stale(id string) bool {
	s, _ := machine.Read(&b.mu, b.find, id, func(e *entry) (bool, error) { return e.live != "" && e.live != e.next, nil })
	return s
}

// SetIndicator implements machine.Backend.
func (b *Backend) SetIndicator(id string, on bool) error {
	b.mu.Lock()
	e, err := b.find(id)
	if err != nil {
		b.mu.Unlock()
		return err
	}
	changed := e.led != on
	prev := e.m
	if changed {
		e.led = on
		c := *e.m
		c.IndicatorLED = on
		c.Generation = b.gen.Add(1)
		e.m = &c
	}
	b.mu.Unlock()
	if changed {
		b.subs.Send(machine.Event{Kind: machine.EventChanged, ID: e.m.ID, Machine: e.m, Prev: prev})
	}
	return nil
}

// Subscribe implements machine.Backend.
func (b *Backend) Subscribe() (<-chan machine.Event, func()) { return b.subs.Subscribe() }

// op resolves a machine for an operation.
func (b *Backend) op(id string) (*libvirt.Libvirt, *entry, error) {
	b.mu.RLock()
	e, err := b.find(id)
	b.mu.RUnlock()
	if err != nil {
		return nil, nil, err
	}
	l, err := b.conn.Client()
	if err != nil || !b.Available() {
		return nil, nil, b.unavailable(e.m.Name)
	}
	return l, e, nil
}

// done re-reads a domain after an operation so the caller's next read sees
// its effect, without waiting for the event.
func (b *Backend) done(l *libvirt.Libvirt, e *entry, err error, what string) error {
	b.refresh(l, e.dom)
	if err != nil {
		return b.wrap(err, what, e.m.Name)
	}
	return nil
}

// wrap turns a libvirt error into the model's sentinels, naming the domain.
func (b *Backend) wrap(err error, what, name string) error {
	var lerr libvirt.Error
	if errors.As(err, &lerr) {
		switch libvirt.ErrorNumber(lerr.Code) {
		case libvirt.ErrNoDomain:
			return fmt.Errorf("%s %s: %w: %v", what, name, machine.ErrNotFound, err)
		case libvirt.ErrOperationInvalid:
			return fmt.Errorf("%s %s: %w: %v", what, name, machine.ErrConflict, err)
		case libvirt.ErrConfigUnsupported, libvirt.ErrNoSupport, libvirt.ErrArgumentUnsupported:
			return fmt.Errorf("%s %s: %w: %v", what, name, machine.ErrUnsupported, err)
		case libvirt.ErrXMLError, libvirt.ErrXMLDetail, libvirt.ErrInvalidArg:
			return fmt.Errorf("%s %s: %w: %v", what, name, machine.ErrInvalid, err)
		case libvirt.ErrSystemError:
			// A disk or medium whose file is gone: the machine cannot
			// start as it is, which is not the BMC failing.
			if strings.Contains(lerr.Message, "Cannot access storage file") {
				return fmt.Errorf("%s %s: %w: a file the machine uses cannot be read; restore it, or eject the medium or remove the disk that names it: %v",
					what, name, machine.ErrConflict, err)
			}
		}
	}
	return fmt.Errorf("%s %s: %w", what, name, err)
}

// Save implements machine.Backend: the settings go into the domain's
// <metadata>, and the persistent definition is rewritten to boot as they
// say, in one DefineXML.
func (b *Backend) Save(_ context.Context, id string, s machine.Settings) error {
	l, e, err := b.op(id)
	if err != nil {
		return err
	}
	var trash []string
	if e.meta != nil {
		trash = e.meta.Trash
	}
	return b.save(l, e, s, trash, false)
}

// save is Save with the volume disks left to remove at the next start;
// nvramMade says the NVRAM was just made anew, which clears its reset mark.
func (b *Backend) save(l *libvirt.Libvirt, e *entry, s machine.Settings, trash []string, nvramMade bool) error {
	var def libvirtxml.Domain
	if err := def.Unmarshal(e.xmlDef); err != nil {
		return fmt.Errorf("parse domain XML of %s: %w", e.m.Name, err)
	}
	defaultBoot := ""
	resetPending := false
	var err error
	if e.meta != nil {
		defaultBoot, resetPending = e.meta.DefaultBoot, e.meta.ResetNVRAM && !nvramMade
	}
	if defaultBoot == "" {
		defaultBoot = strings.Join(bootOrderOf(&def), ",")
	}
	fw := b.fw
	switch {
	case s.SecureBoot && domainArch(&def) == machine.ArchAArch64:
		// AAVMF: the template with keys, or the one without any.
		switch len(s.DeletedKeys) {
		case 0:
		case len(machine.KeyDatabases):
			fw.AArch64.SecureVars = fw.AArch64.Vars
		default:
			return fmt.Errorf("configure %s: %w: deleting some of an aarch64 machine's secure boot key databases is not offered (all or none)", e.m.Name, machine.ErrUnsupported)
		}
	case s.SecureBoot:
		if fw.SecureVars, err = b.varsFor(s.DeletedKeys); err != nil {
			return fmt.Errorf("configure %s: %w", e.m.Name, err)
		}
	}
	resetNVRAM, err := applySettings(&def, s, strings.Split(defaultBoot, ","), fw)
	if err != nil {
		return fmt.Errorf("configure %s: %w", e.m.Name, err)
	}
	s.Volumes = slices.Clone(s.Volumes) // paths are filled in below
	if err := b.makeVolumes(l, e.m.Name, &def, s.Volumes); err != nil {
		return fmt.Errorf("volumes of %s: %w", e.m.Name, err)
	}
	gone := goneVolumes(e.m.Settings.Volumes, s.Volumes)
	attachVolumes(&def, s.Volumes, gone)
	off := e.m.Power == machine.PowerOff
	if !off {
		trash = append(slices.Clone(trash), gone...)
	}
	meta, err := toMeta(s, defaultBoot, resetPending || resetNVRAM)
	if err != nil {
		return err
	}
	meta.Trash = trash
	if def.Metadata == nil {
		def.Metadata = &libvirtxml.DomainMetadata{}
	}
	if def.Metadata.XML, err = replaceMeta(def.Metadata.XML, meta); err != nil {
		return err
	}
	out, err := def.Marshal()
	if err != nil {
		return fmt.Errorf("encode domain XML of %s: %w", e.m.Name, err)
	}
	_, err = l.DomainDefineXMLFlags(out, libvirt.DomainDefineValidate)
	if err == nil && off && len(gone) > 0 {
		if rerr := removeDisks(l, gone); rerr != nil {
			b.log.Warn("removing deleted volumes' disks failed", zap.String("domain", e.m.Name), zap.Error(rerr))
		}
	}
	return b.done(l, e, err, "define")
}

// Start implements machine.Backend.
func (b *Backend) Start(ctx context.Context, id string) error {
	l, e, err := b.op(id)
	if err != nil {
		return err
	}
	if e.meta != nil && len(e.meta.Trash) > 0 {
		// Deleted volumes the domain held when it ran: nothing holds
		// them now.
		if err := removeDisks(l, e.meta.Trash); err != nil {
			b.log.Warn("removing deleted volumes' disks failed", zap.String("domain", e.m.Name), zap.Error(err))
		} else if err := b.save(l, e, e.m.Settings, nil, false); err != nil {
			return err
		}
	}
	if err := b.ensureDevices(l, e); err != nil {
		return err
	}
	var flags uint32
	if e.meta != nil && e.meta.ResetNVRAM {
		flags |= uint32(libvirt.DomainStartResetNvram)
	}
	_, err = l.DomainCreateWithFlags(e.dom, flags)
	// A start right after a destroy (a cold restart) now and then fails
	// inside qemu ("process exited while connecting to monitor") while the
	// old process lets go of its resources; a real BMC's power cycle holds
	// off for a moment too. Retry a few times.
	for try := 1; try <= 4 && isInternal(err); try++ {
		b.log.Debug("start failed; retrying", zap.String("domain", e.m.Name), zap.Int("try", try), zap.Error(err))
		time.Sleep(time.Duration(try) * 150 * time.Millisecond)
		_, err = l.DomainCreateWithFlags(e.dom, flags)
	}
	if err == nil && flags != 0 {
		// The new firmware's NVRAM exists now; clear the mark.
		b.refresh(l, e.dom)
		b.mu.RLock()
		e2, ferr := b.find(e.m.ID)
		b.mu.RUnlock()
		if ferr == nil {
			var trash []string
			if e2.meta != nil {
				trash = e2.meta.Trash
			}
			if serr := b.save(l, e2, e2.m.Settings, trash, true); serr != nil {
				b.log.Warn("clearing the NVRAM reset mark failed", zap.String("domain", e.m.Name), zap.Error(serr))
			}
		}
	}
	return b.done(l, e, err, "start")
}

// Stop implements machine.Backend.
func (b *Backend) Stop(_ context.Context, id string, force bool) error {
	l, e, err := b.op(id)
	if err != nil {
		return err
	}
	if e.m.Power == machine.PowerOff {
		return nil
	}
	if force {
		err = l.DomainDestroyFlags(e.dom, libvirt.DomainDestroyDefault)
	} else {
		err = l.DomainShutdownFlags(e.dom, libvirt.DomainShutdownAcpiPowerBtn)
	}
	if IsCode(err, libvirt.ErrOperationInvalid) {
		err = nil // it stopped meanwhile
	}
	return b.done(l, e, err, "stop")
}

// Reboot implements machine.Backend.
func (b *Backend) Reboot(_ context.Context, id string) error {
	return b.domainCall(id, "reboot", func(l *libvirt.Libvirt, d libvirt.Domain) error {
		return l.DomainReboot(d, libvirt.DomainRebootAcpiPowerBtn)
	})
}

// Reset implements machine.Backend.
func (b *Backend) Reset(_ context.Context, id string) error {
	return b.domainCall(id, "reset", func(l *libvirt.Libvirt, d libvirt.Domain) error {
		return l.DomainReset(d, 0)
	})
}

// NMI implements machine.Backend.
func (b *Backend) NMI(_ context.Context, id string) error {
	return b.domainCall(id, "inject NMI into", func(l *libvirt.Libvirt, d libvirt.Domain) error {
		return l.DomainInjectNmi(d, 0)
	})
}

// domainCall makes one libvirt call on machine id's domain (op, then done:
// the domain re-read, an error named by what).
func (b *Backend) domainCall(id, what string, call func(*libvirt.Libvirt, libvirt.Domain) error) error {
	l, e, err := b.op(id)
	if err != nil {
		return err
	}
	return b.done(l, e, call(l, e.dom), what)
}
