package machine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Service is the machine model the protocol faces use. It owns a real BMC's
// semantics and leaves carrying them out to a Backend.
type Service struct {
	be  Backend
	log *zap.Logger

	mu    sync.Mutex
	locks map[string]*sync.Mutex // per machine: mutations are serialised

	tasks        taskTable
	bmcReset     bmcResetHooks
	observePower func(ResetType, error, time.Duration)
	power        powerOps
	faults       faults
	consoles     consoleMux // Consoles: one shared stream per machine
	typists      typists    // SendKeys: one typist per machine at a time
	// bmcUpdateDown is how long a BMC is unreachable after its firmware
	// was updated (WithBMCUpdateDowntime).
	bmcUpdateDown time.Duration
	// bmcFlash is how long a BMC flashes a checked image before it
	// reboots (WithBMCFlashTime).
	bmcFlash time.Duration
}

// NewService returns a Service over be. Call Watch to react to guest reboots.
func NewService(be Backend, log *zap.Logger, opts ...ServiceOption) *Service {
	if log == nil {
		log = zap.NewNop()
	}
	s := &Service{be: be, log: log, locks: map[string]*sync.Mutex{}}
	s.power.init()
	s.tasks.wait = 2 * time.Minute
	s.tasks.byID = map[string]*Task{}
	s.tasks.active = map[string]*Task{}
	s.tasks.last = map[string]*Task{}
	s.tasks.firmware = map[string][]*Task{}
	s.tasks.volumes = map[string][]*Task{}
	s.tasks.configs = map[string][]*Task{}
	s.bmcUpdateDown = time.Minute
	s.bmcFlash = defaultBMCFlash
	for _, o := range opts {
		o(s)
	}
	return s
}

// Backend returns the backend the service drives.
func (s *Service) Backend() Backend { return s.be }

// List returns every machine.
func (s *Service) List() []*Machine {
	ms := s.be.List()
	if !s.overlays() {
		return ms
	}
	for i, m := range ms {
		ms[i] = s.overlay(m)
	}
	return ms
}

// IDs returns the IDs of at most limit machines from the skip-th on, in
// List's order, and how many there are in all. A backend that can name its
// machines without their snapshots (the sim) is not asked for them.
func (s *Service) IDs(skip, limit int) (ids []string, total int) {
	if ix, ok := s.be.(Indexed); ok {
		total = ix.Len()
		for i := skip; i < total && len(ids) < limit; i++ {
			ids = append(ids, ix.IDAt(i))
		}
		return ids, total
	}
	ms := s.be.List()
	return PageIDs(ms, skip, limit), len(ms)
}

// Get returns one machine by UUID or name.
func (s *Service) Get(id string) (*Machine, error) {
	m, err := s.be.Get(id)
	if err != nil {
		return nil, err
	}
	return s.overlay(m), nil
}

