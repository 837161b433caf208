package ipmi

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/ipmi/wire"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
)

// cpuTempRecord is the first full sensor record, byte by byte (IPMI v2.0
// §43.1, Table 43-1).
var cpuTempRecord = []byte{
	0x01, 0x00, // record ID 1
	0x51, 0x01, 0x33, // SDR 1.5, full sensor record, 51 bytes follow
	0x20, 0x00, 0x01, // owner BMC, LUN 0, sensor 1
	0x03, 0x01, // processor, instance 1
	0x03, 0x47, // init, capabilities
	0x01, 0x01, // temperature, threshold
	0x00, 0x10, // lower reading mask: LNC
	0x00, 0x70, // upper reading mask: UNC, UC, UNR
	0x39, 0x00, // readable: LNC UNC UC UNR; settable: none
	0x00, 0x01, 0x00, // unsigned, degrees C
	0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, // linear, M=1, B=0, exponents 0
	0x01, 45, 0x00, 0x00, 0xff, 0x00, // nominal 45, sensor range 0..255
	95, 90, 85, 0, 0, 5, // UNR UC UNC LNR LC LNC
	0x00, 0x00, 0x00, 0x00, 0x00, // hysteresis, reserved, OEM
	0xc8, 'C', 'P', 'U', ' ', 'T', 'e', 'm', 'p',
}

func TestSDRRecordBytes(t *testing.T) {
	if diff := cmp.Diff(cpuTempRecord, sensorTable[0].record(1)); diff != "" {
		t.Errorf("CPU Temp record (-want +got):\n%s", diff)
	}
	for i, r := range sdrRecords {
		if int(r[4]) != len(r)-5 {
			t.Errorf("record %d: length byte %d, record has %d bytes after the header", i+1, r[4], len(r)-5)
		}
		if n := len(sensorTable[i].name); n > 16 {
			t.Errorf("record %d: ID string %d bytes, at most 16", i+1, n)
		}
	}
}

// TestSDRCommands runs the repository and sensor commands over a real
// session, request bytes in, response bytes out.
func TestSDRCommands(t *testing.T) {
	l := newLab(t, 1, "127.0.0.1", nil)
	c := l.dial(t, 0, 17)
	do := func(netFn wire.NetFn, cmd uint8, data ...byte) (wire.CompletionCode, []byte) {
		t.Helper()
		code, out, err := c.Do(netFn, cmd, data...)
		if err != nil {
			t.Fatalf("netFn %#x cmd %#x: %v", netFn, cmd, err)
		}
		return code, out
	}
	code, resv := do(wire.NetFnStorage, cmdReserveSDRRepo)
	if code != wire.CodeOK || len(resv) != 2 {
		t.Fatalf("reserve: %v % x", code, resv)
	}
	tests := []struct {
		name     string
		netFn    wire.NetFn
		cmd      uint8
		req      []byte
		wantCode wire.CompletionCode
		want     []byte
	}{
		{"repo info", wire.NetFnStorage, cmdGetSDRRepoInfo, nil, wire.CodeOK,
			[]byte{0x51, 0x04, 0x00, 0x00, 0x00, 0x00, 0xb9, 0x55, 0x69, 0x00, 0xb9, 0x55, 0x69, 0x02}},
		{"first record whole", wire.NetFnStorage, cmdGetSDR, []byte{0, 0, 0x00, 0x00, 0, 0xff}, wire.CodeOK,
			append([]byte{0x02, 0x00}, cpuTempRecord...)},
		{"header only, no reservation needed", wire.NetFnStorage, cmdGetSDR, []byte{0, 0, 0x01, 0x00, 0, 5}, wire.CodeOK,
			append([]byte{0x02, 0x00}, cpuTempRecord[:5]...)},
		{"partial read, stale reservation", wire.NetFnStorage, cmdGetSDR, []byte{resv[0] + 1, resv[1], 0x01, 0x00, 5, 16}, wire.CodeReservationInvalid, nil},
		{"partial read", wire.NetFnStorage, cmdGetSDR, []byte{resv[0], resv[1], 0x01, 0x00, 5, 16}, wire.CodeOK,
			append([]byte{0x02, 0x00}, cpuTempRecord[5:21]...)},
		{"partial read past the end is cut", wire.NetFnStorage, cmdGetSDR, []byte{resv[0], resv[1], 0x01, 0x00, 50, 16}, wire.CodeOK,
			append([]byte{0x02, 0x00}, cpuTempRecord[50:]...)},
		{"last record ends the chain", wire.NetFnStorage, cmdGetSDR, []byte{0, 0, 0xff, 0xff, 0, 5}, wire.CodeOK,
			[]byte{0xff, 0xff, 0x04, 0x00, 0x51, 0x01, sdrRecords[3][4]}},
		{"no such record", wire.NetFnStorage, cmdGetSDR, []byte{0, 0, 0x05, 0x00, 0, 0xff}, wire.CodeNotPresent, nil},
		{"short request", wire.NetFnStorage, cmdGetSDR, []byte{0, 0, 0x01, 0x00, 0}, wire.CodeDataLengthInvalid, nil},
		{"CPU temp while off: unavailable", wire.NetFnSensor, cmdGetSensorReading, []byte{0x01}, wire.CodeOK,
			[]byte{0x00, 0x60, 0xc0, 0x80}},
		{"board temp while off", wire.NetFnSensor, cmdGetSensorReading, []byte{0x02}, wire.CodeOK,
			[]byte{24, 0x40, 0xc0, 0x80}},
		{"no such sensor", wire.NetFnSensor, cmdGetSensorReading, []byte{0x09}, wire.CodeNotPresent, nil},
		{"fan thresholds", wire.NetFnSensor, cmdGetSensorThresholds, []byte{0x03}, wire.CodeOK,
			[]byte{0x07, 15, 10, 5, 0, 0, 0}},
		{"the repository is read-only", wire.NetFnStorage, 0x27, []byte{resv[0], resv[1], 'C', 'L', 'R', 0xaa}, wire.CodeInvalidCommand, nil},
	}
	for _, tt := range tests {
		code, got := do(tt.netFn, tt.cmd, tt.req...)
		if code != tt.wantCode {
			t.Errorf("%s: code %v, want %v", tt.name, code, tt.wantCode)
			continue
		}
		if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b []byte) bool { return string(a) == string(b) })); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
	// Powered on: every sensor reads, none crosses a threshold.
	if code, _ := do(wire.NetFnChassis, cmdChassisControl, 0x01); code != wire.CodeOK {
		t.Fatalf("power on: %v", code)
	}
	waitPower(t, l, 0, machine.PowerOn)
	for _, s := range sensorTable {
		code, got := do(wire.NetFnSensor, cmdGetSensorReading, s.number)
		want := []byte{s.readOn, 0x40, 0xc0, 0x80}
		if code != wire.CodeOK || string(got) != string(want) {
			t.Errorf("%s while on: %v % x, want % x", s.name, code, got, want)
		}
	}
}

