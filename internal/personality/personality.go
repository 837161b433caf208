package personality

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/bmlab/bmlab/internal/machine"
)

// Name names a personality; it is what a machine's settings record
// (machine.Settings.Personality) and what vbmcd's --personality takes.
type Name string

// The personalities vbmcd knows.
const (
	Generic Name = "generic"
	IDRAC9  Name = "idrac9"
	IDRAC10 Name = "idrac10"
	ILO6    Name = "ilo6"
	X13     Name = "supermicro-x13"
)

// Placement says where a BMC serves its virtual media.
type Placement uint8

// Where virtual media hangs: under the Manager, under the System, or both.
const (
	UnderManager Placement = 1 << iota
	UnderSystem
)

// Slot is one virtual media member as the vendor names it, and the model's
// drive behind it.
type Slot struct {
	ID         string            // the member's Id, "CD", "1", "CD1"
	Drive      machine.MediaSlot // the machine model's drive
	Name       string
	MediaTypes []string
}

// Personality is how one vendor's BMC looks. Every field says what a client
// reads; Sources names where each fact comes from.
type Personality struct {
	Name Name
	// Manufacturer is the System's, Chassis' and Manager's Manufacturer:
	// Ironic's redfish management picks vendor paths by it
	// (RedfishManagement.detect_vendor reads System.Manufacturer; the
	// redfish-virtual-media boot interface refuses a Dell whose BMC
	// firmware is older than 6.00.00.00).
	Manufacturer string
	Model        string // the System's and Chassis' Model
	BMCModel     string // the Manager's Model
	BMCFirmware  string // the Manager's FirmwareVersion
	// IPMIManufacturer is the manufacturer ID of IPMI's Get Device ID
	// (`ipmitool mc info`): the vendor's IANA private enterprise number
	// (IANA "Private Enterprise Numbers": 674 Dell Inc., 11
	// Hewlett-Packard, which HPE's iLO keeps, 10876 Super Micro
	// Computer); 0 for none.
	IPMIManufacturer uint32
	BIOSVersion      string // the System's BiosVersion

	// SystemID, ManagerID and ChassisID are the ids the vendor's BMC gives
	// its one System, Manager and Chassis, as it serves them at a BMC of
	// its own. A listener that serves many machines names each by its
	// machine id instead, which is unique.
	SystemID, ManagerID, ChassisID string
	// SlashedCollections: at a BMC of its own, the links to the Systems,
	// Managers and Chassis collections end with a slash, as an iLO's URIs
	// do (HPE's iLO 5 adaptation guide: /redfish/v1/x redirects to
	// /redfish/v1/x/). proliantutils joins "1" to the Systems link
	// (urljoin) and needs it.
	SlashedCollections bool

	// Media are the virtual media members, MediaAt where they hang.
	Media   []Slot
	MediaAt Placement

	// Quirks are the misbehaviours this vendor's BMC is known for, on by
	// default for machines of this personality.
	Quirks []Quirk

	// Oem writes the vendor's Oem blocks (oem.go); the zero value: none.
	Oem OEM

	// DellOEM: the BMC serves Dell's OEM resources and actions
	// (internal/personality/dell): the Server Configuration Profile's
	// import and export, the job queue and job service, the Lifecycle
	// Controller's service (Links.Oem.Dell.DellLCService: its status, and
	// the machine's screenshot as its DellLCService.ExportServerScreenShot
	// action, which Dell's scripts, badfish-style tooling and LISA call;
	// without it the screenshot is vbmcd's own Manager action,
	// Bmlab.ExportScreenShot), the iDRAC card's reset.
	DellOEM bool
	// RIBCL: the BMC serves iLO's RIBCL XML interface at /ribcl
	// (internal/personality/hpe), at a BMC of its own.
	RIBCL bool
	// HPEOEM: the BMC serves HPE's OEM (oem.go): the System's
	// Oem.Hpe.PostState, which changes with time alone (InPost for a while
	// after power-on), so the System is rendered afresh on every GET; the
	// virtual media's Oem.Hpe InsertVirtualMedia and EjectVirtualMedia
	// actions and the System's PowerButton, which proliantutils posts to
	// (HPEInsertAction, HPEEjectAction, HPEPowerButton). Other
	// personalities' BMCs have no such actions (404).
	HPEOEM bool
	// VirtualMediaScheme is the scheme of install-config's bmc.address
	// for this vendor's BMC where the lab boots from virtual media (the
	// baremetal-operator's driver for it; "": redfish-virtualmedia, the
	// generic one): idrac-virtualmedia for an iDRAC, Ironic's idrac
	// hardware type.
	VirtualMediaScheme string
	// NetworkBootScheme is the scheme of install-config's bmc.address for
	// this vendor's BMC where the lab boots its nodes from the
	// provisioning network by Redfish (bmc.kind redfish; "": redfish, the
	// generic one): ilo5 for an iLO 6, the baremetal-operator's ilo5
	// driver (Ironic's ilo5 hardware type, network boot by ilo-ipxe).
	// Its address names the BMC alone (ilo5://ADDR), so it is offered at
	// a BMC of its own only (a BMC network), and over HTTPS only.
	NetworkBootScheme string

	// Sources names the public material each fact above comes from.
	Sources []string
}

