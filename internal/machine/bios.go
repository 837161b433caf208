package machine

import (
	"fmt"
	"maps"
	"slices"
	"sort"
)

// BIOSAttribute describes one BIOS setting the emulated firmware offers.
type BIOSAttribute struct {
	Name        string
	DisplayName string
	HelpText    string
	Type        string // "Enumeration", "Integer", "Boolean"
	Default     any
	Values      []string // for Enumeration
	Min         int      // for Integer
	Max         int
	// ReadOnly attributes describe the machine and cannot be set.
	ReadOnly bool
}

// BIOS attributes that act on the machine: they are not kept in the BIOS
// map but read from, and at a boot written to, the machine's settings.
const (
	// BIOSBootMode is the firmware the machine boots with: Uefi or Bios
	// (Settings.Boot.Mode).
	BIOSBootMode = "BootMode"
	// BIOSSecureBoot turns UEFI secure boot on or off (Settings.SecureBoot).
	BIOSSecureBoot = "SecureBoot"
)

// BIOSAttributes is the attribute registry of the emulated firmware: a small
// set shaped like a real server's. BootMode and SecureBoot switch the VM's
// firmware at the next boot; TpmSecurity is read-only (the VM has no TPM);
// the others are kept and shown, and mean nothing to the VM.
var BIOSAttributes = []BIOSAttribute{
	{Name: BIOSBootMode, DisplayName: "Boot Mode", Type: "Enumeration", Default: "Uefi", Values: []string{"Uefi", "Bios"},
		HelpText: "Firmware the system boots with: UEFI (OVMF) or legacy BIOS (SeaBIOS)."},
	{Name: BIOSSecureBoot, DisplayName: "Secure Boot", Type: "Enumeration", Default: "Disabled", Values: []string{"Enabled", "Disabled"},
		HelpText: "UEFI secure boot with the default keys enrolled; needs BootMode Uefi."},
	{Name: "ProcTurboMode", DisplayName: "Turbo Mode", Type: "Enumeration", Default: "Enabled", Values: []string{"Enabled", "Disabled"}},
	{Name: "ProcVirtualization", DisplayName: "Virtualization Technology", Type: "Enumeration", Default: "Enabled", Values: []string{"Enabled", "Disabled"}},
	{Name: "ProcHyperThreading", DisplayName: "Logical Processor", Type: "Enumeration", Default: "Enabled", Values: []string{"Enabled", "Disabled"}},
	{Name: "SriovGlobalEnable", DisplayName: "SR-IOV Global Enable", Type: "Enumeration", Default: "Disabled", Values: []string{"Enabled", "Disabled"}},
	{Name: "SerialConsoleBaudRate", DisplayName: "Serial Console Baud Rate", Type: "Enumeration", Default: "115200", Values: []string{"9600", "19200", "38400", "57600", "115200"}},
	{Name: "PxeRetryCount", DisplayName: "PXE Retry Count", Type: "Integer", Default: 3, Min: 0, Max: 10},
	{Name: "QuietBoot", DisplayName: "Quiet Boot", Type: "Boolean", Default: false},
	{Name: "TpmSecurity", DisplayName: "TPM Security", Type: "Enumeration", Default: "Off", Values: []string{"Off"}, ReadOnly: true,
		HelpText: "The virtual machine has no TPM."},
}

var biosByName = func() map[string]BIOSAttribute {
	m := map[string]BIOSAttribute{}
	for _, a := range BIOSAttributes {
		m[a.Name] = a
	}
	return m
}()

// live reports whether attribute name mirrors a machine setting.
func live(name string) bool { return name == BIOSBootMode || name == BIOSSecureBoot }

// DefaultBIOS returns the factory BIOS attributes a machine keeps in its
// BIOS map: all but the ones that mirror its settings (BootMode,
// SecureBoot).
func DefaultBIOS() map[string]any {
	m := map[string]any{}
	for _, a := range BIOSAttributes {
		if !live(a.Name) {
			m[a.Name] = a.Default
		}
	}
	return m
}

// factoryBIOS returns what Bios.ResetBios stages: every writable attribute
// at its default, BootMode and SecureBoot included.
func factoryBIOS() map[string]any {
	m := map[string]any{}
	for _, a := range BIOSAttributes {
		if !a.ReadOnly {
			m[a.Name] = a.Default
		}
	}
	return m
}

// biosMode is the BootMode attribute's value for a firmware mode.
func biosMode(m BootMode) string {
	if m == BootModeLegacy {
		return "Bios"
	}
	return "Uefi"
}

func enabled(on bool) string {
	if on {
		return "Enabled"
	}
	return "Disabled"
}