func (s *Service) lock(id string) func() {
	s.mu.Lock()
	l, ok := s.locks[id]
	if !ok {
		l = &sync.Mutex{}
		s.locks[id] = l
	}
	s.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// resolve returns the machine and holds its lock; call the returned unlock.
func (s *Service) resolve(id string) (*Machine, func(), error) {
	m, err := s.be.Get(id)
	if err != nil {
		return nil, nil, err
	}
	unlock := s.lock(m.ID)
	// Re-read under the lock: the snapshot may have changed meanwhile.
	m, err = s.be.Get(m.ID)
	if err == nil {
		err = usable(m)
	}
	if err != nil {
		unlock()
		return nil, nil, err
	}
	return m, unlock, nil
}

// usable refuses changes to a machine whose host cannot be reached: its
// snapshot is only the last known state.
func usable(m *Machine) error {
	if m.Unavailable != "" {
		return fmt.Errorf("%w: %s; changes are refused until it answers again", ErrUnavailable, m.Unavailable)
	}
	return nil
}

// boots reports whether a reset of a machine in power state p starts a boot.
func boots(rt ResetType, p PowerState) bool {
	on := p == PowerOn || p == PowerPoweringOff
	switch rt {
	case ResetOn, ResetForceOn:
		// A guest shutting down is off in a moment: an On starts it then.
		return !on || p == PowerPoweringOff
	case ResetPushPowerButton:
		return !on
	case ResetForceRestart, ResetPowerCycle, ResetGracefulRestart:
		return true
	}
	return false
}

// reset carries a power action out and returns when the backend is done.
// An action that boots the machine first waits for virtual media that is
// still loading (bounded, see WithMediaWait), so no boot sees half an image.
func (s *Service) reset(ctx context.Context, id string, rt ResetType) error {
	if rt == ResetOn || rt == ResetForceOn {
		if err := s.waitDown(ctx, id); err != nil {
			return err
		}
	}
	if m, err := s.be.Get(id); err == nil && boots(rt, m.Power) {
		if err := s.waitMedia(ctx, m.ID); err != nil {
			return err
		}
	}
	m, unlock, err := s.resolve(id)
	if err != nil {
		return err
	}
	defer unlock()
	on := m.Power == PowerOn || m.Power == PowerPoweringOff
	if boots(rt, m.Power) {
		if t := s.pendingMedia(m.ID); t != nil {
			return loadingError(t, 0) // an insert began after the wait
		}
	}
	switch rt {
	case ResetOn, ResetForceOn:
		if on {
			return nil
		}
		return s.start(ctx, m)
	case ResetForceOff:
		return s.be.Stop(ctx, m.ID, true)
	case ResetGracefulShutdown:
		// A machine the backend is still starting is on its way up: the
		// power button takes it down (see changes).
		if !on && m.Power != PowerPoweringOn {
			return nil
		}
		return s.be.Stop(ctx, m.ID, false)
	case ResetPushPowerButton:
		if on || m.Power == PowerPoweringOn {
			return s.be.Stop(ctx, m.ID, false)
		}
		return s.start(ctx, m)
	case ResetForceRestart:
		if !on {
			return s.start(ctx, m)
		}
		return s.restart(ctx, m)
	case ResetPowerCycle:
		if !on {
			return s.start(ctx, m)
		}
		return s.coldRestart(ctx, m)
	case ResetGracefulRestart:
		if !on {
			return s.start(ctx, m)
		}
		// The guest reboots itself; HandleReboot applies pending changes then.
		return s.be.Reboot(ctx, m.ID)
	case ResetNmi:
		if !on {
			return fmt.Errorf("%w: %s is off, an NMI needs a running machine", ErrConflict, m.Name)
		}
		return s.be.NMI(ctx, m.ID)
	default:
		return invalidf("unknown reset type %q", rt)
	}
}

// waitDown waits, bounded, while a machine's guest shuts itself down (the
// backend reads PoweringOff, as libvirt's shutdown state): an On that came
// meanwhile starts the machine once it is off, instead of finding it on and
// doing nothing while it goes off (a client that read Off a moment early
// and powers on). Events wake it; a slow re-read covers one it missed.
func (s *Service) waitDown(ctx context.Context, id string) error {
	events, cancel := s.be.Subscribe()
	defer cancel()
	limit := time.NewTimer(settleWait)
	defer limit.Stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		m, err := s.be.Get(id)
		if err != nil {
			return err
		}
		if m.Power != PowerPoweringOff {
			return nil
		}
		select {
		case <-events:
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		case <-limit.C:
			return &BusyError{RetryAfter: retryBusy, msg: fmt.Sprintf("%v: %s is still shutting down after %s; retry when it is off",
				ErrConflict, m.Name, settleWait)}
		}
	}
}

// beforeBoot returns the settings that take effect as the machine boots:
// pending BIOS settings become current, BootMode and SecureBoot as the
// firmware the machine boots with.
// Staged firmware (a BIOS or NIC update) is installed.
func beforeBoot(st Settings) (Settings, bool) {
	if len(st.BIOSPending) == 0 && len(st.FirmwarePending) == 0 {
		return st, false
	}
	st = st.Clone()
	applyBIOS(&st, st.BIOSPending)
	st.BIOSPending = nil
	applyFirmware(&st)
	return st, true
}

