package machine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/sim"
)

func newSvc(t *testing.T) (*machine.Service, *sim.Backend, string) {
	t.Helper()
	be := sim.New(2)
	svc := machine.NewService(be, nil)
	return svc, be, be.List()[0].ID
}

func ptr[T any](v T) *T { return &v }

func TestOnceOverrideIsSpentByTheNextBoot(t *testing.T) {
	ctx := context.Background()
	svc, be, id := newSvc(t)
	if _, err := svc.SetBoot(ctx, id, machine.BootPatch{Target: ptr(machine.BootCd), Enabled: ptr(machine.BootOnce)}); err != nil {
		t.Fatal(err)
	}
	m, _ := svc.Get(id)
	if got := m.Settings.Boot.Effective(); got != machine.BootCd {
		t.Fatalf("before boot: effective %q, want Cd", got)
	}
	if err := svc.Reset(ctx, id, machine.ResetOn); err != nil {
		t.Fatal(err)
	}
	m, _ = svc.Get(id)
	want := machine.Boot{Target: machine.BootNone, Enabled: machine.BootDisabled, Mode: machine.BootModeUEFI}
	if diff := cmp.Diff(want, m.Settings.Boot); diff != "" {
		t.Errorf("after boot (-want +got):\n%s", diff)
	}
	// The machine runs with Cd first while its next start would not: stale.
	if !be.Stale(id) {
		t.Errorf("running with a spent Once override should be stale")
	}
}

func TestContinuousOverrideStays(t *testing.T) {
	ctx := context.Background()
	svc, be, id := newSvc(t)
	if _, err := svc.SetBoot(ctx, id, machine.BootPatch{Target: ptr(machine.BootPxe), Enabled: ptr(machine.BootContinuous)}); err != nil {
		t.Fatal(err)
	}
	for _, rt := range []machine.ResetType{machine.ResetOn, machine.ResetForceRestart, machine.ResetPowerCycle} {
		if err := svc.Reset(ctx, id, rt); err != nil {
			t.Fatalf("%s: %v", rt, err)
		}
		m, _ := svc.Get(id)
		if m.Settings.Boot.Enabled != machine.BootContinuous || m.Settings.Boot.Target != machine.BootPxe {
			t.Errorf("after %s: boot %+v, want Continuous Pxe", rt, m.Settings.Boot)
		}
		if be.Stale(id) {
			t.Errorf("after %s: stale, want running with the stored config", rt)
		}
	}
}

func TestTargetAloneMakesOnceAndNoneDisables(t *testing.T) {
	ctx := context.Background()
	svc, _, id := newSvc(t)
	m, err := svc.SetBoot(ctx, id, machine.BootPatch{Target: ptr(machine.BootHdd)})
	if err != nil {
		t.Fatal(err)
	}
	if m.Settings.Boot.Enabled != machine.BootOnce {
		t.Errorf("target alone: enabled %q, want Once", m.Settings.Boot.Enabled)
	}
	m, err = svc.SetBoot(ctx, id, machine.BootPatch{Target: ptr(machine.BootNone)})
	if err != nil {
		t.Fatal(err)
	}
	if m.Settings.Boot.Enabled != machine.BootDisabled {
		t.Errorf("target None: enabled %q, want Disabled", m.Settings.Boot.Enabled)
	}
}

func TestBadBootValuesAreInvalid(t *testing.T) {
	ctx := context.Background()
	svc, _, id := newSvc(t)
	before, _ := svc.Get(id)
	for name, p := range map[string]machine.BootPatch{
		"target":  {Target: ptr(machine.BootSource("Floppy"))},
		"enabled": {Enabled: ptr(machine.BootEnabled("Twice"))},
		"mode":    {Mode: ptr(machine.BootMode("Hybrid"))},
	} {
		if _, err := svc.SetBoot(ctx, id, p); !errors.Is(err, machine.ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", name, err)
		}
	}
	after, _ := svc.Get(id)
	if diff := cmp.Diff(before.Settings, after.Settings); diff != "" {
		t.Errorf("refused changes altered state (-before +after):\n%s", diff)
	}
}

