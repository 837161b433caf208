package redfish

import (
	"crypto/sha1"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/personality"
)

// obj is a JSON object as the builders write it; encoding/json sorts its keys,
// which keeps golden files stable.
type obj = map[string]any

// ref is a navigation link.
type ref struct {
	ID string `json:"@odata.id"`
}

// URIs of the service. Every @odata.id comes from these functions.
const (
	rootURI           = "/redfish/v1"
	systemsURI        = rootURI + "/Systems"
	managersURI       = rootURI + "/Managers"
	chassisURI        = rootURI + "/Chassis"
	sessionServiceURI = rootURI + "/SessionService"
	sessionsURI       = sessionServiceURI + "/Sessions"
	accountServiceURI = rootURI + "/AccountService"
	accountsURI       = accountServiceURI + "/Accounts"
	taskServiceURI    = rootURI + "/TaskService"
	tasksURI          = taskServiceURI + "/Tasks"
	registriesURI     = rootURI + "/Registries"
	baseFileURI       = registriesURI + "/" + baseRegistryPrefix
	registryURI       = baseFileURI + "/" + baseRegistryID
	updateFileURI     = registriesURI + "/" + updateRegistryPrefix
	updateRegistryURI = updateFileURI + "/" + updateRegistryID
	biosRegFileURI    = registriesURI + "/" + biosRegistryPrefix
	biosRegistryURI   = biosRegFileURI + "/" + biosRegistryID
	metadataURI       = rootURI + "/$metadata"
	odataURI          = rootURI + "/odata"
)

// BIOS attribute registry of the emulated firmware.
const (
	biosRegistryPrefix = "BmlabBiosAttributeRegistry"
	biosRegistryID     = biosRegistryPrefix + ".1.1.0"
)

func systemURI(id string) string  { return systemsURI + "/" + id }
func managerURI(id string) string { return managersURI + "/" + id }
func chassisOf(id string) string  { return chassisURI + "/" + id }
func resetURI(id string) string   { return systemURI(id) + "/Actions/ComputerSystem.Reset" }

// identity is what the service says about itself and the hardware it
// emulates.
type identity struct {
	ServiceUUID  string
	Manufacturer string
	Model        string
	Firmware     string // the BMC's, and the BIOS' unless BIOSVersion says
	SessionTTL   int    // seconds
	// KVM is how many graphical console sessions the service serves at
	// most (the web console's, WithGraphicalConsole); 0: none.
	KVM int
	// Screen: the machines have a screen the model reads and types on
	// (machine.Service.HasScreen), so each Manager names vbmcd's
	// screenshot, keystroke and serial actions (screen.go).
	Screen bool

	// Set for one machine (Server.idOf): its personality, the Manager's
	// Model and the BIOS version.
	P           *personality.Personality
	BMCModel    string
	BIOSVersion string
	InPost      bool // the machine is in POST (HPE's Oem.Hpe.PostState)
}

func status(state string) obj { return obj{"State": state, "Health": "OK"} }

// collection builds a resource collection.
func collection(uri, odataType, name string, members []string) obj {
	rs := make([]ref, len(members))
	for i, m := range members {
		rs[i] = ref{m}
	}
	return obj{
		"@odata.id":           uri,
		"@odata.type":         "#" + odataType + "." + odataType,
		"Name":                name,
		"Members@odata.count": len(rs),
		"Members":             rs,
	}
}

// serviceRoot builds /redfish/v1/.
func serviceRoot(id identity) obj {
	return obj{
		"@odata.id":      rootURI + "/",
		"@odata.type":    "#ServiceRoot.v1_17_0.ServiceRoot",
		"Id":             "RootService",
		"Name":           "Root Service",
		"RedfishVersion": "1.15.0",
		"UUID":           id.ServiceUUID,
		"Vendor":         id.Manufacturer,
		"Product":        id.Model,
		"Systems":        ref{systemsURI},
		"Managers":       ref{managersURI},
		"Chassis":        ref{chassisURI},
		"SessionService": ref{sessionServiceURI},
		"AccountService": ref{accountServiceURI},
		// The property is Tasks (ServiceRoot v1_0_0); TaskService is its
		// URI segment. sushy and gofish read Tasks.
		"Tasks":         ref{taskServiceURI},
		"EventService":  ref{eventServiceURI},
		"UpdateService": ref{updateServiceURI},
		"Registries":    ref{registriesURI},
		"Links":         obj{"Sessions": ref{sessionsURI}},
		"ProtocolFeaturesSupported": obj{
			"ExcerptQuery":    false,
			"FilterQuery":     false,
			"OnlyMemberQuery": false,
			"SelectQuery":     false,
			"TopSkipQuery":    true,
			"ExpandQuery": obj{
				"ExpandAll": false, "Levels": false, "Links": false, "NoLinks": false,
			},
		},
	}
}

