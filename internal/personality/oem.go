package personality

import "github.com/bmlab/bmlab/internal/machine"

// The Oem blocks vendors' clients read. Each holds plain values only, or
// action targets the Redfish face serves: no link to a resource vbmcd does
// not have.

type obj = map[string]any

// PostState is HPE's Oem.Hpe.PostState of a machine: PowerOff, InPost while
// the firmware runs (a machine that started less than postFor ago and has not
// booted an OS), FinishedPost after (proliantutils' POST_STATE_MAP).
func PostState(m *machine.Machine, inPost bool) string {
	switch {
	case m.Power == machine.PowerOff:
		return "PowerOff"
	case inPost:
		return "InPost"
	}
	return "FinishedPost"
}

// OEM is what a vendor's BMC adds to the standard resources: the Oem blocks
// its clients read, each written by the vendor's own function (nil: the
// resource has none). It is a field of the vendor's entry, so a vendor's
// blocks are found under its personality, never by a switch on its name.
type OEM struct {
	// System writes the System's block; powerButton is the target of
	// HPE's PowerButton action, inPost says the machine is in POST.
	System func(p *Personality, m *machine.Machine, powerButton string, inPost bool) map[string]any
	// Manager writes the Manager's block.
	Manager func(p *Personality, m *machine.Machine) map[string]any
	// Media writes a virtual media member's block; insert and eject are
	// the targets of the vendor's own actions, which the Redfish face
	// serves as InsertMedia and EjectMedia (HPEOEM).
	Media func(insert, eject string) map[string]any
}

// SystemOem is the System's Oem block; nil for none. powerButton is the
// target of HPE's PowerButton action; inPost says the machine is in POST.
func (p *Personality) SystemOem(m *machine.Machine, powerButton string, inPost bool) obj {
	if p.Oem.System == nil {
		return nil
	}
	return p.Oem.System(p, m, powerButton, inPost)
}

// ManagerOem is the Manager's Oem block; nil for none.
func (p *Personality) ManagerOem(m *machine.Machine) obj {
	if p.Oem.Manager == nil {
		return nil
	}
	return p.Oem.Manager(p, m)
}

// MediaOem is a virtual media member's Oem block; nil for none.
func (p *Personality) MediaOem(insert, eject string) obj {
	if p.Oem.Media == nil {
		return nil
	}
	return p.Oem.Media(insert, eject)
}

// dellOEM is an iDRAC's: Dell's DellOem resources (the system's generation
// and service tag, the iDRAC card).
var dellOEM = OEM{
	System: func(p *Personality, m *machine.Machine, _ string, _ bool) obj {
		return obj{"Dell": obj{
			"@odata.type": "#DellOem.v1_3_0.DellOemResources",
			"DellSystem": obj{
				"@odata.type":       "#DellSystem.v1_4_0.DellSystem",
				"ChassisServiceTag": ServiceTag(m.ID),
				"NodeID":            ServiceTag(m.ID),
				"SystemGeneration":  p.BMCModel,
				"BIOSReleaseDate":   "01/01/2026",
			},
		}}
	},
	Manager: func(*Personality, *machine.Machine) obj {
		return obj{"Dell": obj{
			"@odata.type": "#DellOem.v1_3_0.DellOemResources",
			"DelliDRACCard": obj{
				"@odata.type":             "#DelliDRACCard.v1_1_0.DelliDRACCard",
				"IPMIVersion":             "2.0",
				"LastSystemInventoryTime": "2026-01-01T00:00:00+00:00",
				"LastUpdateTime":          "2026-01-01T00:00:00+00:00",
			},
		}}
	},
}

// hpeOEM is an iLO's.
var hpeOEM = OEM{
	// proliantutils reads Oem.Hpe.PostState, Oem.Hpe.Bios.Current and
	// Oem.Hpe.Bios.UefiClass, and requires Oem.Hpe.Actions.
	System: func(p *Personality, m *machine.Machine, powerButton string, inPost bool) obj {
		return obj{"Hpe": obj{
			"@odata.type": "#HpeComputerSystemExt.v2_11_0.HpeComputerSystemExt",
			"PostState":   PostState(m, inPost),
			"Bios": obj{
				"Current":   obj{"VersionString": p.BIOSVersion},
				"UefiClass": 2,
			},
			"Actions": obj{
				"#HpeComputerSystemExt.PowerButton": obj{
					"target":                           powerButton,
					"PushType@Redfish.AllowableValues": []string{"Press", "PressAndHold"},
				},
			},
		}}
	},
	// proliantutils reads Oem.Hpe.RequiredLoginForiLORBSU and
	// RequireHostAuthentication.
	Manager: func(p *Personality, _ *machine.Machine) obj {
		return obj{"Hpe": obj{
			"@odata.type":               "#HpeiLO.v2_9_0.HpeiLO",
			"RequiredLoginForiLORBSU":   false,
			"RequireHostAuthentication": false,
			"Firmware": obj{"Current": obj{
				"VersionString": p.BMCFirmware,
			}},
		}}
	},
	// The targets of iLO's own insert and eject actions (proliantutils
	// requires them).
	Media: func(insert, eject string) obj {
		return obj{"Hpe": obj{
			"@odata.type": "#HpeiLOVirtualMedia.v2_2_0.HpeiLOVirtualMedia",
			"Actions": obj{
				"#HpeiLOVirtualMedia.InsertVirtualMedia": obj{"target": insert},
				"#HpeiLOVirtualMedia.EjectVirtualMedia":  obj{"target": eject},
			},
		}}
	},
}

// supermicroOEM is a Supermicro's.
var supermicroOEM = OEM{
	System: func(*Personality, *machine.Machine, string, bool) obj {
		return obj{"Supermicro": obj{
			"@odata.type": "#SmcSystemExtensions.v1_0_0.System",
			"NodeManager": obj{"Version": "5.0"},
		}}
	},
}

// HPE's own virtual media action names, served as aliases of the standard
// ones.
const (
	HPEInsertAction = "Oem/Hpe/HpeiLOVirtualMedia.InsertVirtualMedia"
	HPEEjectAction  = "Oem/Hpe/HpeiLOVirtualMedia.EjectVirtualMedia"
	HPEPowerButton  = "Oem/Hpe/HpeComputerSystemExt.PowerButton"
)

// ServiceTag is a Dell-style seven-character service tag from a machine id.
func ServiceTag(id string) string {
	const digits = "0123456789BCDFGHJKLMNPQRSTVWXYZ"
	var h uint64 = 14695981039346656037
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= 1099511628211
	}
	out := make([]byte, 7)
	for i := range out {
		out[i] = digits[h%uint64(len(digits))]
		h /= uint64(len(digits))
	}
	return string(out)
}
