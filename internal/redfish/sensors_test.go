package redfish

import (
	"testing"
	"time"
)

// TestThermalAndPowerFollowThePowerState: the chassis readings are the
// machine model's sensors (those IPMI's SDR serves): on, warm and drawing
// 180 W; off, the CPU and fan have no reading and the board is cool.
func TestThermalAndPowerFollowThePowerState(t *testing.T) {
	f := newFixture(t, 1)
	ch := "/redfish/v1/Chassis/" + f.ids[0]
	temp := func(v map[string]any, i int) map[string]any { return v["Temperatures"].([]any)[i].(map[string]any) }
	off := decode(t, f.do(req{path: ch + "/Thermal"}))
	if cpu := temp(off, 0); cpu["ReadingCelsius"] != nil || cpu["Status"].(map[string]any)["State"] != "StandbyOffline" {
		t.Errorf("CPU of a machine that is off: %v", cpu)
	}
	if board := temp(off, 1); board["ReadingCelsius"] != 24.0 || board["UpperThresholdCritical"] != 80.0 {
		t.Errorf("board of a machine that is off: %v", board)
	}
	if p := decode(t, f.do(req{path: ch + "/Power"})); p["PowerControl"].([]any)[0].(map[string]any)["PowerConsumedWatts"] != 8.0 {
		t.Errorf("standby draw: %v", p["PowerControl"])
	}
	f.do(req{method: "POST", path: f.sys(0) + "/Actions/ComputerSystem.Reset", body: `{"ResetType":"On"}`})
	on := decode(t, f.do(req{path: ch + "/Thermal"}))
	if cpu := temp(on, 0); cpu["ReadingCelsius"] != 45.0 || cpu["Status"].(map[string]any)["Health"] != "OK" {
		t.Errorf("CPU of a machine that is on: %v", cpu)
	}
	if fan := on["Fans"].([]any)[0].(map[string]any); fan["Reading"] != 4800.0 || fan["ReadingUnits"] != "RPM" {
		t.Errorf("fan: %v", fan)
	}
	if p := decode(t, f.do(req{path: ch + "/Power"})); p["PowerSupplies"].([]any)[0].(map[string]any)["LastPowerOutputWatts"] != 180.0 {
		t.Errorf("draw while on: %v", p["PowerSupplies"])
	}
}

// TestManagerDateTime: the BMC's clock is now, not the time of a cached
// rendering.
func TestManagerDateTime(t *testing.T) {
	f := newFixture(t, 1)
	v := decode(t, f.do(req{path: "/redfish/v1/Managers/" + f.ids[0]}))
	got, err := time.Parse(time.RFC3339, v["DateTime"].(string))
	if err != nil || time.Since(got).Abs() > 2*time.Second || v["DateTimeLocalOffset"] != "+00:00" {
		t.Errorf("DateTime %v (%v), offset %v", v["DateTime"], err, v["DateTimeLocalOffset"])
	}
}