// odataDocument builds the OData service document.
func odataDocument() obj {
	type entry struct {
		Name string `json:"name"`
		Kind string `json:"kind"`
		URL  string `json:"url"`
	}
	single := func(name, u string) entry { return entry{name, "Singleton", u} }
	return obj{
		"@odata.context": metadataURI,
		"value": []entry{
			single("Service", rootURI+"/"),
			single("Systems", systemsURI),
			single("Managers", managersURI),
			single("Chassis", chassisURI),
			single("SessionService", sessionServiceURI),
			single("AccountService", accountServiceURI),
			single("TaskService", taskServiceURI),
			single("EventService", eventServiceURI),
			single("UpdateService", updateServiceURI),
			single("Registries", registriesURI),
		},
	}
}

// powerStatus says Enabled for a running machine and StandbyOffline for an
// off one, as real BMCs do.
func powerStatus(m *machine.Machine) obj {
	st := status("Enabled")
	if m.Power == machine.PowerOff {
		st = status("StandbyOffline")
	}
	var conds []obj
	if m.Unavailable != "" {
		// The host is unreachable: what is shown is the last known state,
		// and changes answer 503 until the host is back.
		st["State"], st["Health"] = "UnavailableOffline", "Warning"
		conds = append(conds, obj{
			"MessageId": baseRegistryID + "." + string(MsgCouldNotEstablishConnection),
			"Message":   m.Unavailable + "; the state shown is the last known one, and changes are refused until the host answers again",
			"Severity":  "Warning",
		})
	}
	if m.PowerFault != "" {
		// An accepted power action failed later: the client learns it here
		// (and in the log), until an action succeeds.
		st["Health"] = "Critical"
		conds = append(conds, obj{
			"MessageId": baseRegistryID + "." + string(MsgOperationFailed),
			"Message":   "The last power action failed: " + m.PowerFault,
			"Severity":  "Critical",
		})
	}
	if conds != nil {
		st["Conditions"] = conds
	}
	return st
}

func indicator(m *machine.Machine) string {
	if m.IndicatorLED {
		return "Lit"
	}
	return "Off"
}

