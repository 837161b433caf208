package redfish

import (
	"encoding/json"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/bmlab/bmlab/internal/accounts"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
)

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	testenv.Golden(t, filepath.Join("testdata", name), got)
}

func indent(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// goldenMachine is a fixed machine: two sockets, a small memory, a disk
// backed by a plain file, a block device on SCSI, an empty CD-ROM, two NICs,
// a Once override to Cd, pending BIOS changes.
func goldenMachine() *machine.Machine {
	st := machine.DefaultSettings(machine.BootModeUEFI, true)
	st.Boot = machine.Boot{Target: machine.BootCd, Enabled: machine.BootOnce, Mode: machine.BootModeUEFI}
	st.BIOSPending = map[string]any{"ProcTurboMode": "Disabled", "PxeRetryCount": 5}
	// BIOS updated; a NIC update staged, which shows nowhere until a reset.
	st.Firmware = map[machine.FirmwareComponent]string{machine.FirmwareBIOS: "2.3.1"}
	st.FirmwarePending = map[machine.FirmwareComponent]string{machine.FirmwareNIC: "4.0"}
	return &machine.Machine{
		ID:   "9b0a5b1e-4c7d-5e2f-8a6b-1c2d3e4f5a6b",
		Name: "node-0",
		Inventory: machine.Inventory{
			VCPUs: 6, Sockets: 2, Cores: 3, Threads: 1,
			MemoryBytes: 512 << 20,
			Arch:        "x86_64",
			MachineType: "q35",
			NICs: []machine.NIC{
				{MAC: "52:54:00:AA:BB:01", Network: "baremetal", Model: "virtio", PCI: "0000:01:00.0"},
				{MAC: "52:54:00:aa:bb:02", Network: "provisioning", Model: "e1000", PCI: "0000:00:02.0", LinkDown: true},
			},
			PCI: []machine.PCIDevice{
				{Address: "0000:00:02.0", Class: "NetworkController", VendorID: 0x8086, DeviceID: 0x100e, Vendor: "Intel Corporation", Name: "82540EM Gigabit Ethernet Controller"},
				{Address: "0000:00:1d.0", Class: "SerialBusController", VendorID: 0x8086, DeviceID: 0x2934, Vendor: "Intel Corporation", Name: "82801I (ICH9 Family) USB UHCI Controller #1"},
				{Address: "0000:00:1d.7", Class: "SerialBusController", VendorID: 0x8086, DeviceID: 0x293a, Vendor: "Intel Corporation", Name: "82801I (ICH9 Family) USB2 EHCI Controller #1"},
				{Address: "0000:01:00.0", Class: "NetworkController", VendorID: 0x1af4, DeviceID: 0x1041, Vendor: "Red Hat, Inc.", Name: "Virtio network device"},
			},
			Disks: []machine.Disk{
				{ID: "vda", Device: machine.DeviceDisk, Bus: "virtio", Source: "/var/lib/bmlab/node-0.img", Capacity: 20 << 30},
				{ID: "sdb", Device: machine.DeviceDisk, Bus: "scsi", Source: "/dev/vg0/data", Capacity: 100 << 30, RotationRate: 1},
				{ID: "sda", Device: machine.DeviceCDROM, Bus: "sata", ReadOnly: true},
			},
		},
		Power:            machine.PowerOn,
		Mode:             machine.BootModeUEFI,
		SecureBootActive: true,
		Settings:         st,
		IndicatorLED:     true,
		Generation:       7,
	}
}

var goldenIdentity = identity{
	ServiceUUID:  testService,
	Manufacturer: "bmlab",
	Model:        "bmlab virtual server",
	Firmware:     "1.0.0",
	SessionTTL:   1800,
	KVM:          256,
	Screen:       true,
}

func TestResourceBuildersGolden(t *testing.T) {
	m := goldenMachine()
	u := systemURI(m.ID)
	cases := map[string]any{
		"service_root.json":       serviceRoot(goldenIdentity),
		"odata.json":              odataDocument(),
		"system.json":             system(m, goldenIdentity),
		"processors.json":         collection(u+"/Processors", "ProcessorCollection", "Processors Collection", ids(u+"/Processors", processorIDs(m))),
		"processor.json":          processor(m, "CPU2"),
		"memory.json":             memory(m, "DIMM1"),
		"ethernet_interface.json": ethernetInterface(m, "525400aabb01"),
		"simple_storage.json":     simpleStorage(m, "1"),
		"storage.json":            storage(m, "1"),
		"drive_file.json":         drive(m, "1", "vda"),
		"drive_ssd.json":          drive(m, "1", "sdb"),
		"storage_controller.json": storageController(m, "1", "0"),
		"secure_boot.json":        secureBoot(m, true),
		"bios.json":               bios(m),
		"bios_settings.json":      biosSettings(m),
		"manager.json":            manager(m, goldenIdentity),
		"manager_nic.json": managerNIC(m, machine.BMCNIC{Address: netip.MustParseAddr("192.168.111.21"), Bits: 24,
			Gateway: netip.MustParseAddr("192.168.111.1"), MAC: machine.BMCMAC(m.ID)}),
		"manager_nic_v6.json":          managerNIC(m, machine.BMCNIC{Address: netip.MustParseAddr("fd00:b::21"), Bits: 64, MAC: machine.BMCMAC(m.ID)}),
		"chassis.json":                 chassis(m, goldenIdentity),
		"pcie_device.json":             pcieDevice(m, "0000-00-1d"),
		"pcie_function.json":           pcieFunction(m, "0000-01-00", "0"),
		"network_adapter.json":         networkAdapter(m, "525400aabb01", goldenIdentity),
		"port_link_down.json":          networkPort(m, "525400aabb02", "1"),
		"session_service.json":         sessionService(goldenIdentity),
		"account_service.json":         accountService(accounts.DefaultPolicy),
		"account.json":                 accountResource("3", "ops", accounts.Operator, true, false, m.ID),
		"role_operator.json":           role(accounts.Operator),
		"roles.json":                   roleCollection(),
		"task_service.json":            taskService(),
		"registry_file.json":           registryFile(baseRegistryPrefix, baseRegistryID, registryURI),
		"base_registry.json":           registryBody(),
		"bios_registry.json":           biosRegistry(),
		"update_service.json":          updateService(),
		"firmware_bios.json":           softwareInventory(m, machine.FirmwareBIOS, goldenIdentity),
		"firmware_nic.json":            softwareInventory(m, machine.FirmwareNIC, goldenIdentity),
		"update_registry.json":         updateRegistryBody(),
		"error_reset_type.json":        errorBody(newError(400, MsgActionParameterValueNotInList, "Explode", "ResetType", "ComputerSystem.Reset")),
		"secure_boot_database.json":    keyDatabase(m.ID, "db", false),
		"secure_boot_db_default.json":  keyDatabase(m.ID, "dbDefault", true),
		"secure_boot_certificate.json": keyCertificate(keyDatabasesURI(m.ID)+"/PK/Certificates", "1", testKeys(t)[machine.KeyPK][0]),
		"secure_boot_signature.json":   keySignature(keyDatabasesURI(m.ID)+"/dbx/Signatures", "1", testKeys(t)[machine.KeyDBX][0]),
	}
	for name, v := range cases {
		t.Run(name, func(t *testing.T) { golden(t, name, indent(t, v)) })
	}
	t.Run("metadata.xml", func(t *testing.T) { golden(t, "metadata.xml", []byte(metadataXML())) })
}

// The resources point at each other: every @odata.id a builder writes for a
// sub-resource is one the sub-resource's builder claims as its own.
func TestBuildersAgreeOnURIs(t *testing.T) {
	m := goldenMachine()
	sys := system(m, goldenIdentity)
	for _, k := range []string{"Processors", "Memory", "EthernetInterfaces", "SimpleStorage", "Storage", "SecureBoot", "Bios"} {
		if got := sys[k].(ref).ID; got != systemURI(m.ID)+"/"+k {
			t.Errorf("%s link %q", k, got)
		}
	}
	if got := secureBoot(m, true)["@odata.id"]; got != sys["SecureBoot"].(ref).ID {
		t.Errorf("SecureBoot @odata.id %v", got)
	}
	if got := bios(m)["@Redfish.Settings"].(obj)["SettingsObject"].(ref).ID; got != biosSettings(m)["@odata.id"] {
		t.Errorf("Bios settings object %q, settings resource %v", got, biosSettings(m)["@odata.id"])
	}
	for _, d := range storage(m, "1")["Drives"].([]ref) {
		id := d.ID[len(d.ID)-3:]
		if got := drive(m, "1", id)["@odata.id"]; got != d.ID {
			t.Errorf("drive %s: @odata.id %v", d.ID, got)
		}
	}
	if got := manager(m, goldenIdentity)["Links"].(obj)["ManagerForServers"].([]ref)[0].ID; got != sys["@odata.id"] {
		t.Errorf("manager for %q", got)
	}
	// Without a graphical console (no web console, or a backend without
	// screens) the Manager says so.
	noKVM := goldenIdentity
	noKVM.KVM = 0
	if diff := cmp.Diff(obj{"ServiceEnabled": false, "MaxConcurrentSessions": 0, "ConnectTypesSupported": []string{}},
		manager(m, noKVM)["GraphicalConsole"]); diff != "" {
		t.Errorf("GraphicalConsole without one (-want +got):\n%s", diff)
	}
}

func TestInventoryArithmetic(t *testing.T) {
	cases := []struct {
		name          string
		inv           machine.Inventory
		count, thread int
		gib           float64
	}{
		{"topology as given", machine.Inventory{VCPUs: 8, Sockets: 2, Cores: 2, Threads: 2, MemoryBytes: 16 << 30}, 2, 4, 16},
		{"topology that does not add up", machine.Inventory{VCPUs: 3, Sockets: 2, Cores: 2, Threads: 1, MemoryBytes: 768 << 20}, 1, 3, 0.75},
		{"no topology", machine.Inventory{VCPUs: 1, MemoryBytes: 256 << 20}, 1, 1, 0.25},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := &machine.Machine{ID: "00000000-0000-5000-8000-000000000001", Inventory: tc.inv}
			ps := processorIDs(m)
			if len(ps) != tc.count {
				t.Fatalf("%d processors, want %d", len(ps), tc.count)
			}
			threads := 0
			for _, p := range ps {
				threads += processor(m, p)["TotalThreads"].(int)
			}
			if threads != tc.inv.VCPUs {
				t.Errorf("threads add up to %d, want the %d vCPUs", threads, tc.inv.VCPUs)
			}
			if got := processor(m, ps[0])["TotalThreads"].(int); got != tc.thread {
				t.Errorf("TotalThreads %d, want %d", got, tc.thread)
			}
			got := system(m, goldenIdentity)["MemorySummary"].(obj)["TotalSystemMemoryGiB"].(float64)
			if got != tc.gib {
				t.Errorf("TotalSystemMemoryGiB %v, want %v", got, tc.gib)
			}
		})
	}
}
