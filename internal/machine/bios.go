package machine

import (
	"fmt"
	"maps"
	"slices"
	"sort"
)

// BIOSAttribute describes one BIOS setting the emulated firmware offers.
type BIOSAttribute struct {
	Name    string
	Type    string // "Enumeration", "Integer", "Boolean"
	Default any
	Values  []string // for Enumeration
	Min     int      // for Integer
	Max     int
}

// BIOSAttributes is the attribute registry of the emulated firmware: a small
// set shaped like a real server's, enough to exercise pending-until-reset
// semantics and validation.
var BIOSAttributes = []BIOSAttribute{
	{Name: "ProcTurboMode", Type: "Enumeration", Default: "Enabled", Values: []string{"Enabled", "Disabled"}},
	{Name: "ProcVirtualization", Type: "Enumeration", Default: "Enabled", Values: []string{"Enabled", "Disabled"}},
	{Name: "ProcHyperThreading", Type: "Enumeration", Default: "Enabled", Values: []string{"Enabled", "Disabled"}},
	{Name: "SriovGlobalEnable", Type: "Enumeration", Default: "Disabled", Values: []string{"Enabled", "Disabled"}},
	{Name: "SerialConsoleBaudRate", Type: "Enumeration", Default: "115200", Values: []string{"9600", "19200", "38400", "57600", "115200"}},
	{Name: "PxeRetryCount", Type: "Integer", Default: 3, Min: 0, Max: 10},
	{Name: "QuietBoot", Type: "Boolean", Default: false},
}

var biosByName = func() map[string]BIOSAttribute {
	m := map[string]BIOSAttribute{}
	for _, a := range BIOSAttributes {
		m[a.Name] = a
	}
	return m
}()

// DefaultBIOS returns the factory BIOS attributes.
func DefaultBIOS() map[string]any {
	m := map[string]any{}
	for _, a := range BIOSAttributes {
		m[a.Name] = a.Default
	}
	return m
}

// BIOSError says which attribute is wrong and how.
type BIOSError struct {
	Attribute string
	Value     any
	Reason    string // "unknown", "type", "value"
}

func (e *BIOSError) Error() string {
	switch e.Reason {
	case "unknown":
		return fmt.Sprintf("unknown BIOS attribute %q", e.Attribute)
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
// attribute name) is returned as a *BIOSError.
func ValidateBIOS(attrs map[string]any) error {
	names := slices.Collect(maps.Keys(attrs))
	sort.Strings(names)
	for _, n := range names {
		v := attrs[n]
		a, ok := biosByName[n]
		if !ok {
			return &BIOSError{Attribute: n, Value: v, Reason: "unknown"}
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