func strs[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

// gib returns memory in GiB, as a fraction below 1 GiB (and wherever it is not
// a whole number).
func gib(bytes int64) float64 { return float64(bytes) / (1 << 30) }

// topology returns sockets, cores per socket and threads per core whose
// product is the machine's vCPU count.
func topology(inv machine.Inventory) (sockets, cores, threads int) {
	if inv.VCPUs <= 0 {
		return 0, 0, 0
	}
	s, c, t := max(inv.Sockets, 1), max(inv.Cores, 1), max(inv.Threads, 1)
	if s*c*t == inv.VCPUs {
		return s, c, t
	}
	return 1, inv.VCPUs, 1
}

// bootModes are the boot modes a machine's firmware offers: UEFI alone on
// an aarch64 machine.
func bootModes(inv machine.Inventory) []string {
	if inv.UEFIOnly() {
		return []string{string(machine.BootModeUEFI)}
	}
	return strs(machine.BootModes)
}

func archOf(inv machine.Inventory) (arch, isa string) {
	switch inv.Arch {
	case "aarch64", "arm64":
		return "ARM", "ARM-A64"
	case "i686", "i386":
		return "x86", "x86"
	default:
		return "x86", "x86-64"
	}
}

// system builds a ComputerSystem.
func system(m *machine.Machine, id identity) obj {
	u := systemURI(m.ID)
	sockets, cores, threads := topology(m.Inventory)
	b := m.Settings.Boot
	target, enabled, mode := b.Target, b.Enabled, b.Mode
	if target == "" {
		target = machine.BootNone
	}
	if enabled == "" {
		enabled = machine.BootDisabled
	}
	if mode == "" {
		mode = m.Mode
	}
	o := obj{
		"@odata.id":               u,
		"@odata.type":             "#ComputerSystem.v1_20_0.ComputerSystem",
		"Id":                      m.ID,
		"Name":                    m.Name,
		"UUID":                    m.ID,
		"SystemType":              "Physical",
		"Manufacturer":            id.Manufacturer,
		"Model":                   id.Model,
		"SerialNumber":            serialOf(m.ID),
		"BiosVersion":             firmwareVersion(m, machine.FirmwareBIOS, id),
		"PowerState":              string(m.Power),
		"Status":                  withRollup(powerStatus(m)),
		"BootProgress":            bootProgress(m),
		"IndicatorLED":            indicator(m),
		"LocationIndicatorActive": m.IndicatorLED,
		"GraphicalConsole":        graphicalConsole(id.KVM),
		"Boot": obj{
			"BootSourceOverrideTarget":                          string(target),
			"BootSourceOverrideTarget@Redfish.AllowableValues":  strs(machine.BootSources),
			"BootSourceOverrideEnabled":                         string(enabled),
			"BootSourceOverrideEnabled@Redfish.AllowableValues": strs(machine.BootEnabledValues),
			"BootSourceOverrideMode":                            string(mode),
			"BootSourceOverrideMode@Redfish.AllowableValues":    bootModes(m.Inventory),
			// What a UefiHttp boot fetches; null when none is set.
			"HttpBootUri": nullable(m.Settings.Boot.HTTPBootURI),
		},
		"ProcessorSummary": obj{
			"Count":                 sockets,
			"CoreCount":             sockets * cores,
			"LogicalProcessorCount": sockets * cores * threads,
			"Model":                 cpuModel,
			"Status":                status("Enabled"),
		},
		"MemorySummary": obj{
			"TotalSystemMemoryGiB": gib(m.MemoryBytes),
			"Status":               status("Enabled"),
		},
		"Processors":         ref{u + "/Processors"},
		"Memory":             ref{u + "/Memory"},
		"EthernetInterfaces": ref{u + "/EthernetInterfaces"},
		"SimpleStorage":      ref{u + "/SimpleStorage"},
		"Storage":            ref{u + "/Storage"},
		"SecureBoot":         ref{u + "/SecureBoot"},
		"Bios":               ref{u + "/Bios"},
		"VirtualMedia":       ref{u + "/VirtualMedia"},
		"PCIeDevices":        pcieDeviceRefs(m),
		"Links": obj{
			"Chassis":   []ref{{chassisOf(m.ID)}},
			"ManagedBy": []ref{{managerURI(m.ID)}},
		},
		"Actions": obj{
			"#ComputerSystem.Reset": obj{
				"target":                            resetURI(m.ID),
				"ResetType@Redfish.AllowableValues": strs(machine.ResetTypes),
			},
		},
	}
	maps.Copy(o["Boot"].(obj), bootOrderProps(m))
	oem := obj{}
	if m.Host != "" {
		// The libvirt host the VM lives on, when vbmcd serves several.
		oem["Bmlab"] = obj{"Host": m.Host}
	}
	if p := id.P; p != nil {
		if !p.MediaUnder(false) {
			delete(o, "VirtualMedia")
		}
		maps.Copy(oem, p.SystemOem(m, u+"/Actions/"+personality.HPEPowerButton, id.InPost))
	}
	if len(oem) > 0 {
		o["Oem"] = oem
	}
	return o
}

const cpuModel = "QEMU Virtual CPU"

// serialOf derives a stable serial number from a UUID.
func serialOf(id string) string {
	return "BMLAB" + strings.ToUpper(strings.ReplaceAll(id, "-", "")[:10])
}

// nameUUID derives a stable UUID (version 5 layout) from a string.
func nameUUID(s string) string {
	h := sha1.Sum([]byte("bmlab-redfish/" + s))
	h[6] = (h[6] & 0x0f) | 0x50
	h[8] = (h[8] & 0x3f) | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// processorIDs lists the processors of a machine: one per socket.
func processorIDs(m *machine.Machine) []string {
	sockets, _, _ := topology(m.Inventory)
	ids := make([]string, sockets)
	for i := range ids {
		ids[i] = fmt.Sprintf("CPU%d", i+1)
	}
	return ids
}

func processor(m *machine.Machine, pid string) obj {
	if !slices.Contains(processorIDs(m), pid) {
		return nil
	}
	_, cores, threads := topology(m.Inventory)
	arch, isa := archOf(m.Inventory)
	return obj{
		"@odata.id":             systemURI(m.ID) + "/Processors/" + pid,
		"@odata.type":           "#Processor.v1_15_0.Processor",
		"Id":                    pid,
		"Name":                  "Processor " + strings.TrimPrefix(pid, "CPU"),
		"Socket":                pid,
		"ProcessorType":         "CPU",
		"ProcessorArchitecture": arch,
		"InstructionSet":        isa,
		"Manufacturer":          "QEMU",
		"Model":                 cpuModel,
		"TotalCores":            cores,
		"TotalEnabledCores":     cores,
		"TotalThreads":          cores * threads,
		"Status":                status("Enabled"),
	}
}

func ids(prefix string, xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = prefix + "/" + x
	}
	return out
}

// memoryIDs lists the memory devices: the VM's RAM as one DIMM.
func memoryIDs(m *machine.Machine) []string {
	if m.MemoryBytes <= 0 {
		return nil
	}
	return []string{"DIMM1"}
}

func memory(m *machine.Machine, mid string) obj {
	if !slices.Contains(memoryIDs(m), mid) {
		return nil
	}
	return obj{
		"@odata.id":        systemURI(m.ID) + "/Memory/" + mid,
		"@odata.type":      "#Memory.v1_17_0.Memory",
		"Id":               mid,
		"Name":             "Memory " + mid,
		"MemoryType":       "DRAM",
		"MemoryDeviceType": "DDR4",
		"CapacityMiB":      m.MemoryBytes >> 20,
		"Status":           status("Enabled"),
	}
}

// nicID is a NIC's resource id: its MAC without separators.
func nicID(n machine.NIC) string {
	return strings.ToLower(strings.ReplaceAll(n.MAC, ":", ""))
}

func nicIDs(m *machine.Machine) []string {
	out := make([]string, len(m.NICs))
	for i, n := range m.NICs {
		out[i] = nicID(n)
	}
	return out
}

func ethernetInterface(m *machine.Machine, nid string) obj {
	for _, n := range m.NICs {
		if nicID(n) != nid {
			continue
		}
		return obj{
			"@odata.id":           systemURI(m.ID) + "/EthernetInterfaces/" + nid,
			"@odata.type":         "#EthernetInterface.v1_9_0.EthernetInterface",
			"Id":                  nid,
			"Name":                "Ethernet Interface " + n.MAC,
			"MACAddress":          strings.ToLower(n.MAC),
			"PermanentMACAddress": strings.ToLower(n.MAC),
			"InterfaceEnabled":    true,
			"LinkStatus":          linkStatus(n),
			"Status":              status("Enabled"),
		}
	}
	return nil
}

// The storage of a machine is one controller ("1") holding every block
// device: disks (files, volumes, block devices) and optical drives.
const storageID = "1"

func diskName(d machine.Disk) string {
	switch d.Device {
	case machine.DeviceCDROM:
		return "Optical drive " + d.ID
	case machine.DeviceFloppy:
		return "Floppy drive " + d.ID
	}
	return "Disk " + d.ID
}

func simpleStorage(m *machine.Machine, sid string) obj {
	if sid != storageID {
		return nil
	}
	devs := make([]obj, 0, len(m.Disks))
	for _, d := range m.Disks {
		devs = append(devs, obj{
			"Name":          diskName(d),
			"CapacityBytes": d.Capacity,
			"Status":        status("Enabled"),
		})
	}
	return obj{
		"@odata.id":   systemURI(m.ID) + "/SimpleStorage/" + sid,
		"@odata.type": "#SimpleStorage.v1_3_1.SimpleStorage",
		"Id":          sid,
		"Name":        "Simple Storage Controller",
		"Devices":     devs,
		"Status":      status("Enabled"),
	}
}

func storage(m *machine.Machine, sid string) obj {
	if sid != storageID {
		return nil
	}
	u := systemURI(m.ID) + "/Storage/" + sid
	drives := []ref{}
	for _, d := range m.Disks {
		if d.Device == machine.DeviceDisk && !machine.IsVolumeDisk(&m.Settings, d) {
			drives = append(drives, ref{u + "/Drives/" + url.PathEscape(d.ID)})
		}
	}
	return obj{
		"@odata.id":          u,
		"@odata.type":        "#Storage.v1_13_0.Storage",
		"Id":                 sid,
		"Name":               "Storage Controller",
		"Drives":             drives,
		"Drives@odata.count": len(drives),
		"Controllers":        ref{u + "/Controllers"},
		"Volumes":            ref{u + "/Volumes"},
		"Status":             status("Enabled"),
		// The same controller embedded, as Storage before v1_15 had it:
		// sushy's storage_controllers (Ironic's RAID interface) reads it.
		"StorageControllers": []obj{{
			"@odata.id":                    u + "#/StorageControllers/" + storageControllerID,
			"MemberId":                     storageControllerID,
			"Name":                         "Virtual Storage Controller",
			"Status":                       status("Enabled"),
			"SupportedControllerProtocols": []string{"PCIe"},
			"SupportedDeviceProtocols":     deviceProtocols(m),
			"SupportedRAIDTypes":           machine.RAIDTypes,
		}},
	}
}

// deviceProtocols are the protocols of a machine's disks.
func deviceProtocols(m *machine.Machine) []string {
	protocols := []string{}
	for _, d := range m.Disks {
		if p := protocolOf(d.Bus); p != "" && d.Device == machine.DeviceDisk && !slices.Contains(protocols, p) {
			protocols = append(protocols, p)
		}
	}
	return protocols
}

// storageControllerID is the one controller of the one storage subsystem:
// the VM's disk buses behind one virtual controller.
const storageControllerID = "0"

func storageController(m *machine.Machine, sid, cid string) obj {
	if sid != storageID || cid != storageControllerID {
		return nil
	}
	return obj{
		"@odata.id":                    systemURI(m.ID) + "/Storage/" + sid + "/Controllers/" + cid,
		"@odata.type":                  "#StorageController.v1_7_0.StorageController",
		"Id":                           cid,
		"Name":                         "Virtual Storage Controller",
		"Status":                       status("Enabled"),
		"SupportedControllerProtocols": []string{"PCIe"},
		"SupportedDeviceProtocols":     deviceProtocols(m),
		"SupportedRAIDTypes":           machine.RAIDTypes,
	}
}

// protocolOf maps a libvirt disk bus to Redfish Protocol.Protocol.
func protocolOf(bus string) string {
	switch bus {
	case "sata", "ide":
		return "SATA"
	case "scsi":
		return "SAS"
	case "nvme":
		return "NVMe"
	case "usb":
		return "USB"
	case "virtio":
		return "PCIe"
	}
	return ""
}

func drive(m *machine.Machine, sid, did string) obj {
	if sid != storageID {
		return nil
	}
	for _, d := range m.Disks {
		// A CD-ROM is the Manager's virtual media, not a storage drive.
		if d.ID != did || d.Device != machine.DeviceDisk || machine.IsVolumeDisk(&m.Settings, d) {
			continue
		}
		o := obj{
			"@odata.id":         systemURI(m.ID) + "/Storage/" + sid + "/Drives/" + url.PathEscape(d.ID),
			"@odata.type":       "#Drive.v1_16_0.Drive",
			"Id":                d.ID,
			"Name":              diskName(d),
			"CapacityBytes":     d.Capacity,
			"WriteCacheEnabled": false,
			"Status":            status("Enabled"),
			"Links":             obj{"Chassis": ref{chassisOf(m.ID)}},
			"MediaType":         "HDD",
		}
		// The guest sees what the definition says of the medium; without a
		// word from it, QEMU presents a rotating disk.
		switch r := d.RotationRate; {
		case r == 1:
			o["MediaType"] = "SSD"
		case r > 1:
			o["RotationSpeedRPM"] = r
		}
		if p := protocolOf(d.Bus); p != "" {
			o["Protocol"] = p
		}
		return o
	}
	return nil
}

func enabledDisabled(on bool) string {
	if on {
		return "Enabled"
	}
	return "Disabled"
}

func attributes(a map[string]any) map[string]any {
	if a == nil {
		return map[string]any{}
	}
	return a
}

func bios(m *machine.Machine) obj {
	u := systemURI(m.ID) + "/Bios"
	return obj{
		"@odata.id":         u,
		"@odata.type":       "#Bios.v1_2_0.Bios",
		"Id":                "BIOS",
		"Name":              "BIOS Configuration Current Settings",
		"AttributeRegistry": biosRegistryID,
		"Attributes":        m.Settings.CurrentBIOS(),
		// ETag is the one the settings object has now: a client that
		// staged changes compares it to see whether they are still pending.
		// Messages stays empty: every staged change that passed the
		// registry's checks applies at the next boot.
		"@Redfish.Settings": obj{
			"@odata.type":         "#Settings.v1_3_5.Settings",
			"SettingsObject":      ref{u + "/Settings"},
			"SupportedApplyTimes": []string{"OnReset"},
			"ETag":                renderJSON(0, biosSettings(m)).etag,
			"Messages":            []obj{},
		},
		"Actions": obj{
			"#Bios.ResetBios": obj{"target": u + "/Actions/Bios.ResetBios"},
		},
	}
}

func biosSettings(m *machine.Machine) obj {
	return obj{
		"@odata.id":         systemURI(m.ID) + "/Bios/Settings",
		"@odata.type":       "#Bios.v1_2_0.Bios",
		"Id":                "Settings",
		"Name":              "BIOS Configuration Pending Settings",
		"AttributeRegistry": biosRegistryID,
		"Attributes":        attributes(m.Settings.BIOSPending),
		"@Redfish.SettingsApplyTime": obj{
			"@odata.type":                       "#Settings.v1_3_5.PreferredApplyTime",
			"ApplyTime":                         "OnReset",
			"ApplyTime@Redfish.AllowableValues": []string{"OnReset"},
		},
	}
}

// manager builds the BMC of one system; it shares the system's id.
func manager(m *machine.Machine, id identity) obj {
	if id.BMCModel == "" {
		id.BMCModel = id.Model + " BMC"
	}
	o := obj{
		"@odata.id":             managerURI(m.ID),
		"@odata.type":           "#Manager.v1_15_0.Manager",
		"Id":                    m.ID,
		"Name":                  "Manager for " + m.Name,
		"ManagerType":           "BMC",
		"UUID":                  nameUUID("manager/" + m.ID),
		"ServiceEntryPointUUID": id.ServiceUUID,
		"Manufacturer":          id.Manufacturer,
		"Model":                 id.BMCModel,
		"FirmwareVersion":       firmwareVersion(m, machine.FirmwareBMC, id),
		"PowerState":            "On",
		"VirtualMedia":          ref{managerURI(m.ID) + "/VirtualMedia"},
		"GraphicalConsole":      graphicalConsole(id.KVM),
		"Status":                status("Enabled"),
		"Links": obj{
			"ManagerForServers": []ref{{systemURI(m.ID)}},
			"ManagerForChassis": []ref{{chassisOf(m.ID)}},
			"ManagerInChassis":  ref{chassisOf(m.ID)},
		},
		"Actions": obj{
			"#Manager.Reset": obj{
				"target":                            managerURI(m.ID) + "/Actions/Manager.Reset",
				"ResetType@Redfish.AllowableValues": managerResetTypes,
			},
		},
	}
	if p := id.P; p != nil {
		if !p.MediaUnder(true) {
			delete(o, "VirtualMedia")
		}
		if oem := p.ManagerOem(m); oem != nil {
			o["Oem"] = oem
		}
		if p.DellOEM {
			dellManager(o, m)
		}
	}
	if id.Screen {
		acts := managerOemActions(m, id.P)
		if dellActs, ok := o["Actions"].(obj)["Oem"].(obj); ok {
			maps.Copy(acts, dellActs)
		}
		o["Actions"].(obj)["Oem"] = acts
	}
	return o
}

// graphicalConsole is the GraphicalConsole of a System and of its Manager:
// the web console's KVM over IP (noVNC in the page), when it serves one.
// The schema puts a host's KVM on the System (ComputerSystem v1.13); the
// BMCs that clients know (iDRAC, iLO, OpenBMC) put it on the Manager, so
// both say it.
func graphicalConsole(max int) obj {
	types := []string{}
	if max > 0 {
		types = []string{"KVMIP"}
	}
	return obj{"ServiceEnabled": max > 0, "MaxConcurrentSessions": max, "ConnectTypesSupported": types}
}

// chassis builds the enclosure of one system; it shares the system's id.
func chassis(m *machine.Machine, id identity) obj {
	return obj{
		"@odata.id":       chassisOf(m.ID),
		"@odata.type":     "#Chassis.v1_21_0.Chassis",
		"Id":              m.ID,
		"Name":            "Chassis for " + m.Name,
		"ChassisType":     "RackMount",
		"Manufacturer":    id.Manufacturer,
		"Model":           id.Model,
		"SerialNumber":    serialOf(m.ID),
		"PowerState":      string(m.Power),
		"IndicatorLED":    indicator(m),
		"Status":          withRollup(powerStatus(m)),
		"UUID":            nameUUID("chassis/" + m.ID),
		"Thermal":         ref{chassisOf(m.ID) + "/Thermal"},
		"Power":           ref{chassisOf(m.ID) + "/Power"},
		"PCIeDevices":     ref{chassisOf(m.ID) + "/PCIeDevices"},
		"NetworkAdapters": ref{networkAdaptersURI(m)},
		"Links": obj{
			"ComputerSystems": []ref{{systemURI(m.ID)}},
			"ManagedBy":       []ref{{managerURI(m.ID)}},
		},
	}
}

func sessionService(id identity) obj {
	return obj{
		"@odata.id":      sessionServiceURI,
		"@odata.type":    "#SessionService.v1_1_8.SessionService",
		"Id":             "SessionService",
		"Name":           "Session Service",
		"ServiceEnabled": true,
		"SessionTimeout": id.SessionTTL,
		"Sessions":       ref{sessionsURI},
		"Status":         status("Enabled"),
	}
}

func sessionResource(sid, user string) obj {
	return obj{
		"@odata.id":   sessionsURI + "/" + sid,
		"@odata.type": "#Session.v1_5_0.Session",
		"Id":          sid,
		"Name":        "User Session",
		"UserName":    user,
	}
}

func taskService() obj {
	return obj{
		"@odata.id":                       taskServiceURI,
		"@odata.type":                     "#TaskService.v1_2_0.TaskService",
		"Id":                              "TaskService",
		"Name":                            "Task Service",
		"ServiceEnabled":                  true,
		"CompletedTaskOverWritePolicy":    "Oldest",
		"LifeCycleEventOnTaskStateChange": false,
		"Tasks":                           ref{tasksURI},
		"Status":                          status("Enabled"),
	}
}

func registryFile(prefix, id, uri string) obj {
	return obj{
		"@odata.id":   registriesURI + "/" + prefix,
		"@odata.type": "#MessageRegistryFile.v1_1_3.MessageRegistryFile",
		"Id":          prefix,
		"Name":        prefix + " Registry File",
		"Registry":    id,
		"Languages":   []string{"en"},
		"Location":    []obj{{"Language": "en", "Uri": uri}},
	}
}

// biosRegistry is the attribute registry of the emulated firmware.
func biosRegistry() obj {
	attrs := make([]obj, 0, len(machine.BIOSAttributes))
	for _, a := range machine.BIOSAttributes {
		o := obj{
			"AttributeName": a.Name,
			"DisplayName":   a.DisplayName,
			"Type":          a.Type,
			"DefaultValue":  a.Default,
			"ReadOnly":      a.ReadOnly,
			"ResetRequired": !a.ReadOnly, // every change waits for the next boot
		}
		if a.HelpText != "" {
			o["HelpText"] = a.HelpText
		}
		switch a.Type {
		case "Enumeration":
			vs := make([]obj, len(a.Values))
			for i, v := range a.Values {
				vs[i] = obj{"ValueName": v, "ValueDisplayName": v}
			}
			o["Value"] = vs
		case "Integer":
			o["LowerBound"], o["UpperBound"] = a.Min, a.Max
		}
		attrs = append(attrs, o)
	}
	return obj{
		"@odata.id":       biosRegistryURI,
		"@odata.type":     "#AttributeRegistry.v1_3_8.AttributeRegistry",
		"Id":              biosRegistryID,
		"Name":            "BIOS Attribute Registry",
		"Language":        "en",
		"OwningEntity":    "bmlab",
		"RegistryVersion": "1.1.0",
		"RegistryEntries": obj{"Attributes": attrs},
	}
}