// afterBoot returns the settings once a boot has begun: a Once override is
// spent.
func afterBoot(st Settings) (Settings, bool) {
	if st.Boot.Enabled != BootOnce {
		return st, false
	}
	st = st.Clone()
	if st.Boot.Target == BootUefiBootNext {
		// UEFI deletes BootNext once it has booted it.
		st.Boot.BootNext = ""
	}
	st.Boot.Enabled = BootDisabled
	st.Boot.Target = BootNone
	return st, true
}

// start powers an off machine on: pending BIOS settings apply, the machine
// boots its override (a UefiHttp one's image fetched first), and a Once
// override is then spent.
func (s *Service) start(ctx context.Context, m *Machine) error {
	st, err := s.settleBoot(ctx, m)
	if err != nil {
		return err
	}
	// Marked before the backend starts it: a guest may run and power
	// itself off before the backend's start returns (a marker ISO under
	// TCG on a loaded host).
	markStarted(ctx)
	if err := s.be.Start(ctx, m.ID); err != nil {
		return err
	}
	return s.spend(ctx, m.ID, st)
}

// settleBIOS makes pending BIOS settings current, as a boot does, and
// returns the settings the boot runs with.
func (s *Service) settleBIOS(ctx context.Context, m *Machine) (Settings, error) {
	st, changed := beforeBoot(m.Settings)
	if changed {
		if err := s.be.Save(ctx, m.ID, st); err != nil {
			return st, err
		}
		s.firmwareApplied(m.ID, st)
	}
	s.volumesApplied(m.ID, st)
	s.configsApplied(m.ID)
	return st, nil
}

func (s *Service) spend(ctx context.Context, id string, st Settings) error {
	if st, changed := afterBoot(st); changed {
		if err := s.be.Save(ctx, id, st); err != nil {
			return fmt.Errorf("machine started, but spending its Once override failed: %w", err)
		}
	}
	return nil
}

// coldRestart stops a running machine at once and starts it again, so it
// boots with its stored definition and pending BIOS settings.
func (s *Service) coldRestart(ctx context.Context, m *Machine) error {
	st, err := s.settleBoot(ctx, m)
	if err != nil {
		return err
	}
	return s.coldStart(ctx, m.ID, st)
}

// restart resets a running machine: warm when it already runs with the
// configuration it should boot with, cold when stored changes (boot order,
// firmware) need a new start.
//
// Pending BIOS settings settle first: one that changes the firmware (BootMode,
// SecureBoot) makes the machine stale, and the restart cold.
func (s *Service) restart(ctx context.Context, m *Machine) error {
	st, err := s.settleBoot(ctx, m)
	if err != nil {
		return err
	}
	if s.be.Stale(m.ID) {
		return s.coldStart(ctx, m.ID, st)
	}
	if err := s.be.Reset(ctx, m.ID); err != nil {
		// The guest powered itself off as the reset came (the backend
		// had not seen it yet): a forced restart of a machine that is
		// off starts it, as on a real server.
		if cur, gerr := s.be.Get(m.ID); errors.Is(err, ErrConflict) && gerr == nil && cur.Power == PowerOff {
			return s.start(ctx, cur)
		}
		return err
	}
	return s.spend(ctx, m.ID, st)
}

// coldStart stops a running machine whose BIOS settings are settled into st
// and starts it again with its stored definition.
func (s *Service) coldStart(ctx context.Context, id string, st Settings) error {
	if err := s.be.Stop(ctx, id, true); err != nil {
		return err
	}
	if err := s.be.Start(ctx, id); err != nil {
		return err
	}
	return s.spend(ctx, id, st)
}

