package dell

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/bmlab/bmlab/internal/machine"
)

// What an SCP's attributes mean for a machine. vbmcd's iDRAC has three
// kinds of component:
//   - iDRAC.Embedded.1: ServerBoot.1#FirstBootDevice and ServerBoot.1#BootOnce,
//     the boot override (sushy-oem-idrac's set_virtual_boot_device imports
//     FirstBootDevice VCD-DVD or VFDD with BootOnce Enabled); iDRAC
//     attributes take effect at once. Info.1#Product and Info.1#Version are
//     exported, read only.
//   - BIOS.Setup.1-1: the machine's BIOS attributes (machine.BIOSAttributes,
//     the names /Systems/…/Bios shows) and UefiBootSeq, the UEFI boot
//     sequence as the BootOptionReferences /Systems/…/BootOptions shows,
//     comma separated; they take effect at the next boot.
//   - one per NIC, by the Id its EthernetInterface has: LegacyBootProto,
//     read only (PXE when the NIC's PXE option is in the boot order, else
//     NONE), which sushy-oem-idrac's get_pxe_port_macs_bios reads.

// The component FQDDs.
const (
	IDRACFQDD = "iDRAC.Embedded.1"
	BIOSFQDD  = "BIOS.Setup.1-1"
)

// Attribute names.
const (
	attrBootOnce  = "ServerBoot.1#BootOnce"
	attrFirstBoot = "ServerBoot.1#FirstBootDevice"
	attrProduct   = "Info.1#Product"
	attrVersion   = "Info.1#Version"
	attrBootSeq   = "UefiBootSeq"
	attrLegacyPXE = "LegacyBootProto"
)

// Targets are the values ShareParameters.Target takes, each a kind of
// component (sushy-oem-idrac's ExportTarget).
var Targets = []string{"ALL", "IDRAC", "BIOS", "NIC", "RAID"}

// firstBoot maps FirstBootDevice to the override target. VFDD, the
// virtual floppy, is the removable virtual media, a USB stick here.
var firstBoot = map[string]machine.BootSource{
	"Normal":  machine.BootNone,
	"PXE":     machine.BootPxe,
	"HDD":     machine.BootHdd,
	"VCD-DVD": machine.BootCd,
	"VFDD":    machine.BootUsb,
	"BIOS":    machine.BootBiosSetup,
}

// Outcome is what became of one attribute of an import.
type Outcome struct {
	Component, Attribute, Value string
	// Err says why it was not taken; "" when it was.
	Err string
}

// Import maps the components of p that targets name to the machine's
// configuration; nics are the Ids of the machine's EthernetInterfaces.
// Every attribute gets an Outcome; what is refused is left out of the
// configuration, the rest is taken.
func Import(p Profile, targets []string, m *machine.Machine, nics []string) (machine.Configuration, []Outcome) {
	var cfg machine.Configuration
	var out []Outcome
	for _, c := range p.Components {
		if !targeted(kindOf(c.FQDD, nics), targets) {
			continue
		}
		switch {
		case c.FQDD == IDRACFQDD:
			out = append(out, importIDRAC(c, m, &cfg)...)
		case c.FQDD == BIOSFQDD:
			out = append(out, importBIOS(c, m, &cfg)...)
		default:
			reason := "this server has no component " + c.FQDD
			if slices.Contains(nics, c.FQDD) {
				reason = ""
			}
			for _, a := range c.Attributes {
				switch {
				case a.ReadOnly:
				case reason != "":
					out = append(out, Outcome{c.FQDD, a.Name, a.Value, reason})
				case a.Name == attrLegacyPXE:
					out = append(out, Outcome{c.FQDD, a.Name, a.Value, "read only: a NIC boots PXE when its PXE option is in the UEFI boot sequence (" + BIOSFQDD + " " + attrBootSeq + ")"})
				default:
					out = append(out, Outcome{c.FQDD, a.Name, a.Value, "the NIC has no attribute " + a.Name})
				}
			}
		}
	}
	return cfg, out
}

// kindOf is the Target that names a component.
func kindOf(fqdd string, nics []string) string {
	switch {
	case strings.HasPrefix(fqdd, "iDRAC."):
		return "IDRAC"
	case strings.HasPrefix(fqdd, "BIOS."):
		return "BIOS"
	case strings.HasPrefix(fqdd, "NIC.") || slices.Contains(nics, fqdd):
		return "NIC"
	case strings.HasPrefix(fqdd, "RAID."):
		return "RAID"
	}
	return ""
}

func targeted(kind string, targets []string) bool {
	return slices.Contains(targets, "ALL") || slices.Contains(targets, kind)
}

func importIDRAC(c Component, m *machine.Machine, cfg *machine.Configuration) []Outcome {
	var out []Outcome
	var target *machine.BootSource
	var enabled *machine.BootEnabled
	for _, a := range c.Attributes {
		if a.ReadOnly {
			continue
		}
		switch a.Name {
		case attrFirstBoot:
			t, ok := firstBoot[a.Value]
			if !ok {
				out = append(out, Outcome{c.FQDD, a.Name, a.Value, "value not supported; this server boots " + strings.Join(firstBootValues(), ", ")})
				continue
			}
			target = &t
		case attrBootOnce:
			var e machine.BootEnabled
			switch a.Value {
			case "Enabled":
				e = machine.BootOnce
			case "Disabled":
				e = machine.BootContinuous
			default:
				out = append(out, Outcome{c.FQDD, a.Name, a.Value, "value not supported; Enabled or Disabled"})
				continue
			}
			enabled = &e
		case attrProduct, attrVersion:
			out = append(out, Outcome{c.FQDD, a.Name, a.Value, "read only"})
			continue
		default:
			out = append(out, Outcome{c.FQDD, a.Name, a.Value, "this iDRAC has no attribute " + a.Name + " to set"})
			continue
		}
		out = append(out, Outcome{c.FQDD, a.Name, a.Value, ""})
	}
	if target == nil && enabled == nil {
		return out
	}
	p := &machine.BootPatch{Target: target, Enabled: enabled}
	switch {
	case target != nil && *target == machine.BootNone:
		// Normal: no override, whatever BootOnce says.
		p.Enabled = nil
	case target == nil && m.Settings.Boot.Target == machine.BootNone:
		// BootOnce alone, with no device to boot once: nothing to do.
		p.Enabled = nil
	case target != nil && enabled == nil && m.Settings.Boot.Enabled == machine.BootDisabled:
		once := machine.BootOnce
		p.Enabled = &once
	}
	cfg.Boot = p
	return out
}

