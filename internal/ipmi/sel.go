package ipmi

import (
	"encoding/binary"
	"time"

	"github.com/bmlab/bmlab/internal/ipmi/wire"
	"github.com/bmlab/bmlab/internal/machine"
)

// The System Event Log (IPMI v2.0 §31, records §32.1). Each BMC keeps one,
// in memory, shared by its faces: what `ipmitool sel list` shows over LAN
// is what the OS reads through its KCS. The BMC logs the machine's power
// changes (System ACPI Power State: S0/G0 working, S5/G2 soft-off), the
// guest's own restarts (System Boot/Restart Initiated: system restart),
// the watchdog's expirations (watchdog.go) and the log's clearing (Event
// Logging Disabled: log area reset/cleared); clients add their own (Add
// SEL Entry, Platform Event). A full log drops its oldest record, and says
// so (the overflow flag of Get SEL Info). A restarted vbmcd starts with an
// empty log: a real SEL is non-volatile, this one is not.

// selCapacity bounds a SEL: 16 bytes a record.
const selCapacity = 512

// Sensor types (IPMI v2.0 §42.2, Table 42-3) and the numbers of the BMC's
// event-only sensors. They have no SDR record: `sel list` names them by
// type.
const (
	sensorTypeWatchdog2    = 0x23
	sensorTypeEventLogging = 0x10
	sensorTypeRestart      = 0x1d
	sensorTypeACPIPower    = 0x22

	sensorACPIPower    = 0x40
	sensorRestart      = 0x41
	sensorWatchdog     = 0x42
	sensorEventLogging = 0x43
)

// Event/reading type: sensor-specific (IPMI v2.0 §42.1, Table 42-1).
const eventSensorSpecific = 0x6f

// Generator IDs (IPMI v2.0 §5.5, §32.1): the BMC itself, and system
// software on the system interface.
const (
	genBMC    = wire.BMCSlaveAddr
	genSystem = 0x41
)

type selLog struct {
	recs     [][16]byte
	next     uint16 // the next record ID
	added    uint32 // timestamps of the most recent addition and erase; 0: never
	erased   uint32
	overflow bool
}

// add appends a record (its ID and timestamp are filled in) and returns it.
// Callers hold b.mu.
func (l *selLog) add(r [16]byte, now uint32) [16]byte {
	if l.next == 0 || l.next == 0xffff {
		l.next = 1
	}
	binary.LittleEndian.PutUint16(r[0:2], l.next)
	l.next++
	if r[2] < 0xe0 { // timestamped records (§32: types C0h-DFh are OEM timestamped, E0h-FFh not)
		binary.LittleEndian.PutUint32(r[3:7], now)
	}
	if len(l.recs) == selCapacity {
		l.recs = l.recs[1:]
		l.overflow = true
	}
	l.recs = append(l.recs, r)
	l.added = now
	return r
}

// event builds a system event record (§32.1, record type 02h).
func event(gen uint16, sensorType, sensor, dirType byte, data ...byte) [16]byte {
	var r [16]byte
	r[2] = 0x02
	binary.LittleEndian.PutUint16(r[7:9], gen)
	r[9] = 0x04 // event message format revision 2.0 (§29.7)
	r[10], r[11], r[12] = sensorType, sensor, dirType
	copy(r[13:16], append(data, 0xff, 0xff, 0xff)) // unspecified data bytes are FFh
	return r
}

// bmcTime is the BMC's clock now, as SEL timestamps are taken.
func (b *bmc) bmcTime() uint32 {
	now := time.Now()
	if m, err := b.svc.Get(b.id); err == nil {
		now = m.BMCTime(now)
	}
	return uint32(now.Unix())
}

// logEvent adds a record the BMC generates, unless the OS turned system
// event logging off (BMC global enables, sysif.go), and offers it to the
// event message buffer.
func (b *bmc) logEvent(r [16]byte) {
	now := b.bmcTime()
	b.mu.Lock()
	if b.enables&enableSELLog != 0 {
		r = b.sel.add(r, now)
	}
	b.mu.Unlock()
	b.bufferEvent(r)
}

// powerChanged logs a power transition of the machine: on is what the
// machine is now. A machine that powers off stops its watchdog (§27.7).
func (b *bmc) powerChanged(on bool) {
	offset := byte(0x00) // S0/G0 "working"
	if !on {
		offset = 0x05 // S5/G2 "soft-off"
		b.mu.Lock()
		b.stopWatchdogLocked()
		b.mu.Unlock()
	}
	b.logEvent(event(genBMC, sensorTypeACPIPower, sensorACPIPower, eventSensorSpecific, offset))
}

// restarted logs a restart the guest made itself (the machine kept
// running): System Boot/Restart Initiated, "system restart" (offset 07h).
func (b *bmc) restarted() {
	b.logEvent(event(genBMC, sensorTypeRestart, sensorRestart, eventSensorSpecific, 0x07))
}

// machineEvent turns a model event into SEL records.
func (b *bmc) machineEvent(ev machine.Event) {
	switch ev.Kind {
	case machine.EventChanged:
		if ev.Prev == nil || ev.Machine == nil {
			return
		}
		if was, now := isOn(ev.Prev), isOn(ev.Machine); was != now {
			b.powerChanged(now)
		}
	case machine.EventReboot:
		b.restarted()
	}
}

