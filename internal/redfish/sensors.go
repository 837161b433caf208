package redfish

// Chassis Thermal and Power (Thermal v1_7_0, Power v1_7_1): the machine
// model's sensors (machine.Sensors), which IPMI's SDR serves too, so that
// `ipmitool sdr` and Ironic's sensor data collection read the same values.
// Thermal and Power are deprecated in favour of ThermalSubsystem,
// PowerSubsystem and Sensors, but they are what Ironic and most tools read.

import (
	"strconv"

	"github.com/bmlab/bmlab/internal/machine"
)

// sensorStatus is a sensor's Status: a reading without power is
// StandbyOffline; one past a threshold is Warning or Critical.
func sensorStatus(s machine.Sensor, v float64, ok bool) obj {
	if !ok {
		return obj{"State": "StandbyOffline", "Health": nil}
	}
	c := s.Crossed(v)
	switch {
	case c&(1<<machine.LowerCritical|1<<machine.LowerFatal|1<<machine.UpperCritical|1<<machine.UpperFatal) != 0:
		return obj{"State": "Enabled", "Health": "Critical"}
	case c != 0:
		return obj{"State": "Enabled", "Health": "Warning"}
	}
	return status("Enabled")
}

// reading is a value for JSON: null when the sensor has none.
func reading(v float64, ok bool) any {
	if !ok {
		return nil
	}
	return v
}

// thresholds adds a sensor's set thresholds under Redfish's names.
func thresholds(o obj, s machine.Sensor) {
	names := [6]string{"LowerThresholdNonCritical", "LowerThresholdCritical", "LowerThresholdFatal",
		"UpperThresholdNonCritical", "UpperThresholdCritical", "UpperThresholdFatal"}
	for i, v := range s.Thresholds {
		if v != 0 {
			o[names[i]] = v
		}
	}
}

func thermal(m *machine.Machine) obj {
	uri := chassisOf(m.ID) + "/Thermal"
	temps, fans := []obj{}, []obj{}
	for _, s := range machine.Sensors {
		v, ok := s.Reading(m)
		switch s.Kind {
		case machine.SensorTemperature:
			id := strconv.Itoa(len(temps))
			t := obj{
				"@odata.id": uri + "#/Temperatures/" + id, "MemberId": id, "Name": s.Name,
				"SensorNumber": int(s.Number), "ReadingCelsius": reading(v, ok),
				"MinReadingRangeTemp": s.Min, "MaxReadingRangeTemp": s.Max,
				"PhysicalContext": s.Context, "Status": sensorStatus(s, v, ok),
			}
			thresholds(t, s)
			temps = append(temps, t)
		case machine.SensorFan:
			id := strconv.Itoa(len(fans))
			f := obj{
				"@odata.id": uri + "#/Fans/" + id, "MemberId": id, "Name": s.Name,
				"SensorNumber": int(s.Number), "Reading": reading(v, ok), "ReadingUnits": "RPM",
				"MinReadingRange": s.Min, "MaxReadingRange": s.Max, "PhysicalContext": s.Context,
				"SerialNumber": serialOf(m.ID) + "-F" + id, "Status": sensorStatus(s, v, ok),
			}
			thresholds(f, s)
			fans = append(fans, f)
		}
	}
	return obj{
		"@odata.id": uri, "@odata.type": "#Thermal.v1_7_0.Thermal", "Id": "Thermal", "Name": "Thermal",
		"Temperatures": temps, "Fans": fans,
	}
}

func power(m *machine.Machine) obj {
	uri := chassisOf(m.ID) + "/Power"
	var watts float64
	var ok bool
	var src machine.Sensor
	for _, s := range machine.Sensors {
		if s.Kind == machine.SensorPower {
			src = s
			watts, ok = s.Reading(m)
		}
	}
	st := sensorStatus(src, watts, ok)
	return obj{
		"@odata.id": uri, "@odata.type": "#Power.v1_7_1.Power", "Id": "Power", "Name": "Power",
		"PowerControl": []obj{{
			"@odata.id": uri + "#/PowerControl/0", "MemberId": "0", "Name": "System Power Control",
			"PowerConsumedWatts": reading(watts, ok), "PowerCapacityWatts": src.Max,
			"PhysicalContext": "Intake", "Status": st,
		}},
		"PowerSupplies": []obj{{
			"@odata.id": uri + "#/PowerSupplies/0", "MemberId": "0", "Name": "PSU 1",
			"PowerSupplyType": "AC", "LineInputVoltage": 230, "PowerCapacityWatts": src.Max,
			"LastPowerOutputWatts": reading(watts, ok), "SerialNumber": serialOf(m.ID) + "-P0",
			"Status": st,
		}},
	}
}

func renderThermal(_ *Server, c *call) any { return thermal(c.m) }
func renderPower(_ *Server, c *call) any   { return power(c.m) }
