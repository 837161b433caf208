// Package simfile reads the files that describe vbmcd's simulated machines
// (vbmcd --backend sim --sim-systems FILE): sushy-tools' fake driver
// configuration as a Metal3 CI writes it (the emulator's Python
// configuration, of which only the literal assignments of
// SUSHY_EMULATOR_FAKE_SYSTEMS and EXTERNAL_NOTIFICATION_* are read, or the
// same as JSON), and vbmcd's own richer form (YAML: CPUs, memory, NICs,
// disks, BIOS attributes, firmware versions, the virtual media mode).
// Every entry is checked, and a file with problems is refused whole, each
// problem naming the entry and the field. The Python form is read as a
// stream of statements (pyliteral.go), so its memory is that of the values
// read, and a file holds at most MaxFileBytes.
//
// What it does not do: run the Python file (vbmcd never executes it), or
// make the machines (package sim does).
package simfile
