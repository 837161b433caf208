package machine

// Sensors: the few environmental readings every machine reports, the same
// on every face (IPMI's SDR and sensor commands, Redfish's Chassis Thermal
// and Power). They are plausible rather than measured: they follow the
// power state, as a real server's do (a powered-off server has a cool
// board, a stopped fan and a standby draw).

// SensorKind is what a sensor measures.
type SensorKind int

const (
	SensorTemperature SensorKind = iota // degrees Celsius
	SensorFan                           // RPM
	SensorPower                         // watts drawn
)

// Sensor is one reading and its thresholds. A threshold of 0 is not set.
type Sensor struct {
	Number  byte   // the IPMI sensor number
	Name    string // at most 16 bytes (an IPMI SDR's ID string)
	Kind    SensorKind
	Context string // Redfish PhysicalContext: CPU, SystemBoard, Fan, PowerSupply

	On, Off float64 // reading while the machine is on, and off
	OffNA   bool    // no reading while off (the sensor's device is unpowered)

	// Thresholds: lower non-critical, critical, non-recoverable; upper
	// non-critical, critical, non-recoverable (IPMI v2.0 §35.9's order;
	// Redfish's NonCritical, Critical, Fatal).
	Thresholds [6]float64
	Min, Max   float64 // the range a reading can take
}

// Threshold indexes into Sensor.Thresholds.
const (
	LowerNonCritical = iota
	LowerCritical
	LowerFatal
	UpperNonCritical
	UpperCritical
	UpperFatal
)

// Sensors is every machine's sensor set.
var Sensors = []Sensor{
	{Number: 0x01, Name: "CPU Temp", Kind: SensorTemperature, Context: "CPU",
		On: 45, OffNA: true, Thresholds: [6]float64{5, 0, 0, 85, 90, 95}, Max: 127},
	{Number: 0x02, Name: "System Temp", Kind: SensorTemperature, Context: "SystemBoard",
		On: 32, Off: 24, Thresholds: [6]float64{5, 0, 0, 75, 80, 85}, Max: 127},
	{Number: 0x03, Name: "FAN1", Kind: SensorFan, Context: "Fan",
		On: 4800, OffNA: true, Thresholds: [6]float64{600, 400, 200, 0, 0, 0}, Max: 10200},
	{Number: 0x04, Name: "Pwr Consumption", Kind: SensorPower, Context: "PowerSupply",
		On: 180, Off: 8, Thresholds: [6]float64{0, 0, 0, 800, 900, 1000}, Max: 1020},
}

// Reading is the sensor's value for m, and false when it has none (its
// device unpowered).
func (s Sensor) Reading(m *Machine) (float64, bool) {
	if m.Power == PowerOn || m.Power == PowerPoweringOff {
		return s.On, true
	}
	if s.OffNA {
		return 0, false
	}
	return s.Off, true
}

// Crossed reports which thresholds a reading is at or past, as a bit per
// Thresholds index.
func (s Sensor) Crossed(v float64) byte {
	var bits byte
	t := s.Thresholds
	for i, past := range []bool{v <= t[0], v <= t[1], v <= t[2], v >= t[3], v >= t[4], v >= t[5]} {
		if past && t[i] != 0 {
			bits |= 1 << i
		}
	}
	return bits
}
