package ipmi

import (
	"encoding/binary"

	"github.com/bmlab/bmlab/internal/ipmi/wire"
	"github.com/bmlab/bmlab/internal/machine"
)

// The SDR repository: a few plausible threshold sensors (temperatures, a
// fan, the power drawn), the same on every BMC, read-only. Their readings
// follow the machine's power state: a powered-off server has a cool board, a
// stopped fan and a standby draw. IPMI v2.0 §33 (repository), §35 (sensor
// commands), §43.1 (full sensor record), §36.3 (reading conversion).

// Sensor/Event commands (NetFn 04h, IPMI v2.0 Appendix G).
const (
	cmdPlatformEvent       = 0x02
	cmdGetSensorThresholds = 0x27
	cmdGetSensorReading    = 0x2d
)

// sdrTimestamp is the repository's "most recent addition" (IPMI v2.0
// §33.9): fixed, since the records never change, so that clients which
// cache the SDR (FreeIPMI's sdr-cache) keep their cache across restarts.
// 2026-01-01T00:00:00Z; change it whenever sensorTable changes.
const sdrTimestamp = 1767225600

// Sensor types (IPMI v2.0 §42.2, Table 42-3) and units (§43.17, Table 43-15).
const (
	sensorTypeTemperature = 0x01
	sensorTypeCurrent     = 0x03 // power in watts is reported under Current by most BMCs
	sensorTypeFan         = 0x04

	unitDegreesC = 1
	unitWatts    = 6
	unitRPM      = 18

	entityProcessor   = 0x03 // IPMI v2.0 §43.14, Table 43-13
	entitySystemBoard = 0x07
	entityPowerSupply = 0x0a
	entityFan         = 0x1d
)

// Threshold bits, in the order of Get Sensor Thresholds' mask and the
// comparison status of Get Sensor Reading (IPMI v2.0 §35.9, §35.14).
const (
	thrLNC = 1 << iota
	thrLC
	thrLNR
	thrUNC
	thrUC
	thrUNR
)

// sensor is one full sensor record and how its reading is made: the
// machine model's sensor (machine.Sensors, which Redfish's Thermal and Power
// show too) in IPMI's encoding. Readings are linear: value = m * raw
// (B = 0, exponents 0).
type sensor struct {
	number  byte
	name    string // at most 16 bytes
	typ     byte
	entity  byte
	unit    byte
	m       byte
	thr     [6]byte // raw LNC, LC, LNR, UNC, UC, UNR
	readOn  byte    // raw reading while the machine is on
	readOff byte    // raw reading while it is off
	offNA   bool    // no reading while off (the sensor's device is unpowered)
	src     machine.Sensor
}

// sensorTable encodes machine.Sensors; the multiplier m keeps each range
// within a byte (4800 RPM is 120 × 40, 180 W is 45 × 4).
var sensorTable = func() []sensor {
	enc := map[machine.SensorKind]struct{ typ, unit, m byte }{
		machine.SensorTemperature: {sensorTypeTemperature, unitDegreesC, 1},
		machine.SensorFan:         {sensorTypeFan, unitRPM, 40},
		machine.SensorPower:       {sensorTypeCurrent, unitWatts, 4},
	}
	entity := map[string]byte{"CPU": entityProcessor, "SystemBoard": entitySystemBoard, "Fan": entityFan, "PowerSupply": entityPowerSupply}
	var out []sensor
	for _, ms := range machine.Sensors {
		e := enc[ms.Kind]
		raw := func(v float64) byte { return byte(v / float64(e.m)) }
		s := sensor{number: ms.Number, name: ms.Name, typ: e.typ, entity: entity[ms.Context], unit: e.unit, m: e.m,
			readOn: raw(ms.On), readOff: raw(ms.Off), offNA: ms.OffNA, src: ms}
		for i, v := range ms.Thresholds {
			s.thr[i] = raw(v)
		}
		out = append(out, s)
	}
	return out
}()

func (s sensor) readable() byte {
	var mask byte
	for i, v := range s.thr {
		if v != 0 {
			mask |= 1 << i
		}
	}
	return mask
}

// record renders the sensor as a full sensor record (IPMI v2.0 §43.1,
// Table 43-1) with record ID id.
func (s sensor) record(id uint16) []byte {
	r := binary.LittleEndian.AppendUint16(nil, id)
	r = append(r,
		0x51, // SDR version 1.5 (also 2.0)
		0x01, // full sensor record
		0,    // record length, set below
		// Record key.
		wire.BMCSlaveAddr, 0x00, s.number, // owner: the BMC, LUN 0
		// Record body.
		s.entity, 0x01, // entity, instance 1 (physical)
		0x03, // initialization: event generation and scanning enabled by default
		0x47, // capabilities: auto re-arm, no hysteresis, thresholds readable per mask, no events
		s.typ,
		0x01, // event/reading type: threshold
	)
	m := s.readable()
	lower, upper := m&(thrLNC|thrLC|thrLNR), m>>3&0x07
	r = append(r,
		0x00, lower<<4, // assertion event mask / lower threshold reading mask
		0x00, upper<<4, // deassertion event mask / upper threshold reading mask
		m, 0x00, // readable threshold mask, settable threshold mask (none)
		0x00,      // units 1: unsigned, no rate, no modifier, not a percentage
		s.unit,    // units 2: base unit
		0x00,      // units 3: modifier unit
		0x00,      // linearization: linear
		s.m, 0x00, // M, tolerance
		0x00, 0x00, // B, accuracy
		0x00,       // accuracy, sensor direction: unspecified
		0x00,       // R and B exponents
		0x01,       // analog characteristics: nominal reading given
		s.readOn,   // nominal reading
		0x00, 0x00, // normal maximum, minimum (not given)
		0xff, 0x00, // sensor maximum, minimum reading
		s.thr[5], s.thr[4], s.thr[3], s.thr[2], s.thr[1], s.thr[0], // UNR, UC, UNC, LNR, LC, LNC
		0x00, 0x00, // hysteresis
		0x00, 0x00, // reserved
		0x00,                   // OEM
		0xc0|byte(len(s.name)), // ID string: 8-bit ASCII + Latin-1
	)
	r = append(r, s.name...)
	r[4] = byte(len(r) - 5)
	return r
}