func TestSecureBootNeedsUEFI(t *testing.T) {
	ctx := context.Background()
	svc, _, id := newSvc(t)
	if _, err := svc.SetBoot(ctx, id, machine.BootPatch{Mode: ptr(machine.BootModeLegacy)}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SetSecureBoot(ctx, id, true); !errors.Is(err, machine.ErrConflict) {
		t.Fatalf("secure boot on Legacy: err %v, want ErrConflict", err)
	}
	if _, err := svc.SetBoot(ctx, id, machine.BootPatch{Mode: ptr(machine.BootModeUEFI)}); err != nil {
		t.Fatal(err)
	}
	m, err := svc.SetSecureBoot(ctx, id, true)
	if err != nil {
		t.Fatal(err)
	}
	if m.SecureBootActive != true || !m.Settings.SecureBoot {
		t.Errorf("off machine: requested %v active %v, want both true", m.Settings.SecureBoot, m.SecureBootActive)
	}
	if _, err := svc.SetBoot(ctx, id, machine.BootPatch{Mode: ptr(machine.BootModeLegacy)}); !errors.Is(err, machine.ErrConflict) {
		t.Errorf("Legacy with secure boot on: err %v, want ErrConflict", err)
	}
}

func TestSecureBootTakesEffectAtNextStart(t *testing.T) {
	ctx := context.Background()
	svc, _, id := newSvc(t)
	if err := svc.Reset(ctx, id, machine.ResetOn); err != nil {
		t.Fatal(err)
	}
	m, err := svc.SetSecureBoot(ctx, id, true)
	if err != nil {
		t.Fatal(err)
	}
	if m.SecureBootActive {
		t.Fatalf("running machine switched secure boot before a restart")
	}
	if err := svc.Reset(ctx, id, machine.ResetForceRestart); err != nil {
		t.Fatal(err)
	}
	m, _ = svc.Get(id)
	if !m.SecureBootActive {
		t.Errorf("after ForceRestart secure boot is not active")
	}
}

func TestBIOSPendingUntilReset(t *testing.T) {
	ctx := context.Background()
	svc, _, id := newSvc(t)
	m, err := svc.SetBIOSPending(ctx, id, map[string]any{"ProcTurboMode": "Disabled", "PxeRetryCount": float64(5)})
	if err != nil {
		t.Fatal(err)
	}
	if m.Settings.BIOS["ProcTurboMode"] != "Enabled" {
		t.Fatalf("pending change applied at once")
	}
	if err := svc.Reset(ctx, id, machine.ResetOn); err != nil {
		t.Fatal(err)
	}
	m, _ = svc.Get(id)
	if m.Settings.BIOS["ProcTurboMode"] != "Disabled" || m.Settings.BIOS["PxeRetryCount"] != 5 {
		t.Errorf("after boot BIOS = %v", m.Settings.BIOS)
	}
	if len(m.Settings.BIOSPending) != 0 {
		t.Errorf("pending left after boot: %v", m.Settings.BIOSPending)
	}
}

// TestBIOSFirmwareAttributes: BootMode and SecureBoot staged in the BIOS
// change the firmware at the next boot, not before, and a running machine's
// ForceRestart becomes cold so the new firmware really starts.
func TestBIOSFirmwareAttributes(t *testing.T) {
	ctx := context.Background()
	svc, _, id := newSvc(t) // the simulated machines boot UEFI without secure boot
	if err := svc.Reset(ctx, id, machine.ResetOn); err != nil {
		t.Fatal(err)
	}
	m, err := svc.SetBIOSPending(ctx, id, map[string]any{"BootMode": "Uefi", "SecureBoot": "Enabled"})
	if err != nil {
		t.Fatal(err)
	}
	if cur := m.Settings.CurrentBIOS(); cur["SecureBoot"] != "Disabled" || m.Settings.SecureBoot || m.SecureBootActive {
		t.Fatalf("pending SecureBoot applied at once: current %v, requested %v, active %v", cur["SecureBoot"], m.Settings.SecureBoot, m.SecureBootActive)
	}
	if err := svc.Reset(ctx, id, machine.ResetForceRestart); err != nil {
		t.Fatal(err)
	}
	m, _ = svc.Get(id)
	if !m.Settings.SecureBoot || !m.SecureBootActive || m.Settings.CurrentBIOS()["SecureBoot"] != "Enabled" {
		t.Errorf("after ForceRestart: requested %v, active %v, BIOS %v", m.Settings.SecureBoot, m.SecureBootActive, m.Settings.CurrentBIOS())
	}
	if _, kept := m.Settings.BIOS["SecureBoot"]; kept {
		t.Errorf("SecureBoot kept in the BIOS map as well as in the settings: %v", m.Settings.BIOS)
	}

	// Legacy with secure boot on is refused whichever way it is asked.
	_, err = svc.SetBIOSPending(ctx, id, map[string]any{"BootMode": "Bios"})
	var be *machine.BIOSError
	if !errors.As(err, &be) || be.Reason != "conflict" {
		t.Fatalf("BootMode Bios with secure boot on: err %v, want a conflict", err)
	}
	if _, err := svc.SetBIOSPending(ctx, id, map[string]any{"BootMode": "Bios", "SecureBoot": "Disabled"}); err != nil {
		t.Fatal(err)
	}
	if err := svc.Reset(ctx, id, machine.ResetForceRestart); err != nil {
		t.Fatal(err)
	}
	m, _ = svc.Get(id)
	if m.Mode != machine.BootModeLegacy || m.SecureBootActive || m.Settings.CurrentBIOS()["BootMode"] != "Bios" {
		t.Errorf("after the second restart: active mode %s secure %v, BIOS %v", m.Mode, m.SecureBootActive, m.Settings.CurrentBIOS())
	}

	// ResetBios stages the factory values, firmware ones included.
	if err := svc.ResetBIOS(ctx, id); err != nil {
		t.Fatal(err)
	}
	m, _ = svc.Get(id)
	if m.Settings.BIOSPending["BootMode"] != "Uefi" || m.Settings.BIOSPending["ProcTurboMode"] != "Enabled" {
		t.Errorf("ResetBios staged %v", m.Settings.BIOSPending)
	}
	if _, staged := m.Settings.BIOSPending["TpmSecurity"]; staged {
		t.Errorf("ResetBios staged the read-only TpmSecurity")
	}
}

// TestCurrentBIOSFillsNewAttributes: a machine whose stored BIOS predates
// an attribute shows that attribute's factory value.
func TestCurrentBIOSFillsNewAttributes(t *testing.T) {
	st := machine.DefaultSettings(machine.BootModeLegacy, false)
	st.BIOS = map[string]any{"ProcTurboMode": "Disabled"}
	cur := st.CurrentBIOS()
	want := map[string]any{"ProcTurboMode": "Disabled", "TpmSecurity": "Off", "BootMode": "Bios", "SecureBoot": "Disabled", "PxeRetryCount": 3}
	for k, v := range want {
		if cur[k] != v {
			t.Errorf("%s = %v, want %v", k, cur[k], v)
		}
	}
}

func TestBIOSValidation(t *testing.T) {
	tests := []struct {
		attrs  map[string]any
		reason string
	}{
		{map[string]any{"NoSuch": "x"}, "unknown"},
		{map[string]any{"ProcTurboMode": true}, "type"},
		{map[string]any{"ProcTurboMode": "Maybe"}, "value"},
		{map[string]any{"PxeRetryCount": 11.0}, "value"},
		{map[string]any{"PxeRetryCount": 1.5}, "type"},
		{map[string]any{"QuietBoot": "yes"}, "type"},
		{map[string]any{"TpmSecurity": "Off"}, "readonly"},
		{map[string]any{"BootMode": "Legacy"}, "value"},
	}
	for _, tt := range tests {
		err := machine.ValidateBIOS(tt.attrs)
		var be *machine.BIOSError
		if !errors.As(err, &be) || be.Reason != tt.reason || !errors.Is(err, machine.ErrInvalid) {
			t.Errorf("%v: err %v, want reason %s", tt.attrs, err, tt.reason)
		}
	}
	if err := machine.ValidateBIOS(map[string]any{"QuietBoot": true, "SerialConsoleBaudRate": "9600"}); err != nil {
		t.Errorf("valid attributes refused: %v", err)
	}
}

func TestPowerActions(t *testing.T) {
	ctx := context.Background()
	svc, _, id := newSvc(t)
	steps := []struct {
		rt   machine.ResetType
		want machine.PowerState
	}{
		{machine.ResetOn, machine.PowerOn},
		{machine.ResetOn, machine.PowerOn}, // idempotent
		{machine.ResetForceOff, machine.PowerOff},
		{machine.ResetForceOff, machine.PowerOff},
		{machine.ResetPushPowerButton, machine.PowerOn},
		{machine.ResetGracefulShutdown, machine.PowerOff},
		{machine.ResetPowerCycle, machine.PowerOn},
		{machine.ResetForceRestart, machine.PowerOn},
		{machine.ResetNmi, machine.PowerOn},
	}
	for i, s := range steps {
		if err := svc.Reset(ctx, id, s.rt); err != nil {
			t.Fatalf("step %d %s: %v", i, s.rt, err)
		}
		m, _ := svc.Get(id)
		if m.Power != s.want {
			t.Errorf("step %d %s: power %s, want %s", i, s.rt, m.Power, s.want)
		}
	}
	if err := svc.Reset(ctx, id, "Explode"); !errors.Is(err, machine.ErrInvalid) {
		t.Errorf("unknown reset: %v, want ErrInvalid", err)
	}
	_ = svc.Reset(ctx, id, machine.ResetForceOff)
	if err := svc.Reset(ctx, id, machine.ResetNmi); !errors.Is(err, machine.ErrConflict) {
		t.Errorf("NMI when off: %v, want ErrConflict", err)
	}
}

func TestGuestRebootAppliesPendingOverride(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc, be, id := newSvc(t)
	svc.Watch(ctx)
	if err := svc.Reset(ctx, id, machine.ResetOn); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SetBoot(ctx, id, machine.BootPatch{Target: ptr(machine.BootCd), Enabled: ptr(machine.BootOnce)}); err != nil {
		t.Fatal(err)
	}
	if err := svc.Reset(ctx, id, machine.ResetGracefulRestart); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		m, _ := svc.Get(id)
		if m.Settings.Boot.Enabled == machine.BootDisabled {
			if !be.Stale(id) {
				t.Errorf("after the reboot the machine should run with Cd first (stale against the spent override)")
			}
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the Once override was not spent by the guest reboot")
}

func TestUnknownMachine(t *testing.T) {
	svc, _, _ := newSvc(t)
	if err := svc.Reset(context.Background(), "nope", machine.ResetOn); !errors.Is(err, machine.ErrNotFound) {
		t.Errorf("err %v, want ErrNotFound", err)
	}
	if _, err := svc.Get("sim-0002"); err != nil {
		t.Errorf("lookup by name: %v", err)
	}
}

// countingBackend counts warm resets, to show a reboot event does not cause
// another reset (a reset raises a reboot event itself: a loop otherwise).
type countingBackend struct {
	*sim.Backend
	resets int
}

func (c *countingBackend) Reset(ctx context.Context, id string) error {
	c.resets++
	return c.Backend.Reset(ctx, id)
}

func TestRebootEventDoesNotResetAgain(t *testing.T) {
	ctx := context.Background()
	be := &countingBackend{Backend: sim.New(1)}
	svc := machine.NewService(be, nil)
	id := be.List()[0].ID
	if err := svc.Reset(ctx, id, machine.ResetOn); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SetBIOSPending(ctx, id, map[string]any{"QuietBoot": true}); err != nil {
		t.Fatal(err)
	}
	if err := svc.HandleReboot(ctx, id); err != nil {
		t.Fatal(err)
	}
	if be.resets != 0 {
		t.Errorf("a reboot event caused %d resets, want 0", be.resets)
	}
	m, _ := svc.Get(id)
	if m.Settings.BIOS["QuietBoot"] != true {
		t.Errorf("pending BIOS not applied by the reboot: %v", m.Settings.BIOS)
	}
}
