package machine

import (
	"errors"
	"fmt"
	"maps"
	"slices"
)

// PowerState is the power state of a machine, in Redfish's words.
type PowerState string

// Power states (Redfish Resource.PowerState).
const (
	PowerOn          PowerState = "On"
	PowerOff         PowerState = "Off"
	PowerPoweringOn  PowerState = "PoweringOn"
	PowerPoweringOff PowerState = "PoweringOff"
)

// ResetType is a power action, in Redfish's words; IPMI chassis control maps
// onto the same values.
type ResetType string

// Reset types (Redfish Resource.ResetType).
const (
	ResetOn               ResetType = "On"
	ResetForceOff         ResetType = "ForceOff"
	ResetGracefulShutdown ResetType = "GracefulShutdown"
	ResetGracefulRestart  ResetType = "GracefulRestart"
	ResetForceRestart     ResetType = "ForceRestart"
	ResetNmi              ResetType = "Nmi"
	ResetForceOn          ResetType = "ForceOn"
	ResetPushPowerButton  ResetType = "PushPowerButton"
	ResetPowerCycle       ResetType = "PowerCycle"
)

// ResetTypes lists every supported reset type, in the order Redfish shows them.
var ResetTypes = []ResetType{
	ResetOn, ResetForceOff, ResetGracefulShutdown, ResetGracefulRestart,
	ResetForceRestart, ResetNmi, ResetForceOn, ResetPushPowerButton, ResetPowerCycle,
}

// BootSource is a boot override target.
type BootSource string

// Boot sources (Redfish ComputerSystem.BootSource).
const (
	BootNone      BootSource = "None"
	BootPxe       BootSource = "Pxe"
	BootHdd       BootSource = "Hdd"
	BootCd        BootSource = "Cd"
	BootBiosSetup BootSource = "BiosSetup"
	BootUefiHttp  BootSource = "UefiHttp"
	BootUsb       BootSource = "Usb"
	// BootUefiBootNext boots the boot option Boot.BootNext names (see
	// bootorder.go).
	BootUefiBootNext BootSource = "UefiBootNext"
	// BootUsbCd boots a USB CD: the virtual CD, as BMCs that name their
	// virtual media so expect.
	BootUsbCd BootSource = "UsbCd"
)

// BootSources lists the supported override targets.
var BootSources = []BootSource{BootNone, BootPxe, BootHdd, BootCd, BootBiosSetup, BootUefiHttp, BootUsb, BootUefiBootNext, BootUsbCd}

// BootEnabled says how long a boot override lasts.
type BootEnabled string

// Override lifetimes (Redfish ComputerSystem.BootSourceOverrideEnabled).
const (
	BootDisabled   BootEnabled = "Disabled"
	BootOnce       BootEnabled = "Once"
	BootContinuous BootEnabled = "Continuous"
)

// BootEnabledValues lists the override lifetimes.
var BootEnabledValues = []BootEnabled{BootDisabled, BootOnce, BootContinuous}

// BootMode is the firmware a machine boots with.
type BootMode string

// Firmware modes (Redfish ComputerSystem.BootSourceOverrideMode).
const (
	BootModeUEFI   BootMode = "UEFI"
	BootModeLegacy BootMode = "Legacy"
)

// BootModes lists the firmware modes.
var BootModes = []BootMode{BootModeUEFI, BootModeLegacy}

// Boot is the boot override a BMC holds.
type Boot struct {
	Target  BootSource
	Enabled BootEnabled
	Mode    BootMode
	// HTTPBootURI is the image a UefiHttp boot fetches (Redfish
	// Boot.HttpBootUri): an ISO or a UEFI application at an http(s) URL.
	HTTPBootURI string
	// BootNext is the boot option (a BootOptionReference) an UefiBootNext
	// override boots; "" when none.
	BootNext string
}

// Effective reports the device the next boot uses first: the override target
// when an override is active, else None (the machine's own order).
func (b Boot) Effective() BootSource {
	if b.Enabled == BootDisabled || b.Target == "" {
		return BootNone
	}
	return b.Target
}

// Credential is one user of a BMC. The password is kept as given: IPMI's RAKP
// needs it as a key, so a hash would not do.
type Credential struct {
	Username string
	Password string
}

// IPMIEndpoint is where a machine's IPMI BMC listens.
type IPMIEndpoint struct {
	Address string // IP to bind; empty means all
	Port    int
}