// sdrRecords is the repository, rendered once: record IDs 1..n.
var sdrRecords = func() [][]byte {
	out := make([][]byte, len(sensorTable))
	for i, s := range sensorTable {
		out[i] = s.record(uint16(i + 1))
	}
	return out
}()

// reading is what Get Sensor Reading returns for s on machine m: raw value,
// whether there is one, and the threshold comparison status.
func (s sensor) reading(m *machine.Machine) (raw byte, ok bool, status byte) {
	v, ok := s.src.Reading(m)
	if !ok {
		return 0, false, 0
	}
	return byte(v / float64(s.m)), true, s.src.Crossed(v)
}

// getSDRRepoInfo (IPMI v2.0 §33.9).
func (b *bmc) getSDRRepoInfo(_ *sessRef, _ []byte) (wire.CompletionCode, []byte) {
	out := []byte{0x51}
	out = binary.LittleEndian.AppendUint16(out, uint16(len(sdrRecords)))
	out = append(out, 0x00, 0x00) // free space: none, the repository is read-only
	out = binary.LittleEndian.AppendUint32(out, sdrTimestamp)
	out = binary.LittleEndian.AppendUint32(out, sdrTimestamp) // most recent erase
	// Operation support: update type unspecified, no delete, no partial add,
	// Reserve SDR Repository supported, no allocation info.
	return wire.CodeOK, append(out, 0x02)
}

// getSDR (IPMI v2.0 §33.12): reservation ID, record ID (0000h first,
// FFFFh last), offset, bytes to read (FFh: to the end). A partial read
// (offset > 0) needs the current reservation, as clients read a record in
// pieces.
func (b *bmc) getSDR(_ *sessRef, d []byte) (wire.CompletionCode, []byte) {
	resv := binary.LittleEndian.Uint16(d[0:2])
	id := binary.LittleEndian.Uint16(d[2:4])
	off, n := int(d[4]), int(d[5])
	if off > 0 {
		b.mu.Lock()
		cur := b.reservation
		b.mu.Unlock()
		if resv != cur {
			return wire.CodeReservationInvalid, nil
		}
	}
	i := int(id) - 1
	switch id {
	case 0x0000:
		i = 0
	case 0xffff:
		i = len(sdrRecords) - 1
	}
	if i < 0 || i >= len(sdrRecords) {
		return wire.CodeNotPresent, nil
	}
	rec := sdrRecords[i]
	if off > len(rec) {
		return wire.CodeParamOutOfRange, nil
	}
	end := len(rec)
	if n != 0xff && off+n < end {
		end = off + n
	}
	next := uint16(i + 2)
	if i == len(sdrRecords)-1 {
		next = 0xffff
	}
	out := binary.LittleEndian.AppendUint16(nil, next)
	return wire.CodeOK, append(out, rec[off:end]...)
}

func sensorByNumber(n byte) (sensor, bool) {
	for _, s := range sensorTable {
		if s.number == n {
			return s, true
		}
	}
	return sensor{}, false
}

// getSensorReading (IPMI v2.0 §35.14).
func (b *bmc) getSensorReading(_ *sessRef, d []byte) (wire.CompletionCode, []byte) {
	s, ok := sensorByNumber(d[0])
	if !ok {
		return wire.CodeNotPresent, nil
	}
	m, cc := b.machine()
	if cc != wire.CodeOK {
		return cc, nil
	}
	raw, ok, status := s.reading(m)
	flags := byte(0x40) // scanning enabled; event messages disabled
	if !ok {
		flags |= 0x20 // reading unavailable
	}
	// Byte 4 is optional for threshold sensors and reads 80h (§35.14).
	return wire.CodeOK, []byte{raw, flags, 0xc0 | status, 0x80}
}

// getSensorThresholds (IPMI v2.0 §35.9).
func (b *bmc) getSensorThresholds(_ *sessRef, d []byte) (wire.CompletionCode, []byte) {
	s, ok := sensorByNumber(d[0])
	if !ok {
		return wire.CodeNotPresent, nil
	}
	return wire.CodeOK, append([]byte{s.readable()}, s.thr[:]...)
}