// getSELInfo (IPMI v2.0 §31.2).
func (b *bmc) getSELInfo(_ *sessRef, _ []byte) (wire.CompletionCode, []byte) {
	b.mu.Lock()
	l := &b.sel
	n, added, erased, overflow := len(l.recs), l.added, l.erased, l.overflow
	b.mu.Unlock()
	out := []byte{0x51} // SEL version 1.5 (also 2.0)
	out = binary.LittleEndian.AppendUint16(out, uint16(n))
	out = binary.LittleEndian.AppendUint16(out, uint16((selCapacity-n)*16))
	for _, t := range []uint32{added, erased} {
		if t == 0 {
			t = 0xffffffff // never
		}
		out = binary.LittleEndian.AppendUint32(out, t)
	}
	support := byte(0x02) // Reserve SEL supported
	if overflow {
		support |= 0x80
	}
	return wire.CodeOK, append(out, support)
}

// getSELEntry (IPMI v2.0 §31.5): reservation ID, record ID (0000h the
// first, FFFFh the last), offset, bytes to read (FFh: all). A partial read
// needs the current reservation, as for the SDR.
func (b *bmc) getSELEntry(_ *sessRef, d []byte) (wire.CompletionCode, []byte) {
	resv := binary.LittleEndian.Uint16(d[0:2])
	id := binary.LittleEndian.Uint16(d[2:4])
	off, n := int(d[4]), int(d[5])
	b.mu.Lock()
	defer b.mu.Unlock()
	if off > 0 && resv != b.reservation {
		return wire.CodeReservationInvalid, nil
	}
	recs := b.sel.recs
	if len(recs) == 0 {
		return wire.CodeNotPresent, nil
	}
	i := -1
	switch id {
	case 0x0000:
		i = 0
	case 0xffff:
		i = len(recs) - 1
	default:
		for j, r := range recs {
			if binary.LittleEndian.Uint16(r[0:2]) == id {
				i = j
				break
			}
		}
	}
	if i < 0 {
		return wire.CodeNotPresent, nil
	}
	if off >= 16 {
		return wire.CodeParamOutOfRange, nil
	}
	end := 16
	if n != 0xff && off+n < end {
		end = off + n
	}
	next := uint16(0xffff)
	if i+1 < len(recs) {
		next = binary.LittleEndian.Uint16(recs[i+1][0:2])
	}
	out := binary.LittleEndian.AppendUint16(nil, next)
	return wire.CodeOK, append(out, recs[i][off:end]...)
}

// addSELEntry (IPMI v2.0 §31.6): the record as given, with the BMC's ID
// and, for a timestamped type, its time.
func (b *bmc) addSELEntry(_ *sessRef, d []byte) (wire.CompletionCode, []byte) {
	var r [16]byte
	copy(r[:], d)
	now := b.bmcTime()
	b.mu.Lock()
	r = b.sel.add(r, now)
	b.mu.Unlock()
	return wire.CodeOK, r[0:2]
}

// platformEvent (IPMI v2.0 §29.3): an event message, logged as the BMC's
// event receiver does. On the system interface the request begins with the
// generator ID (system software's, 41h for ipmitool); over LAN the
// generator is the remote console (software ID 81h, channel 1).
func (b *bmc) platformEvent(s *sessRef, d []byte) (wire.CompletionCode, []byte) {
	gen := uint16(wire.RemoteConsoleAddr) | lanChannel<<12
	if s != nil && s.system {
		if len(d) < 1 {
			return wire.CodeDataLengthInvalid, nil
		}
		gen, d = uint16(d[0]), d[1:] // channel 0: the system interface (§32.1)
	}
	if len(d) < 5 || len(d) > 7 {
		return wire.CodeDataLengthInvalid, nil
	}
	if d[0] != 0x04 { // EvMRev: IPMI v2.0 (§29.7)
		return wire.CodeInvalidDataField, nil
	}
	b.logEvent(event(gen, d[1], d[2], d[3], d[4:]...))
	return wire.CodeOK, nil
}

// clearSEL (IPMI v2.0 §31.9): the reservation, "CLR", then AAh to erase
// or 00h to ask how it went. The cleared log keeps one record: the
// clearing itself (Event Logging Disabled, "log area reset/cleared").
func (b *bmc) clearSEL(_ *sessRef, d []byte) (wire.CompletionCode, []byte) {
	if d[2] != 'C' || d[3] != 'L' || d[4] != 'R' || (d[5] != 0x00 && d[5] != 0xaa) {
		return wire.CodeInvalidDataField, nil
	}
	now := b.bmcTime()
	b.mu.Lock()
	if binary.LittleEndian.Uint16(d[0:2]) != b.reservation {
		b.mu.Unlock()
		return wire.CodeReservationInvalid, nil
	}
	if d[5] == 0x00 {
		b.mu.Unlock()
		return wire.CodeOK, []byte{0x01} // erasure completed
	}
	b.sel.recs, b.sel.overflow, b.sel.erased = nil, false, now
	r := b.sel.add(event(genBMC, sensorTypeEventLogging, sensorEventLogging, eventSensorSpecific, 0x02), now)
	b.mu.Unlock()
	b.bufferEvent(r)
	return wire.CodeOK, []byte{0x01}
}