// Settings is the state a BMC holds beyond what the hypervisor knows. Backends
// store it with the machine (libvirt: the domain's <metadata>) so a restarted
// or second daemon sees the same state.
type Settings struct {
	Boot Boot
	// BootOrder is the persistent boot order as BootOptionReferences (see
	// bootorder.go); none means the machine's own order.
	BootOrder []string
	// SecureBoot is the requested secure boot state, effective at the next start.
	SecureBoot bool
	// DeletedKeys are the secure boot key databases emptied since the
	// factory keys, in KeyDatabases order; none means the factory keys.
	// Like SecureBoot, they apply at the next start.
	DeletedKeys []KeyDatabase
	// BIOS holds the current BIOS attributes; BIOSPending the ones that apply
	// at the next reset.
	BIOS        map[string]any
	BIOSPending map[string]any
	// Credentials, when set, are this system's own users; they give access to
	// this system only.
	Credentials []Credential
	// IPMI, when set, is this machine's IPMI endpoint.
	IPMI *IPMIEndpoint
	// BMCAddress, when set, is the address of this machine's own BMC
	// (vbmcd --bmc-addresses): a Redfish listener that serves this
	// machine alone, and its IPMI BMC unless IPMI names another address.
	BMCAddress string
	// Media holds per-member virtual media settings and where the inserted
	// images came from; what is inserted derives from the drives.
	Media []MediaSettings
	// Volumes are the RAID volumes made over the machine's drives.
	Volumes []Volume
	// Firmware holds the versions of the components that were updated
	// (FirmwareVersion gives the factory one of the others);
	// FirmwarePending the BIOS and NIC versions that apply at the next
	// reset.
	Firmware        map[FirmwareComponent]string
	FirmwarePending map[FirmwareComponent]string
	// Clock is the BMC's clock setting (clock.go).
	Clock Clock
	// Personality names the vendor BMC this machine's BMC looks like
	// (internal/personality); "" is the daemon's default. Quirks are its
	// switches of vendor misbehaviours, "name" on and "-name" off, comma
	// separated; the personality's own are on unless turned off. The model
	// keeps them only: the faces read them.
	Personality string
	Quirks      string
}

// Clone returns a deep copy.
func (s Settings) Clone() Settings {
	c := s
	c.BIOS = maps.Clone(s.BIOS)
	c.BIOSPending = maps.Clone(s.BIOSPending)
	c.Firmware = maps.Clone(s.Firmware)
	c.FirmwarePending = maps.Clone(s.FirmwarePending)
	c.Credentials = slices.Clone(s.Credentials)
	c.BootOrder = slices.Clone(s.BootOrder)
	c.DeletedKeys = slices.Clone(s.DeletedKeys)
	if s.IPMI != nil {
		ep := *s.IPMI
		c.IPMI = &ep
	}
	if s.Volumes != nil {
		c.Volumes = make([]Volume, len(s.Volumes))
		for i, v := range s.Volumes {
			v.Drives = slices.Clone(v.Drives)
			c.Volumes[i] = v
		}
	}
	if s.Media != nil {
		c.Media = make([]MediaSettings, len(s.Media))
		for i, ms := range s.Media {
			c.Media[i] = ms.clone()
		}
	}
	return c
}

// NIC is a network interface.
type NIC struct {
	MAC     string
	Network string // the libvirt network or bridge it is attached to
	Model   string
	// PCI is the address of the NIC's PCI device ("" when it has none).
	PCI string
	// LinkDown says the link is down (libvirt <link state='down'/>).
	LinkDown bool
	// LLDP is what the switch the NIC is plugged into would announce
	// (lldp.go); nil when the backend sees no switch (the machine is
	// off, or the NIC is on no bridge).
	LLDP *LLDP
}

// PCIDevice is a device function on the machine's PCI (PCI Express) bus.
type PCIDevice struct {
	// Address is domain:bus:slot.function in hex, as lspci -D prints it:
	// 0000:01:00.0.
	Address string
	// Class is the device class in Redfish's terms (PCIeFunction
	// DeviceClass): NetworkController, MassStorageController, ...
	Class              string
	VendorID, DeviceID uint16
	Vendor, Name       string
}

// DiskDevice is the kind of a block device.
type DiskDevice string