var (
	cdSlot = func(id string) Slot {
		return Slot{ID: id, Drive: machine.SlotCD, Name: "Virtual CD", MediaTypes: []string{"CD", "DVD"}}
	}
	removableSlot = func(id string) Slot {
		return Slot{ID: id, Drive: machine.SlotRemovable, Name: "Virtual Removable Media", MediaTypes: []string{"USBStick", "Floppy"}}
	}
)

// dellScreenShotSource is where the DellLCService screenshot's shape comes
// from.
const dellScreenShotSource = "dell/iDRAC-Redfish-Scripting 'Redfish Python/ExportServerScreenShotREDFISH.py' v2.0 " +
	"(GET Managers/iDRAC.Embedded.1/Oem/Dell/DellLCService, then POST its DellLCService.ExportServerScreenShot with FileType; " +
	"ServerScreenShotFile, base64 PNG, read from the POST's own 200 or 202 answer); microsoft/lisa's idrac.py and others call the older " +
	"/redfish/v1/Dell/Managers/iDRAC.Embedded.1/DellLCService path; Manager Links.Oem.Dell.DellLCService as the dellemc.openmanage modules read it"

// idracVirtualMedia is the baremetal-operator's bmc.address scheme for an
// iDRAC booted from virtual media (pkg/hardwareutils/bmc/idrac_virtualmedia.go
// registers "idrac-virtualmedia"; internal/ocp.BMCIDRACVirtualMedia).
const idracVirtualMedia = "idrac-virtualmedia"

// iloNetworkBoot is the baremetal-operator's bmc.address scheme for an
// iLO 5 or 6 booted from the provisioning network
// (pkg/hardwareutils/bmc/ilo5.go registers "ilo5", https only: hardware
// type ilo5, boot interface ilo-ipxe, RAID interface ilo5, the rest the
// type's defaults, RequiresProvisioningNetwork; internal/ocp.BMCILO5).
const iloNetworkBoot = "ilo5"