// TestIpmitoolSDR: `ipmitool sdr elist` used to fail with "Get SDR 0000
// command failed" on the empty repository.
func TestIpmitoolSDR(t *testing.T) {
	testenv.Integration(t)
	testenv.Command(t, "ipmitool")
	l := newLab(t, 1, "127.0.0.1", nil)
	check := func(out string, want ...string) {
		t.Helper()
		if strings.Contains(out, "failed") {
			t.Errorf("ipmitool reports a failure:\n%s", out)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("output lacks %q:\n%s", w, out)
			}
		}
	}
	check(l.mustIpmitool(t, 0, nil, "sdr", "elist"),
		"CPU Temp         | 01h | ns  |  3.1 | No Reading",
		"System Temp      | 02h | ok  |  7.1 | 24 degrees C",
		"FAN1             | 03h | ns  | 29.1 | No Reading",
		"Pwr Consumption  | 04h | ok  | 10.1 | 8 Watts")
	l.mustIpmitool(t, 0, nil, "power", "on")
	waitPower(t, l, 0, machine.PowerOn)
	check(l.mustIpmitool(t, 0, nil, "sdr", "list"),
		"CPU Temp         | 45 degrees C      | ok",
		"FAN1             | 4800 RPM          | ok",
		"Pwr Consumption  | 180 Watts         | ok")
	check(l.mustIpmitool(t, 0, nil, "sdr", "type", "Fan"), "FAN1             | 03h | ok  | 29.1 | 4800 RPM")
	check(l.mustIpmitool(t, 0, nil, "sensor"),
		"CPU Temp         | 45.000     | degrees C  | ok    | na        | na        | 5.000     | 85.000    | 90.000    | 95.000")
	check(l.mustIpmitool(t, 0, nil, "sdr", "info"), "Record Count                        : 4")
}

// TestFreeIPMISensors: ipmi-sensors caches the SDR (it refused an empty
// one: "SDR record count invalid") and reads every sensor.
func TestFreeIPMISensors(t *testing.T) {
	testenv.Integration(t)
	bin := testenv.Command(t, "ipmi-sensors")
	l := newLab(t, 1, "127.0.0.1", nil)
	cache := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		argv := append([]string{"-h", l.addrs[0], "-u", testUser, "-p", testPass, "-D", "LAN_2_0", "--sdr-cache-directory", cache, "--quiet-cache"}, args...)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, bin, argv...).CombinedOutput()
		t.Logf("ipmi-sensors %s: %s", strings.Join(args, " "), out)
		if err != nil {
			t.Fatalf("ipmi-sensors %v: %v", args, err)
		}
		return string(out)
	}
	out := run()
	for _, want := range []string{
		"1  | CPU Temp        | Temperature | N/A        | C     | N/A",
		"2  | System Temp     | Temperature | 24.00      | C     | 'OK'",
		"4  | Pwr Consumption | Current     | 8.00       | W     | 'OK'",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("ipmi-sensors while off lacks %q", want)
		}
	}
	l.mustIpmitool(t, 0, nil, "power", "on")
	waitPower(t, l, 0, machine.PowerOn)
	out = run("--output-sensor-thresholds")
	for _, want := range []string{
		"1  | CPU Temp        | Temperature | 45.00      | C     | N/A        | N/A        | 5.00       | 85.00      | 90.00      | 95.00      | 'OK'",
		"3  | FAN1            | Fan         | 4800.00    | RPM   | 200.00     | 400.00     | 600.00     | N/A        | N/A        | N/A        | 'OK'",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("ipmi-sensors while on lacks %q", want)
		}
	}
}