// HandleReboot reacts to a reboot the machine went through while running
// (the guest's own, an ACPI reboot, or a warm reset), as a real BMC sees a
// boot: when the boot configuration it runs with is stale, it restarts the
// machine cold so the stored one applies; otherwise the reboot itself is the
// boot, and only pending BIOS settings and a Once override are settled. It
// never resets the machine again for a reboot that already happened (a
// reset raises a reboot event of its own).
func (s *Service) HandleReboot(ctx context.Context, id string) error {
	m, unlock, err := s.resolve(id)
	if err != nil {
		return err
	}
	defer unlock()
	if m.Power != PowerOn {
		return nil
	}
	st, err := s.settleBoot(ctx, m)
	if err != nil {
		return err
	}
	if s.be.Stale(m.ID) {
		return s.coldStart(ctx, m.ID, st)
	}
	return s.spend(ctx, m.ID, st)
}

// Watch subscribes to the backend's events and, until ctx ends, reacts to
// guest reboots in a goroutine of its own. The subscription is in place when
// Watch returns.
func (s *Service) Watch(ctx context.Context) {
	events, cancel := s.be.Subscribe()
	go func() {
		defer cancel()
		ForEach(ctx, events, func(ev Event) {
			if ev.Kind != EventReboot {
				return
			}
			// A machine gone meanwhile (undefined, filtered out) needs nothing.
			if err := s.HandleReboot(ctx, ev.ID); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, ErrNotFound) {
				s.log.Warn("applying pending changes at guest reboot failed", zap.String("machine", ev.ID), zap.Error(err))
			}
		})
	}()
}

// BootPatch is a change of the boot override; nil fields stay as they are.
type BootPatch struct {
	Target      *BootSource
	Enabled     *BootEnabled
	Mode        *BootMode
	HTTPBootURI *string // "" clears it
	BootNext    *string // a BootOptionReference; "" clears it
}

