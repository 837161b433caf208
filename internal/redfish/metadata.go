package redfish

import "strings"

// metadataSchemas lists the DMTF schemas ($metadata references) the service
// uses, with the versioned namespace of each.
var metadataSchemas = [][2]string{
	{"ServiceRoot", "v1_17_0"},
	{"ComputerSystemCollection", ""},
	{"ComputerSystem", "v1_20_0"},
	{"ProcessorCollection", ""},
	{"Processor", "v1_15_0"},
	{"MemoryCollection", ""},
	{"Memory", "v1_17_0"},
	{"EthernetInterfaceCollection", ""},
	{"EthernetInterface", "v1_9_0"},
	{"SimpleStorageCollection", ""},
	{"SimpleStorage", "v1_3_1"},
	{"StorageCollection", ""},
	{"Storage", "v1_13_0"},
	{"Drive", "v1_16_0"},
	{"StorageControllerCollection", ""},
	{"StorageController", "v1_7_0"},
	{"VolumeCollection", ""},
	{"Volume", "v1_9_0"},
	{"SecureBoot", "v1_1_0"},
	{"SecureBootDatabaseCollection", ""},
	{"SecureBootDatabase", "v1_0_3"},
	{"SignatureCollection", ""},
	{"Signature", "v1_0_3"},
	{"Bios", "v1_2_0"},
	{"BootOptionCollection", ""},
	{"BootOption", "v1_0_4"},
	{"Settings", "v1_3_5"},
	{"ManagerCollection", ""},
	{"Manager", "v1_15_0"},
	{"ChassisCollection", ""},
	{"Chassis", "v1_21_0"},
	{"Thermal", "v1_7_0"},
	{"Power", "v1_7_1"},
	{"PCIeDeviceCollection", ""},
	{"PCIeDevice", "v1_11_0"},
	{"PCIeFunctionCollection", ""},
	{"PCIeFunction", "v1_5_0"},
	{"NetworkAdapterCollection", ""},
	{"NetworkAdapter", "v1_9_0"},
	{"PortCollection", ""},
	{"Port", "v1_7_0"},
	{"VirtualMediaCollection", ""},
	{"VirtualMedia", "v1_6_0"},
	{"CertificateCollection", ""},
	{"Certificate", "v1_5_0"},
	{"SessionService", "v1_1_8"},
	{"SessionCollection", ""},
	{"Session", "v1_5_0"},
	{"AccountService", "v1_13_0"},
	{"ManagerAccountCollection", ""},
	{"ManagerAccount", "v1_10_0"},
	{"RoleCollection", ""},
	{"Role", "v1_3_1"},
	{"EventService", "v1_10_0"},
	{"EventDestinationCollection", ""},
	{"EventDestination", "v1_13_0"},
	{"Event", "v1_7_0"},
	{"UpdateService", "v1_11_0"},
	{"SoftwareInventoryCollection", ""},
	{"SoftwareInventory", "v1_6_0"},
	{"TaskService", "v1_2_0"},
	{"TaskCollection", ""},
	{"Task", "v1_7_1"},
	{"MessageRegistryFileCollection", ""},
	{"MessageRegistryFile", "v1_1_3"},
	{"MessageRegistry", "v1_5_0"},
	{"AttributeRegistry", "v1_3_8"},
	{"Message", "v1_1_2"},
	{"Resource", "v1_14_0"},
}

// metadataXML builds the OData CSDL document at /redfish/v1/$metadata.
func metadataXML() string {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	b.WriteString(`<edmx:Edmx xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx" Version="4.0">` + "\n")
	for _, s := range metadataSchemas {
		b.WriteString(`  <edmx:Reference Uri="http://redfish.dmtf.org/schemas/v1/` + s[0] + `_v1.xml">` + "\n")
		b.WriteString(`    <edmx:Include Namespace="` + s[0] + `"/>` + "\n")
		if s[1] != "" {
			b.WriteString(`    <edmx:Include Namespace="` + s[0] + "." + s[1] + `"/>` + "\n")
		}
		b.WriteString("  </edmx:Reference>\n")
	}
	b.WriteString(`  <edmx:DataServices>` + "\n")
	b.WriteString(`    <Schema xmlns="http://docs.oasis-open.org/odata/ns/edm" Namespace="Service">` + "\n")
	b.WriteString(`      <EntityContainer Name="Service" Extends="ServiceRoot.v1_11_0.ServiceContainer"/>` + "\n")
	b.WriteString("    </Schema>\n  </edmx:DataServices>\n</edmx:Edmx>\n")
	return b.String()
}