// all lists the package's own personalities, generic first; Register adds
// others after them (list).
var all = []*Personality{
	{
		Name:         Generic,
		Manufacturer: "bmlab",
		Model:        "bmlab virtual server",
		BMCModel:     "bmlab virtual server BMC",
		BMCFirmware:  "1.0.0",
		BIOSVersion:  "1.0.0",
		Media:        []Slot{cdSlot(string(machine.SlotCD)), removableSlot(string(machine.SlotRemovable))},
		MediaAt:      UnderManager | UnderSystem,
	},
	{
		Name: IDRAC9,
		// A 16th-generation PowerEdge with iDRAC 9 firmware 7.x.
		Manufacturer:     "Dell Inc.",
		Model:            "PowerEdge R660",
		BMCModel:         "16G Monolithic",
		BMCFirmware:      "7.10.70.00",
		IPMIManufacturer: 674,
		BIOSVersion:      "2.3.5",
		SystemID:         "System.Embedded.1",
		ManagerID:        "iDRAC.Embedded.1",
		ChassisID:        "System.Embedded.1",
		// iDRAC 9 serves its members CD and RemovableDisk under the
		// Manager, where Ironic's idrac-redfish-virtual-media and sushy
		// 4.x look.
		Media:              []Slot{cdSlot("CD"), removableSlot("RemovableDisk")},
		MediaAt:            UnderManager,
		Oem:                dellOEM,
		DellOEM:            true,
		VirtualMediaScheme: idracVirtualMedia,
		Sources: []string{
			"Dell iDRAC9 Redfish API Guide: /redfish/v1/Managers/iDRAC.Embedded.1/VirtualMedia/CD and RemovableDisk, System.Embedded.1",
			"dell/iDRAC-Redfish-Scripting issue 24 (InsertMedia at Managers/iDRAC.Embedded.1/VirtualMedia/CD)",
			"Ironic 21.4 redfish/boot.py _validate_vendor: 'Dell' and BMC firmware >= 6.00.00.00",
			"sushy-oem-idrac 5.0.0 resources/manager, Ironic 29 drivers/modules/drac: the Dell OEM actions and links (internal/personality/dell)",
			dellScreenShotSource,
		},
	},
	{
		Name: IDRAC10,
		// A 17th-generation PowerEdge with iDRAC 10 firmware 1.x.
		Manufacturer:     "Dell Inc.",
		Model:            "PowerEdge R770",
		BMCModel:         "17G Monolithic",
		BMCFirmware:      "1.20.25.00",
		IPMIManufacturer: 674,
		BIOSVersion:      "1.2.1",
		SystemID:         "System.Embedded.1",
		ManagerID:        "iDRAC.Embedded.1",
		ChassisID:        "System.Embedded.1",
		// iDRAC 10 serves virtual media under the System only, members 1
		// and 2 (the DMTF layout of VirtualMedia under ComputerSystem).
		Media:              []Slot{cdSlot("1"), removableSlot("2")},
		MediaAt:            UnderSystem,
		Quirks:             []Quirk{PowerOnConflict, MediaSlotOne, SCPTargetList},
		Oem:                dellOEM,
		DellOEM:            true,
		VirtualMediaScheme: idracVirtualMedia,
		Sources: []string{
			"Dell iDRAC10 Redfish API Guide: /redfish/v1/Systems/System.Embedded.1/VirtualMedia/1",
			"karmab/kcli 5a465493 (iDRAC 9/10: no Inserted in InsertMedia, NFS fallback at the Manager)",
			"Ironic bug 2162995 (iDRAC10: 409 to On for a while after a power-off)",
			"quadsproject/badfish issue 578 (iDRAC 10 serves no /redfish/v1/Dell namespace); redhat-performance/jetlag PR 878 (SCP Target [\"ALL\"])",
			dellScreenShotSource,
		},
	},
	{
		Name:             ILO6,
		Manufacturer:     "HPE",
		Model:            "ProLiant DL360 Gen11",
		BMCModel:         "iLO 6",
		BMCFirmware:      "iLO 6 v1.59",
		IPMIManufacturer: 11,
		BIOSVersion:      "U54 v2.16 (03/01/2024)",
		SystemID:         "1",
		ManagerID:        "1",
		ChassisID:        "1",
		// iLO 5 and 6 end their URIs with a slash.
		SlashedCollections: true,
		// iLO: member 1 is the floppy / USB stick, member 2 the CD/DVD,
		// under the Manager.
		Media:             []Slot{removableSlot("1"), cdSlot("2")},
		MediaAt:           UnderManager,
		Quirks:            []Quirk{RefuseInPost},
		Oem:               hpeOEM,
		RIBCL:             true,
		HPEOEM:            true,
		NetworkBootScheme: iloNetworkBoot,
		Sources: []string{
			"HPE iLO 6 Redfish reference: /redfish/v1/Systems/1, /Managers/1/VirtualMedia/1 (Floppy, USBStick) and /2 (CD, DVD)",
			"proliantutils 2.14 (Debian) redfish/resources/system/system.py: Oem.Hpe.PostState, Oem.Hpe.Bios; manager/virtual_media.py: Oem.Hpe.Actions #HpeiLOVirtualMedia.InsertVirtualMedia",
			"Ironic bug 2136275 (iLO refuses changes while the server is in POST)",
			"HPE iLO 5 adaptation guide (servermanagementportal.ext.hpe.com, ilo5_adaptation): /redfish/v1/x redirects to /redfish/v1/x/",
			"proliantutils 2.16.3 ilo/client.py: a model without Gen10 is driven over RIBCL (internal/personality/hpe)",
			"metal3-io/baremetal-operator pkg/hardwareutils/bmc/ilo5.go: ilo5://HOST[:PORT] (https), driver ilo5, boot ilo-ipxe, raid ilo5, needs a provisioning network",
		},
	},
	{
		Name:             X13,
		Manufacturer:     "Supermicro",
		Model:            "SYS-221H-TNR",
		BMCModel:         "X13DEM",
		BMCFirmware:      "01.03.10",
		IPMIManufacturer: 10876,
		BIOSVersion:      "2.1",
		SystemID:         "1",
		ManagerID:        "1",
		ChassisID:        "1",
		// Supermicro: one member CD1 under the Manager.
		Media:   []Slot{cdSlot("CD1")},
		MediaAt: UnderManager,
		Quirks:  []Quirk{StaleInserted},
		Oem:     supermicroOEM,
		Sources: []string{
			"Supermicro Redfish User Guide 4.0, Virtual Media Management: /redfish/v1/Managers/1/VirtualMedia/CD1",
			"quadsproject/badfish PR 126 (a Supermicro's member CD1)",
			"ansible-collections/community.general issue 6969, PR 12537 (Supermicro keeps Image and ImageName after an eject)",
			"Ironic 21.4 redfish/management.py: BootSourceOverrideEnabled always sent to a Supermicro (story 2008547)",
		},
	},
}