// SetBoot changes the boot override. Setting a target while the override is
// Disabled makes it Once, as on real BMCs; setting the target None disables it.
func (s *Service) SetBoot(ctx context.Context, id string, p BootPatch) (*Machine, error) {
	m, unlock, err := s.resolve(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	st := m.Settings.Clone()
	b := st.Boot
	if p.Target != nil {
		if !slices.Contains(BootSources, *p.Target) {
			return nil, invalidf("boot source %q is not one of %v", *p.Target, BootSources)
		}
		b.Target = *p.Target
		if p.Enabled == nil && b.Enabled == BootDisabled && b.Target != BootNone {
			b.Enabled = BootOnce
		}
	}
	if p.Enabled != nil {
		if !slices.Contains(BootEnabledValues, *p.Enabled) {
			return nil, invalidf("boot override lifetime %q is not one of %v", *p.Enabled, BootEnabledValues)
		}
		b.Enabled = *p.Enabled
	}
	if b.Target == BootNone && p.Target != nil {
		b.Enabled = BootDisabled
	}
	if p.Mode != nil {
		if !slices.Contains(BootModes, *p.Mode) {
			return nil, invalidf("boot mode %q is not one of %v", *p.Mode, BootModes)
		}
		if *p.Mode == BootModeLegacy && st.SecureBoot {
			return nil, fmt.Errorf("%w: secure boot is enabled; disable it before switching to Legacy", ErrConflict)
		}
		if *p.Mode == BootModeLegacy && m.Inventory.UEFIOnly() {
			return nil, ErrUEFIOnly
		}
		b.Mode = *p.Mode
	}
	if p.HTTPBootURI != nil {
		if *p.HTTPBootURI != "" {
			if err := checkHTTPBootURI(*p.HTTPBootURI); err != nil {
				return nil, err
			}
		}
		b.HTTPBootURI = *p.HTTPBootURI
	}
	if p.BootNext != nil {
		if *p.BootNext != "" {
			if err := checkBootOrder(m.Inventory, []string{*p.BootNext}); err != nil {
				return nil, err
			}
		}
		b.BootNext = *p.BootNext
	}
	if b.Effective() == BootUefiBootNext && b.BootNext == "" {
		return nil, fmt.Errorf("%w: an UefiBootNext override boots the option Boot.BootNext names; set BootNext", ErrNoBootNext)
	}
	if b.Effective() == BootUefiHttp && b.HTTPBootURI == "" {
		return nil, fmt.Errorf("%w: this BMC fetches the image itself, and its machines get no boot URI from DHCP", ErrNoHTTPBootURI)
	}
	if b.Effective() == BootUefiHttp && b.Mode == BootModeLegacy {
		return nil, ErrHTTPBootLegacy
	}
	if b == st.Boot {
		return m, nil
	}
	st.Boot = b
	if err := s.be.Save(ctx, m.ID, st); err != nil {
		return nil, err
	}
	if m.Power == PowerOff {
		// An image an earlier UefiHttp boot left in the drive goes once
		// the override no longer asks for it; a running machine keeps it
		// until its next boot.
		if m, err = s.be.Get(m.ID); err != nil {
			return nil, err
		}
		if _, err := s.settleHTTPBoot(ctx, m, st, false); err != nil {
			return nil, err
		}
	}
	return s.be.Get(m.ID)
}

// SetSecureBoot requests secure boot on or off from the next start on.
func (s *Service) SetSecureBoot(ctx context.Context, id string, on bool) (*Machine, error) {
	m, unlock, err := s.resolve(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if m.Settings.SecureBoot == on {
		return m, nil
	}
	if on && m.Settings.Boot.Mode != BootModeUEFI {
		return nil, fmt.Errorf("%w: secure boot needs UEFI; set the boot mode to UEFI first", ErrConflict)
	}
	st := m.Settings.Clone()
	st.SecureBoot = on
	if err := s.be.Save(ctx, m.ID, st); err != nil {
		return nil, err
	}
	return s.be.Get(m.ID)
}

// SetBIOSPending stages BIOS attributes for the next reset. Unknown
// attributes and values of the wrong type or outside their list are refused
// as a whole.
func (s *Service) SetBIOSPending(ctx context.Context, id string, attrs map[string]any) (*Machine, error) {
	if err := ValidateBIOS(attrs); err != nil {
		return nil, err
	}
	m, unlock, err := s.resolve(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	st := m.Settings.Clone()
	if st.BIOSPending == nil {
		st.BIOSPending = map[string]any{}
	}
	maps.Copy(st.BIOSPending, attrs)
	if m.Inventory.UEFIOnly() && st.BIOSPending[BIOSBootMode] == "Bios" {
		return nil, &BIOSError{Attribute: BIOSBootMode, Value: "Bios", Reason: "uefi-only"}
	}
	if err := checkBIOSFirmware(st); err != nil {
		return nil, err
	}
	if err := s.be.Save(ctx, m.ID, st); err != nil {
		return nil, err
	}
	return s.be.Get(m.ID)
}

// ResetBIOS stages the default BIOS attributes for the next reset.
func (s *Service) ResetBIOS(ctx context.Context, id string) error {
	m, unlock, err := s.resolve(id)
	if err != nil {
		return err
	}
	defer unlock()
	st := m.Settings.Clone()
	st.BIOSPending = factoryBIOS()
	return s.be.Save(ctx, m.ID, st)
}

// UpdateSettings applies fn to a machine's settings and stores the result;
// for settings without BMC semantics (credentials, the IPMI endpoint).
func (s *Service) UpdateSettings(ctx context.Context, id string, fn func(*Settings) error) (*Machine, error) {
	m, unlock, err := s.resolve(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	st := m.Settings.Clone()
	if err := fn(&st); err != nil {
		return nil, err
	}
	if err := s.be.Save(ctx, m.ID, st); err != nil {
		return nil, err
	}
	return s.be.Get(m.ID)
}

// SetIndicator turns the identify light on or off.
func (s *Service) SetIndicator(id string, on bool) error {
	m, err := s.be.Get(id)
	if err != nil {
		return err
	}
	return s.be.SetIndicator(m.ID, on)
}

// Await returns the machine once the backend knows it, waiting up to
// timeout (a domain defined a moment ago reaches the backend by an event).
func (s *Service) Await(ctx context.Context, id string, timeout time.Duration) (*Machine, error) {
	deadline := time.Now().Add(timeout)
	for {
		m, err := s.be.Get(id)
		if err == nil || time.Now().After(deadline) {
			return m, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