// CurrentBIOS returns the BIOS attributes in effect: the kept ones, the
// factory value of any the machine has never stored (a domain whose BIOS
// was stored before the registry had it), and the ones read from the
// settings (BootMode, SecureBoot).
func (s Settings) CurrentBIOS() map[string]any {
	m := DefaultBIOS()
	maps.Copy(m, s.BIOS)
	m[BIOSBootMode] = biosMode(s.Boot.Mode)
	m[BIOSSecureBoot] = enabled(s.SecureBoot)
	return m
}

// applyBIOS makes attrs current in st: BootMode and SecureBoot change the
// machine's settings, the others are kept in its BIOS map.
func applyBIOS(st *Settings, attrs map[string]any) {
	if st.BIOS == nil {
		st.BIOS = map[string]any{}
	}
	for k, v := range attrs {
		switch k {
		case BIOSBootMode:
			st.Boot.Mode = BootModeUEFI
			if v == "Bios" {
				st.Boot.Mode = BootModeLegacy
			}
		case BIOSSecureBoot:
			st.SecureBoot = v == "Enabled"
		default:
			st.BIOS[k] = v
		}
	}
}

// BIOSError says which attribute is wrong and how.
type BIOSError struct {
	Attribute string
	Value     any
	Reason    string // "unknown", "type", "value", "readonly", "conflict", "uefi-only"
}

func (e *BIOSError) Error() string {
	switch e.Reason {
	case "unknown":
		return fmt.Sprintf("unknown BIOS attribute %q", e.Attribute)
	case "readonly":
		return fmt.Sprintf("BIOS attribute %q is read-only", e.Attribute)
	case "conflict":
		return fmt.Sprintf("BIOS attribute %q: %v needs %s Uefi", e.Attribute, e.Value, BIOSBootMode)
	case "uefi-only":
		return fmt.Sprintf("BIOS attribute %q: %v is not offered: this machine's firmware is UEFI only (aarch64), it has no legacy BIOS", e.Attribute, e.Value)
	case "type":
		return fmt.Sprintf("BIOS attribute %q: value %v has the wrong type (want %s)", e.Attribute, e.Value, biosByName[e.Attribute].Type)
	default:
		a := biosByName[e.Attribute]
		if a.Type == "Integer" {
			return fmt.Sprintf("BIOS attribute %q: value %v is outside %d..%d", e.Attribute, e.Value, a.Min, a.Max)
		}
		return fmt.Sprintf("BIOS attribute %q: value %v is not one of %v", e.Attribute, e.Value, a.Values)
	}
}

// Unwrap makes a BIOSError an ErrInvalid.
func (e *BIOSError) Unwrap() error { return ErrInvalid }

// ValidateBIOS checks attrs against the registry; the first problem (by
// attribute name) is returned as a *BIOSError. Read-only attributes cannot
// be set.
func ValidateBIOS(attrs map[string]any) error {
	names := slices.Collect(maps.Keys(attrs))
	sort.Strings(names)
	for _, n := range names {
		v := attrs[n]
		a, ok := biosByName[n]
		if !ok {
			return &BIOSError{Attribute: n, Value: v, Reason: "unknown"}
		}
		if a.ReadOnly {
			return &BIOSError{Attribute: n, Value: v, Reason: "readonly"}
		}
		switch a.Type {
		case "Enumeration":
			s, ok := v.(string)
			if !ok {
				return &BIOSError{Attribute: n, Value: v, Reason: "type"}
			}
			if !slices.Contains(a.Values, s) {
				return &BIOSError{Attribute: n, Value: v, Reason: "value"}
			}
		case "Integer":
			f, ok := number(v)
			if !ok || f != float64(int(f)) {
				return &BIOSError{Attribute: n, Value: v, Reason: "type"}
			}
			if int(f) < a.Min || int(f) > a.Max {
				return &BIOSError{Attribute: n, Value: v, Reason: "value"}
			}
			attrs[n] = int(f)
		case "Boolean":
			if _, ok := v.(bool); !ok {
				return &BIOSError{Attribute: n, Value: v, Reason: "type"}
			}
		}
	}
	return nil
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	}
	return 0, false
}

// DefaultSettings returns the settings of a machine the BMC has not seen
// before: no override, the firmware it has, factory BIOS.
func DefaultSettings(mode BootMode, secure bool) Settings {
	if mode == "" {
		mode = BootModeLegacy
	}
	return Settings{
		Boot:       Boot{Target: BootNone, Enabled: BootDisabled, Mode: mode},
		SecureBoot: secure,
		BIOS:       DefaultBIOS(),
	}
}

// checkBIOSFirmware refuses pending BIOS settings that, once applied, would
// ask for secure boot on legacy firmware.
func checkBIOSFirmware(st Settings) error {
	after := st.Clone()
	applyBIOS(&after, st.BIOSPending)
	if after.SecureBoot && after.Boot.Mode == BootModeLegacy {
		return &BIOSError{Attribute: BIOSSecureBoot, Value: "Enabled", Reason: "conflict"}
	}
	return nil
}