// Block device kinds.
const (
	DeviceDisk   DiskDevice = "disk"
	DeviceCDROM  DiskDevice = "cdrom"
	DeviceFloppy DiskDevice = "floppy"
)

// Disk is a block device of the machine.
type Disk struct {
	ID       string // stable within the machine: the target device name (sda, vdb)
	Device   DiskDevice
	Bus      string
	Source   string // file, block device, volume or URL; empty for an empty drive
	Capacity int64  // bytes; 0 when unknown or empty
	ReadOnly bool
	// RotationRate is what the guest is told of the medium (libvirt
	// <target rotation_rate>): 1 a solid-state drive, else the speed in
	// RPM; 0 when the definition says nothing.
	RotationRate uint
	// Volume names what holds the medium in the backend's own terms when
	// that is not Source (KubeVirt: datavolumes/<namespace>/<name>).
	Volume string
	// NextStart: the medium is in the machine's definition but not in the
	// running machine, which gets it at its next start (KubeVirt, whose
	// CD-ROMs do not hot-plug).
	NextStart bool
}

// Inventory is the hardware a machine has.
type Inventory struct {
	VCPUs       int
	Sockets     int
	Cores       int // per socket
	Threads     int // per core
	MemoryBytes int64
	Arch        string // ArchX86_64, ArchAArch64
	MachineType string // q35, pc, virt
	NICs        []NIC
	Disks       []Disk
	// PCI lists the devices the definition puts on the PCI bus, by address;
	// bridges and root ports are left out.
	PCI []PCIDevice
	// DefaultBoot is the order of device kinds the machine boots in when
	// no BootOrder is set (Hdd, Cd, Pxe), as its definition says; none
	// means Hdd, Cd, Pxe.
	DefaultBoot []BootSource
	// IPMISocket is the unix socket the machine's in-band IPMI interface
	// (a KCS, qemu's ipmi-bmc-extern) connects to its BMC through: the
	// BMC listens there. "" when the machine has none.
	IPMISocket string
}

// Architectures of Inventory.Arch, as libvirt and qemu name them.
const (
	ArchX86_64  = "x86_64"
	ArchAArch64 = "aarch64"
)

// UEFIOnly says the machine's firmware has no Legacy (BIOS) boot: an
// aarch64 server boots UEFI (AAVMF for a VM) and nothing else.
func (i Inventory) UEFIOnly() bool { return i.Arch == ArchAArch64 }

// ErrUEFIOnly refuses a Legacy boot mode on a machine whose firmware is
// UEFI only.
var ErrUEFIOnly = fmt.Errorf("%w: this machine's firmware is UEFI only (aarch64): it has no Legacy BIOS boot; keep BootSourceOverrideMode UEFI (BIOS attribute BootMode Uefi)", ErrUnsupported)

// Machine is a snapshot of one machine. Snapshots are values: a backend makes
// a new one on every change and never mutates one it has handed out.
type Machine struct {
	ID   string // the UUID, lower case
	Name string
	// Host names the hypervisor the machine lives on when a backend serves
	// several; "" when there is only one.
	Host string
	Inventory
	Power PowerState
	// Mode and SecureBootActive describe the firmware the machine runs with
	// now (or would run with, when off, before pending changes).
	Mode             BootMode
	SecureBootActive bool
	Settings         Settings
	// IndicatorLED is the identify light; it lives in memory only.
	IndicatorLED bool
	// PowerFault is why the last power action failed after it was
	// accepted ("" once one succeeds); it lives in memory only.
	PowerFault string
	// Unavailable says why the machine's host cannot be reached now ("" when
	// it can). The rest of the snapshot is then its last known state: it is
	// served to readers (a libvirtd restart leaves the VMs running), and
	// every change is refused with ErrUnavailable until the host is back.
	Unavailable string
	// Generation grows whenever the snapshot changes. Together with ID it
	// identifies a snapshot, which lets faces cache what they render.
	Generation uint64
}

// Errors callers branch on. Backends wrap them.
var (
	ErrNotFound    = errors.New("machine not found")
	ErrInvalid     = errors.New("invalid request")
	ErrConflict    = errors.New("conflicting state")
	ErrUnsupported = errors.New("not supported")
	ErrUnavailable = errors.New("backend unavailable")
)

// invalidf returns an ErrInvalid with a message.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}
