package hpe

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/bmlab/bmlab/internal/machine"
)

// embeddedHealth is GET_EMBEDDED_HEALTH_DATA, the parts proliantutils reads
// for Ironic's ilo inspection (ribcl.py get_essential_properties and
// get_server_capabilities): the firmware versions (FIRMWARE_INFORMATION:
// iLO, the system ROM), the memory per processor (MEMORY_DETAILS_SUMMARY,
// TOTAL_MEMORY_SIZE), the processors (EXECUTION_TECHNOLOGY, "N cores; M
// threads", whose threads are the CPUs), the NICs (NIC_INFORMATION: port,
// MAC, location Embedded), the disks as logical drives of a controller
// (STORAGE: CAPACITY, of which proliantutils takes the smallest less 1 GB
// as local_gb) and a temperature sensor. Fans, power supplies and the
// rest of iLO's health are not served.
func embeddedHealth(m *machine.Machine, ilo, rom string) element {
	sockets := max(1, m.Sockets)
	cores := max(1, m.Cores)
	threads := max(1, m.Threads)
	if m.Sockets == 0 && m.VCPUs > 0 {
		cores = m.VCPUs
	}
	fw := el("FIRMWARE_INFORMATION").with(
		el("INDEX_1").with(value("FIRMWARE_NAME", "iLO"), value("FIRMWARE_VERSION", ilo)),
		el("INDEX_2").with(value("FIRMWARE_NAME", "HP ProLiant System ROM"), value("FIRMWARE_VERSION", rom)),
	)
	mem := el("MEMORY_DETAILS_SUMMARY")
	perSocket := m.MemoryBytes / int64(sockets)
	for i := 1; i <= sockets; i++ {
		mem = mem.with(el(fmt.Sprintf("CPU_%d", i)).with(
			value("NUMBER_OF_SOCKETS", "1"),
			value("TOTAL_MEMORY_SIZE", sizeGB(perSocket)),
			value("OPERATING_FREQUENCY", "4800 MHz"),
			value("OPERATING_VOLTAGE", "1.10 v"),
		))
	}
	procs := el("PROCESSORS")
	for i := 1; i <= sockets; i++ {
		procs = procs.with(el("PROCESSOR").with(
			value("LABEL", fmt.Sprintf("Proc %d", i)),
			value("NAME", "QEMU Virtual CPU"),
			value("STATUS", "OK"),
			value("SPEED", "2000 MHz"),
			value("EXECUTION_TECHNOLOGY", fmt.Sprintf("%d/%d cores; %d threads", cores, cores, cores*threads)),
		))
	}
	nics := el("NIC_INFORMATION")
	for i, n := range m.NICs {
		nics = nics.with(el("NIC").with(
			value("NETWORK_PORT", "Port "+strconv.Itoa(i+1)),
			value("PORT_DESCRIPTION", "Network Adapter"),
			value("LOCATION", "Embedded"),
			value("MAC_ADDRESS", strings.ToLower(n.MAC)),
			value("IP_ADDRESS", "N/A"),
			value("STATUS", "OK"),
		))
	}
	ctl := el("CONTROLLER").with(value("LABEL", "Controller on System Board"), value("STATUS", "OK"),
		value("MODEL", "HPE Virtual Storage Controller"))
	for i, d := range m.Disks {
		if d.Device != machine.DeviceDisk || d.Capacity <= 0 {
			continue
		}
		ctl = ctl.with(el("LOGICAL_DRIVE").with(
			value("LABEL", fmt.Sprintf("%02d", i+1)),
			value("STATUS", "OK"),
			value("CAPACITY", sizeGB(d.Capacity)),
			value("FAULT_TOLERANCE", "RAID 0"),
		))
	}
	return el("GET_EMBEDDED_HEALTH_DATA").with(
		fw,
		el("MEMORY").with(mem),
		procs,
		nics,
		el("STORAGE").with(ctl),
		el("TEMPERATURE").with(el("TEMP").with(value("LABEL", "01-Inlet Ambient"), value("LOCATION", "Ambient"),
			value("STATUS", "OK"), el("CURRENTREADING", "VALUE", "21", "UNIT", "Celsius"))),
	)
}

// sizeGB is a size as iLO writes it ("16 GB": proliantutils reads it with
// oslo's string_to_bytes, IEC units).
func sizeGB(b int64) string {
	return strconv.FormatInt(b>>30, 10) + " GB"
}