func firstBootValues() []string {
	out := make([]string, 0, len(firstBoot))
	for k := range firstBoot {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func importBIOS(c Component, m *machine.Machine, cfg *machine.Configuration) []Outcome {
	var out []Outcome
	for _, a := range c.Attributes {
		if a.ReadOnly {
			continue
		}
		if a.Name == attrBootSeq {
			refs := splitList(a.Value)
			if err := checkRefs(m, refs); err != "" {
				out = append(out, Outcome{c.FQDD, a.Name, a.Value, err})
				continue
			}
			cfg.BootOrder = refs
			out = append(out, Outcome{c.FQDD, a.Name, a.Value, ""})
			continue
		}
		v, err := biosValue(a.Name, a.Value)
		if err == nil {
			err = machine.ValidateBIOS(map[string]any{a.Name: v})
		}
		if err != nil {
			out = append(out, Outcome{c.FQDD, a.Name, a.Value, err.Error()})
			continue
		}
		if cfg.BIOS == nil {
			cfg.BIOS = map[string]any{}
		}
		cfg.BIOS[a.Name] = v
		out = append(out, Outcome{c.FQDD, a.Name, a.Value, ""})
	}
	return out
}

// biosValue is a profile's string value as the BIOS attribute's type
// wants it.
func biosValue(name, v string) (any, error) {
	i := slices.IndexFunc(machine.BIOSAttributes, func(a machine.BIOSAttribute) bool { return a.Name == name })
	if i < 0 {
		return v, nil // ValidateBIOS says it is unknown
	}
	switch machine.BIOSAttributes[i].Type {
	case "Integer":
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("BIOS attribute %q: %q is not an integer", name, v)
		}
		return n, nil
	case "Boolean":
		switch strings.ToLower(v) {
		case "true", "enabled":
			return true, nil
		case "false", "disabled":
			return false, nil
		}
		return nil, fmt.Errorf("BIOS attribute %q: %q is not True or False", name, v)
	}
	return v, nil
}

func splitList(v string) []string {
	var out []string
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func checkRefs(m *machine.Machine, refs []string) string {
	if len(refs) == 0 {
		return "the boot sequence is empty"
	}
	for i, r := range refs {
		if _, ok := m.BootOption(r); !ok {
			return fmt.Sprintf("boot option %q does not exist; the options are %s", r, strings.Join(bootRefs(m), ", "))
		}
		if slices.Contains(refs[:i], r) {
			return fmt.Sprintf("boot option %q is listed twice", r)
		}
	}
	return ""
}

func bootRefs(m *machine.Machine) []string {
	var out []string
	for _, o := range m.BootOptions() {
		out = append(out, o.Ref)
	}
	return out
}

// Export is the machine's profile: the components targets name. model,
// tag and firmware are the System's model and service tag and the iDRAC's
// firmware; nics the Ids of the machine's EthernetInterfaces; stamp the
// export's time.
func Export(m *machine.Machine, targets []string, model, tag, firmware, stamp string, nics []string) Profile {
	p := Profile{Model: model, ServiceTag: tag, TimeStamp: stamp}
	if targeted("IDRAC", targets) {
		target, once := "Normal", "Disabled"
		b := m.Settings.Boot
		if b.Enabled != machine.BootDisabled {
			for k, v := range firstBoot {
				if v == b.Target && v != machine.BootNone {
					target = k
				}
			}
			if b.Enabled == machine.BootOnce {
				once = "Enabled"
			}
		}
		p.Components = append(p.Components, Component{FQDD: IDRACFQDD, Attributes: []Attribute{
			{Name: attrProduct, Value: "Integrated Dell Remote Access Controller", ReadOnly: true},
			{Name: attrVersion, Value: firmware, ReadOnly: true},
			{Name: attrBootOnce, Value: once},
			{Name: attrFirstBoot, Value: target},
		}})
	}
	if targeted("BIOS", targets) {
		cur := m.Settings.CurrentBIOS()
		var attrs []Attribute
		for _, a := range machine.BIOSAttributes {
			attrs = append(attrs, Attribute{Name: a.Name, Value: fmt.Sprint(cur[a.Name]), ReadOnly: a.ReadOnly})
		}
		attrs = append(attrs, Attribute{Name: attrBootSeq, Value: strings.Join(m.BootOrder(), ",")})
		p.Components = append(p.Components, Component{FQDD: BIOSFQDD, Attributes: attrs})
	}
	if targeted("NIC", targets) {
		order := m.BootOrder()
		for i, n := range m.NICs {
			if i >= len(nics) {
				break
			}
			proto := "NONE"
			if slices.Contains(order, "Pxe-"+strings.ToLower(strings.ReplaceAll(n.MAC, ":", ""))) {
				proto = "PXE"
			}
			p.Components = append(p.Components, Component{FQDD: nics[i], Attributes: []Attribute{
				{Name: attrLegacyPXE, Value: proto, ReadOnly: true},
			}})
		}
	}
	return p
}