// The list as the faces read it: all, then those Register added. Register
// writes a new list (copy on write, one writer at a time), so a lookup on
// every request takes no lock.
var (
	registerMu sync.Mutex
	current    atomic.Pointer[[]*Personality]
)

// list is the list as it is now.
func list() []*Personality {
	if l := current.Load(); l != nil {
		return *l
	}
	return all
}

// validName is what a personality's name may be: it is typed in lab files
// and on vbmcd's command line.
var validName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

// Register adds p to the personalities every face and check reads
// (Lookup, Names), after the package's own: a vendor declared outside this
// file (a test's, or one a build adds in an init function). It refuses
// nil, a name that is taken or that a lab file could not spell (1 to 32
// lower-case letters, digits and dashes, a letter first), and a
// personality that is not whole (whole). Register it before a face serves
// it; it is safe beside Lookup and Names.
func Register(p *Personality) error {
	if p == nil {
		return fmt.Errorf("register a personality: nil")
	}
	if !validName.MatchString(string(p.Name)) {
		return fmt.Errorf("register personality %q: a name is 1 to 32 lower-case letters, digits and dashes, starting with a letter", p.Name)
	}
	registerMu.Lock()
	defer registerMu.Unlock()
	l := list()
	if slices.ContainsFunc(l, func(q *Personality) bool { return q.Name == p.Name }) {
		return fmt.Errorf("register personality %q: the name is taken", p.Name)
	}
	if err := p.whole(); err != nil {
		return fmt.Errorf("register personality %q: %w", p.Name, err)
	}
	l = append(slices.Clip(l), p)
	current.Store(&l)
	return nil
}

// whole reports what a vendor's personality lacks: its vendor's strings,
// where its media hangs, a member behind the model's CD drive, its own
// ids (generic's are the machine's), its sources, known quirks.
func (p *Personality) whole() error {
	switch {
	case p.Manufacturer == "" || p.Model == "" || p.BMCModel == "" || p.BMCFirmware == "" || p.BIOSVersion == "":
		return fmt.Errorf("a vendor's strings are missing: Manufacturer, Model, BMCModel, BMCFirmware and BIOSVersion are all needed")
	case p.MediaAt == 0:
		return fmt.Errorf("no media placement: MediaAt is UnderManager, UnderSystem or both")
	case (p.SystemID == "" || p.ManagerID == "" || p.ChassisID == "") != p.Generic():
		return fmt.Errorf("ids %q %q %q: SystemID, ManagerID and ChassisID are a vendor's own (generic has none)", p.SystemID, p.ManagerID, p.ChassisID)
	case !p.Generic() && len(p.Sources) == 0:
		return fmt.Errorf("no sources: Sources names the public material its facts come from")
	}
	if _, ok := p.MemberOf(machine.SlotCD); !ok {
		return fmt.Errorf("no virtual media member behind the CD drive (Media)")
	}
	for _, q := range p.Quirks {
		if _, err := ParseQuirks(string(q)); err != nil {
			return err
		}
	}
	return nil
}

// Names lists the personalities' names, generic first.
func Names() []string {
	l := list()
	out := make([]string, len(l))
	for i, p := range l {
		out[i] = string(p.Name)
	}
	return out
}

// Lookup returns the personality named name ("" is generic).
func Lookup(name string) (*Personality, error) {
	if name == "" {
		return Default(), nil
	}
	l := list()
	i := slices.IndexFunc(l, func(p *Personality) bool { return string(p.Name) == name })
	if i < 0 {
		return nil, fmt.Errorf("personality %q: want one of %s", name, strings.Join(Names(), ", "))
	}
	return l[i], nil
}

// Default is the generic personality, always the list's first.
func Default() *Personality { return all[0] }

// MediaUnder reports whether members hang under the Manager (manager true)
// or the System.
func (p *Personality) MediaUnder(manager bool) bool {
	if manager {
		return p.MediaAt&UnderManager != 0
	}
	return p.MediaAt&UnderSystem != 0
}

// Member finds the member with the vendor's id.
func (p *Personality) Member(id string) (Slot, bool) {
	i := slices.IndexFunc(p.Media, func(s Slot) bool { return s.ID == id })
	if i < 0 {
		return Slot{}, false
	}
	return p.Media[i], true
}

// MemberOf finds the member behind the model's drive.
func (p *Personality) MemberOf(d machine.MediaSlot) (Slot, bool) {
	i := slices.IndexFunc(p.Media, func(s Slot) bool { return s.Drive == d })
	if i < 0 {
		return Slot{}, false
	}
	return p.Media[i], true
}

// Generic reports whether p is the generic personality.
func (p *Personality) Generic() bool { return p.Name == Generic }
