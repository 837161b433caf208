package ipmi

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/accounts"
	"github.com/bmlab/bmlab/internal/ipmi/client"
	"github.com/bmlab/bmlab/internal/ipmi/wire"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/sim"
	"github.com/bmlab/bmlab/internal/testenv"
)

// kcsDir is a directory for in-band sockets with a short path (a unix
// socket's path holds at most 107 bytes; t.TempDir's are long).
func kcsDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "kcs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// newKCSLab is a lab whose n sim machines each have an in-band socket, and
// a LAN BMC on 127.0.0.1.
func newKCSLab(t testing.TB, n int, opts ...Option) *lab {
	t.Helper()
	return newLab(t, n, "127.0.0.1", sim.New(n, sim.WithIPMISockets(kcsDir(t))), opts...)
}

// kcs connects to machine i's in-band socket as qemu does, once the BMC
// listens there.
func (l *lab) kcs(t testing.TB, i int) *client.KCS {
	t.Helper()
	path := l.machine(t, i).IPMISocket
	var k *client.KCS
	if !testenv.WaitFor(5*time.Second, func() bool {
		var err error
		k, err = client.DialKCS(context.Background(), path, client.QEMUCapabilities)
		return err == nil
	}) {
		t.Fatalf("nothing listens on %s", path)
	}
	t.Cleanup(func() { k.Close() })
	return k
}

// must runs a request in-band and wants it answered with code OK.
func must(t testing.TB, k *client.KCS, netFn wire.NetFn, cmd uint8, data ...byte) []byte {
	t.Helper()
	code, out, err := k.Do(netFn, cmd, data...)
	if err != nil || code != wire.CodeOK {
		t.Fatalf("in-band %02x/%02x % x: code %v, err %v", netFn, cmd, data, code, err)
	}
	return out
}

func wantCode(t testing.TB, what string, got, want wire.CompletionCode, err error) {
	t.Helper()
	if err != nil || got != want {
		t.Errorf("%s: code %v (err %v), want %v", what, got, err, want)
	}
}

// TestInbandSharesTheBMC: what the OS sets through its KCS is what the LAN
// face and the model read, and the reverse: one BMC.
func TestInbandSharesTheBMC(t *testing.T) {
	testenv.Integration(t)
	l := newKCSLab(t, 1)
	k := l.kcs(t, 0)
	lan := l.dial(t, 0, 17)

	// In-band: Force PXE, persistent, UEFI.
	must(t, k, wire.NetFnChassis, cmdSetBootOptions, bootParamFlags, 0xe0, devPXE<<2, 0, 0, 0)
	want := machine.Boot{Target: machine.BootPxe, Enabled: machine.BootContinuous, Mode: machine.BootModeUEFI}
	if got := l.machine(t, 0).Settings.Boot; got != want {
		t.Errorf("model after in-band bootdev: %+v, want %+v", got, want)
	}
	code, data, err := lan.Do(wire.NetFnChassis, cmdGetBootOptions, bootParamFlags, 0, 0)
	if err != nil || code != wire.CodeOK || !bytes.Equal(data, []byte{1, bootParamFlags, 0xe0, devPXE << 2, 0, 0, 0}) {
		t.Errorf("LAN reads % x (code %v, %v) after the in-band set", data, code, err)
	}
	// The model (Redfish's path): Cd, Once; in-band reads it.
	cd, once := machine.BootCd, machine.BootOnce
	if _, err := l.svc.SetBoot(context.Background(), l.ids[0], machine.BootPatch{Target: &cd, Enabled: &once}); err != nil {
		t.Fatal(err)
	}
	if got := must(t, k, wire.NetFnChassis, cmdGetBootOptions, bootParamFlags, 0, 0); !bytes.Equal(got, []byte{1, bootParamFlags, 0xa0, devCDROM << 2, 0, 0, 0}) {
		t.Errorf("in-band reads % x after the model's Cd Once", got)
	}
	// Power from the OS.
	must(t, k, wire.NetFnChassis, cmdChassisControl, 0x01)
	waitPower(t, l, 0, machine.PowerOn)
	if got := must(t, k, wire.NetFnChassis, cmdGetChassisStatus); got[0]&1 != 1 {
		t.Errorf("chassis status in-band: % x, want power on", got)
	}
	// Channel info: "this channel" is the system interface; the LAN
	// channel is there too, as ipmitool's lan print looks for it.
	if got := must(t, k, wire.NetFnApp, cmdGetChannelInfo, currentChannel); got[0] != systemChannel || got[1] != 0x0c || got[2] != 0x05 {
		t.Errorf("channel info of this channel: % x, want channel 0Fh, system interface, KCS", got)
	}
	if got := must(t, k, wire.NetFnApp, cmdGetChannelInfo, lanChannel); got[1] != 0x04 {
		t.Errorf("channel info of channel 1: % x, want 802.3 LAN", got)
	}
	// Commands of LAN sessions are not the system interface's; its own
	// commands are not the LAN's.
	c, _, err := k.Do(wire.NetFnApp, cmdActivatePayload, 1, 1, 0xc0, 0, 0, 0)
	wantCode(t, "Activate Payload in-band", c, wire.CodeNotInPresentState, err)
	c, _, err = lan.Do(wire.NetFnApp, cmdGetMessageFlags)
	wantCode(t, "Get Message Flags over LAN", c, wire.CodeInsufficientPriv, err)
}

// TestInbandReachesOnlyItsMachine: each socket is one machine's; what one
// guest does reaches no other machine.
func TestInbandReachesOnlyItsMachine(t *testing.T) {
	testenv.Integration(t)
	l := newKCSLab(t, 2)
	if a, b := l.machine(t, 0).IPMISocket, l.machine(t, 1).IPMISocket; a == b || a == "" {
		t.Fatalf("sockets %q and %q", a, b)
	}
	k0 := l.kcs(t, 0)
	must(t, k0, wire.NetFnChassis, cmdSetBootOptions, bootParamFlags, 0x80, devDisk<<2, 0, 0, 0)
	must(t, k0, wire.NetFnChassis, cmdChassisControl, 0x01)
	waitPower(t, l, 0, machine.PowerOn)
	if m := l.machine(t, 1); m.Power != machine.PowerOff || m.Settings.Boot.Effective() != machine.BootNone {
		t.Errorf("machine 1 changed by machine 0's guest: %s, %+v", m.Power, m.Settings.Boot)
	}
	g0 := must(t, k0, wire.NetFnApp, cmdGetSystemGUID)
	g1 := must(t, l.kcs(t, 1), wire.NetFnApp, cmdGetSystemGUID)
	if want := guidBytes(l.ids[0]); !bytes.Equal(g0, want[:]) || bytes.Equal(g0, g1) {
		t.Errorf("system GUIDs in-band: % x and % x", g0, g1)
	}
}

// TestInbandUsers: a user the OS makes is an account of this machine's BMC
// alone (it logs in over LAN here, not on another machine's BMC); the OS
// sees none of the daemon's users or global accounts, cannot change them,
// and cannot test their passwords.
func TestInbandUsers(t *testing.T) {
	testenv.Integration(t)
	st := accountStore(t)
	if _, err := st.Create(accounts.New{UserName: "global", Password: "global-password", Role: accounts.Administrator, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	l := newKCSLab(t, 2, WithAccounts(st))
	k := l.kcs(t, 0)
	name := func(s string) []byte { b := make([]byte, 16); copy(b, s); return b }
	pass := func(s string) []byte { b := make([]byte, 20); copy(b, s); return b }
	must(t, k, wire.NetFnApp, cmdSetUserName, append([]byte{5}, name("osadmin")...)...)
	must(t, k, wire.NetFnApp, cmdSetUserPassword, append([]byte{0x85, 0x02}, pass("os-admin-password")...)...)
	must(t, k, wire.NetFnApp, cmdSetUserAccess, 0x91, 5, privAdmin)
	must(t, k, wire.NetFnApp, cmdSetUserPassword, 5, 0x01)
	a, ok := st.ByName(l.ids[0], "osadmin")
	if !ok || a.System != l.ids[0] || a.Role != accounts.Administrator || !a.Enabled {
		t.Fatalf("account made in-band: %+v (found %v), want an enabled Administrator bound to %s", a, ok, l.ids[0])
	}
	c, err := client.Dial(context.Background(), l.addrs[0], client.Config{Username: "osadmin", Password: "os-admin-password", Suite: 17})
	if err != nil {
		t.Fatalf("the in-band user logs in over LAN on its machine's BMC: %v", err)
	}
	c.Close()
	if c, err := client.Dial(context.Background(), l.addrs[1], client.Config{Username: "osadmin", Password: "os-admin-password", Suite: 17, Timeout: 300 * time.Millisecond}); err == nil {
		c.Close()
		t.Error("the in-band user of machine 0 logs in on machine 1's BMC")
	}
	// The OS sees its machine's accounts only.
	var seen []string
	for id := byte(1); id <= maxUsers; id++ {
		if n := bytes.TrimRight(must(t, k, wire.NetFnApp, cmdGetUserName, id), "\x00"); len(n) > 0 {
			seen = append(seen, string(n))
		}
	}
	if diff := cmp.Diff([]string{"osadmin"}, seen); diff != "" {
		t.Errorf("user names in-band (-want +got):\n%s", diff)
	}
	// The daemon's user (ID 2) and the global account: no password test,
	// no change.
	code, _, err := k.Do(wire.NetFnApp, cmdSetUserPassword, append([]byte{0x82, 0x03}, pass(testPass)...)...)
	wantCode(t, "test the daemon user's password in-band", code, wire.CodeInvalidDataField, err)
	g, _ := st.ByName("", "global")
	code, _, err = k.Do(wire.NetFnApp, cmdSetUserName, append([]byte{g.Slot}, name("mine")...)...)
	wantCode(t, "rename the global account in-band", code, wire.CodeInsufficientPriv, err)
	code, _, err = k.Do(wire.NetFnApp, cmdSetUserPassword, append([]byte{0x80 | g.Slot, 0x02}, pass("taken-over-password")...)...)
	wantCode(t, "set the global account's password in-band", code, wire.CodeInsufficientPriv, err)
	if _, _, err := st.Verify("", "global", "global-password", ""); err != nil {
		t.Errorf("the global account's password changed: %v", err)
	}
	// Its own account's password: tested, but guessing is bounded (the OS
	// has no address to throttle or lock): inbandGuessBurst wrong tests,
	// then node busy before anything is compared, the right one too.
	var codes []string
	for range inbandGuessBurst + 2 {
		code, _, err := k.Do(wire.NetFnApp, cmdSetUserPassword, append([]byte{0x85, 0x03}, pass("guess")...)...)
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, code.String())
	}
	code, _, err = k.Do(wire.NetFnApp, cmdSetUserPassword, append([]byte{0x85, 0x03}, pass("os-admin-password")...)...)
	wantCode(t, "test of the right password in-band after the guesses", code, wire.CodeNodeBusy, err)
	want := strings.Repeat(codePasswordTestFailed.String()+",", inbandGuessBurst) + strings.Repeat(wire.CodeNodeBusy.String()+",", 2)
	if got := strings.Join(codes, ",") + ","; got != want {
		t.Errorf("%d wrong in-band password tests answered %s; want %d failures, then node busy", inbandGuessBurst+2, got, inbandGuessBurst)
	}
	// Machine 1's BMC, whose tests the guesses did not spend.
	k1 := l.kcs(t, 1)
	code, _, err = k1.Do(wire.NetFnApp, cmdSetUserPassword, append([]byte{0x85, 0x03}, pass("guess")...)...)
	wantCode(t, "machine 1's OS tests a password at its empty slot 5", code, wire.CodeInvalidDataField, err)
}

// TestInbandMachineUserHidden: a machine's own BMC user (Settings.Credentials,
// bound to its machine since issue 46) is a fixed user: its OS neither sees
// it, tests its password, nor changes it.
func TestInbandMachineUserHidden(t *testing.T) {
	st := accountStore(t)
	l := newKCSLab(t, 1, WithAccounts(st))
	if _, err := l.svc.UpdateSettings(context.Background(), l.ids[0], func(s *machine.Settings) error {
		s.Credentials = []machine.Credential{{Username: "m0-bmc", Password: "m0-bmc-pass"}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	k := l.kcs(t, 0)
	// The users follow the settings: wait until its own user logs in over
	// LAN at machine 0's BMC.
	if !testenv.WaitFor(5*time.Second, func() bool {
		c, err := client.Dial(context.Background(), l.addrs[0], client.Config{Username: "m0-bmc", Password: "m0-bmc-pass", Timeout: 300 * time.Millisecond})
		if err == nil {
			c.Close()
		}
		return err == nil
	}) {
		t.Fatal("machine 0's own user never logs in at its BMC")
	}
	name := make([]byte, 16)
	copy(name, "taken")
	pw := make([]byte, 16)
	copy(pw, "m0-bmc-pass")
	for _, tc := range []struct {
		what string
		cmd  uint8
		data []byte
		want wire.CompletionCode
	}{
		{"its name", cmdGetUserName, []byte{2}, wire.CodeOK},
		{"a test of its password", cmdSetUserPassword, append([]byte{2, 3}, pw...), wire.CodeInvalidDataField},
		{"a new password", cmdSetUserPassword, append([]byte{2, 2}, pw...), wire.CodeNotInPresentState},
		{"a new name", cmdSetUserName, append([]byte{2}, name...), wire.CodeNotInPresentState},
	} {
		code, data, err := k.Do(wire.NetFnApp, tc.cmd, tc.data...)
		wantCode(t, "machine 0's own user in-band: "+tc.what, code, tc.want, err)
		if tc.cmd == cmdGetUserName && len(bytes.TrimRight(data, "\x00")) != 0 {
			t.Errorf("the OS reads its BMC's own user's name: %q", data)
		}
	}
}

// TestInbandLANConfig: `lan print`'s parameters, the same over LAN and
// in-band: the machine's own BMC address, the prefix and gateway of its
// host network, the BMC's MAC; read-only.
func TestInbandLANConfig(t *testing.T) {
	testenv.Integration(t)
	host := func(a netip.Addr) (int, netip.Addr) {
		return 24, netip.MustParseAddr("127.0.0.254")
	}
	l := newKCSLab(t, 1, WithHostNet(host))
	if _, err := l.svc.UpdateSettings(context.Background(), l.ids[0], func(s *machine.Settings) error {
		s.BMCAddress = "127.0.0.10"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	k := l.kcs(t, 0)
	lan := l.dial(t, 0, 17)
	mac := machine.BMCMAC(l.ids[0])
	for _, tc := range []struct {
		param byte
		want  []byte
	}{
		{lanIPAddress, []byte{127, 0, 0, 10}},
		{lanIPSource, []byte{1}},
		{lanMAC, mac},
		{lanSubnetMask, []byte{255, 255, 255, 0}},
		{lanGateway, []byte{127, 0, 0, 254}},
		{lanIPv6Enables, []byte{0}},
	} {
		got := must(t, k, wire.NetFnTransport, cmdGetLANConfig, lanChannel, tc.param, 0, 0)
		if !bytes.Equal(got, append([]byte{lanRevision}, tc.want...)) {
			t.Errorf("in-band parameter %d: % x, want % x", tc.param, got[1:], tc.want)
		}
		code, viaLAN, err := lan.Do(wire.NetFnTransport, cmdGetLANConfig, currentChannel, tc.param, 0, 0)
		if err != nil || code != wire.CodeOK || !bytes.Equal(viaLAN, got) {
			t.Errorf("LAN parameter %d: % x (code %v, %v), in-band % x", tc.param, viaLAN, code, err, got)
		}
	}
	code, _, err := k.Do(wire.NetFnTransport, cmdGetLANConfig, currentChannel, lanIPAddress, 0, 0)
	wantCode(t, "LAN parameters of the system interface", code, wire.CodeInvalidDataField, err)
	code, _, err = k.Do(wire.NetFnTransport, cmdSetLANConfig, lanChannel, lanIPAddress, 10, 0, 0, 1)
	wantCode(t, "set the IP address", code, codeLANParamReadOnly, err)
	code, _, err = k.Do(wire.NetFnTransport, cmdGetLANConfig, lanChannel, 16, 0, 0)
	wantCode(t, "community string", code, codeLANParamUnsupported, err)
}

// TestInbandDeviceID: mc info carries the personality's manufacturer and
// its BMC firmware, or the version a firmware update left.
func TestInbandDeviceID(t *testing.T) {
	testenv.Integration(t)
	l := newKCSLab(t, 1, WithPersonality("idrac9"))
	k := l.kcs(t, 0)
	got := must(t, k, wire.NetFnApp, cmdGetDeviceID)
	// 7.10.70.00: major 7, minor 10 in BCD, aux 70 (46h) 0; Dell, 674.
	want := []byte{0x20, 0x01, 0x07, 0x10, 0x02, 0x87, 0xa2, 0x02, 0x00, 0x01, 0x00, 70, 0, 0, 0}
	if !bytes.Equal(got, want) {
		t.Errorf("device ID % x, want % x", got, want)
	}
	if _, err := l.svc.UpdateSettings(context.Background(), l.ids[0], func(s *machine.Settings) error {
		s.Personality = "ilo6"
		s.Firmware = map[machine.FirmwareComponent]string{machine.FirmwareBMC: "1.62"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got = must(t, k, wire.NetFnApp, cmdGetDeviceID)
	if got[2] != 1 || got[3] != 0x62 || binary.LittleEndian.Uint16(got[6:8]) != 11 {
		t.Errorf("device ID % x, want HPE (11), firmware 1.62", got)
	}
}

// TestInbandSEL: power changes are logged, read the same over LAN and
// in-band; clearing leaves the record of the clearing.
func TestInbandSEL(t *testing.T) {
	testenv.Integration(t)
	l := newKCSLab(t, 1)
	k := l.kcs(t, 0)
	lan := l.dial(t, 0, 17)
	ctx := context.Background()
	if err := l.svc.Reset(ctx, l.ids[0], machine.ResetOn); err != nil {
		t.Fatal(err)
	}
	waitPower(t, l, 0, machine.PowerOn)
	if err := l.svc.Reset(ctx, l.ids[0], machine.ResetForceOff); err != nil {
		t.Fatal(err)
	}
	waitPower(t, l, 0, machine.PowerOff)
	read := func(do func(wire.NetFn, uint8, ...byte) (wire.CompletionCode, []byte, error)) [][]byte {
		var out [][]byte
		for id := uint16(0); id != 0xffff; {
			code, d, err := do(wire.NetFnStorage, cmdGetSELEntry, 0, 0, byte(id), byte(id>>8), 0, 0xff)
			if err == nil && code == wire.CodeNotPresent && id == 0 {
				// An empty SEL (IPMI v2.0 §31.5: CBh): the manager
				// logs a power change when the model's event reaches
				// it, which may be after waitPower has seen the state.
				return out
			}
			if err != nil || code != wire.CodeOK {
				t.Fatalf("Get SEL Entry %d: %v %v", id, code, err)
			}
			id = binary.LittleEndian.Uint16(d[0:2])
			out = append(out, d[2:])
		}
		return out
	}
	var recs [][]byte
	if !testenv.WaitFor(3*time.Second, func() bool { recs = read(k.Do); return len(recs) >= 2 }) {
		t.Fatalf("%d SEL records after a power on and off, want 2", len(recs))
	}
	type ev struct{ typ, sensor, offset byte }
	var got []ev
	for _, r := range recs {
		got = append(got, ev{r[10], r[11], r[13] & 0x0f})
	}
	want := []ev{{sensorTypeACPIPower, sensorACPIPower, 0x00}, {sensorTypeACPIPower, sensorACPIPower, 0x05}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(ev{})); diff != "" {
		t.Errorf("SEL (-want +got):\n%s", diff)
	}
	if viaLAN := read(lan.Do); !slices.EqualFunc(viaLAN, recs, bytes.Equal) {
		t.Errorf("LAN reads another SEL:\n% x\nin-band:\n% x", viaLAN, recs)
	}
	// Platform events: in-band with system software's generator ID
	// first (as ipmitool sends it there), over LAN without one.
	must(t, k, wire.NetFnSensor, cmdPlatformEvent, genSystem, 0x04, 0x01, 0x30, 0x01, 0x09, 0xff, 0xff)
	if code, _, err := lan.Do(wire.NetFnSensor, cmdPlatformEvent, 0x04, 0x01, 0x30, 0x01, 0x09, 0xff, 0xff); err != nil || code != wire.CodeOK {
		t.Fatalf("platform event over LAN: %v %v", code, err)
	}
	recs = read(lan.Do)
	if n := len(recs); n != 4 || binary.LittleEndian.Uint16(recs[2][7:9]) != genSystem || binary.LittleEndian.Uint16(recs[3][7:9]) != wire.RemoteConsoleAddr|lanChannel<<12 {
		t.Errorf("platform events logged as % x", recs)
	}
	resv := must(t, k, wire.NetFnStorage, cmdReserveSEL)
	code, _, err := k.Do(wire.NetFnStorage, cmdClearSEL, resv[0]+1, resv[1], 'C', 'L', 'R', 0xaa)
	wantCode(t, "clear with a stale reservation", code, wire.CodeReservationInvalid, err)
	must(t, k, wire.NetFnStorage, cmdClearSEL, resv[0], resv[1], 'C', 'L', 'R', 0xaa)
	if recs := read(lan.Do); len(recs) != 1 || recs[0][10] != sensorTypeEventLogging || recs[0][13]&0x0f != 0x02 {
		t.Errorf("after clearing: % x, want one \"log area reset/cleared\" record", recs)
	}
}

// TestInbandAttention: with the event message buffer on, a new event sets
// the attention bit; reading the buffer empties it and clears the bit.
// qemu's reset starts the system interface over.
func TestInbandAttention(t *testing.T) {
	testenv.Integration(t)
	l := newKCSLab(t, 1)
	k := l.kcs(t, 0)
	must(t, k, wire.NetFnApp, cmdSetGlobalEnables, enableEventBuf|enableSELLog|enableRecvIRQ)
	if err := l.svc.Reset(context.Background(), l.ids[0], machine.ResetOn); err != nil {
		t.Fatal(err)
	}
	has := func(c wire.VMCommand) func() bool {
		return func() bool { return slices.Contains(k.Commands(), c) }
	}
	if !testenv.WaitFor(3*time.Second, has(wire.VMCmdAttn)) {
		t.Fatalf("no attention after an event; commands %v", k.Commands())
	}
	if !slices.Contains(k.Commands(), wire.VMCmdEnableIRQ) {
		t.Errorf("the receive message interrupt enabled, qemu not told: %v", k.Commands())
	}
	if got := must(t, k, wire.NetFnApp, cmdGetMessageFlags); got[0] != flagEventBuffer {
		t.Errorf("message flags % x, want the event buffer full", got)
	}
	ev := must(t, k, wire.NetFnApp, cmdReadEventBuffer)
	if len(ev) != 16 || ev[10] != sensorTypeACPIPower || ev[13] != 0x00 {
		t.Errorf("event buffer: % x, want the S0 record", ev)
	}
	if !testenv.WaitFor(3*time.Second, has(wire.VMCmdNoAttn)) {
		t.Errorf("attention not cleared: %v", k.Commands())
	}
	code, _, err := k.Do(wire.NetFnApp, cmdReadEventBuffer)
	wantCode(t, "read the empty buffer", code, codeNoData, err)
	if err := k.Send(wire.VMCmdReset); err != nil {
		t.Fatal(err)
	}
	if !testenv.WaitFor(3*time.Second, func() bool {
		got := must(t, k, wire.NetFnApp, cmdGetGlobalEnables)
		return got[0] == enablesAtReset
	}) {
		t.Error("global enables not as at power-up after qemu's reset")
	}
}

// TestInbandWatchdog: the OS arms the watchdog and stops resetting it: the
// pre-timeout comes as the messaging interrupt, then the action powers the
// machine down, logged in the SEL; Get Watchdog Timer tells the expiry.
func TestInbandWatchdog(t *testing.T) {
	testenv.Integration(t)
	l := newKCSLab(t, 1)
	k := l.kcs(t, 0)
	code, _, err := k.Do(wire.NetFnApp, cmdResetWatchdog)
	wantCode(t, "reset before set", code, codeWatchdogUninitialized, err)
	code, _, err = k.Do(wire.NetFnApp, cmdSetWatchdog, 0x04, wdPreSMI<<4|wdActPowerDown, 1, 0, 20, 0)
	wantCode(t, "SMI pre-timeout", code, wire.CodeInvalidDataField, err)
	if err := l.svc.Reset(context.Background(), l.ids[0], machine.ResetOn); err != nil {
		t.Fatal(err)
	}
	waitPower(t, l, 0, machine.PowerOn)
	// SMS/OS use, power down after 2 s, messaging interrupt 1 s before.
	must(t, k, wire.NetFnApp, cmdSetWatchdog, 0x04, wdPreMsg<<4|wdActPowerDown, 1, 0x10, 20, 0)
	if got := must(t, k, wire.NetFnApp, cmdGetWatchdog); got[0]&wdRunning != 0 {
		t.Errorf("running before Reset Watchdog Timer: % x", got)
	}
	must(t, k, wire.NetFnApp, cmdResetWatchdog)
	if !testenv.WaitFor(5*time.Second, func() bool { return slices.Contains(k.Commands(), wire.VMCmdAttn) }) {
		t.Fatalf("no pre-timeout attention: %v", k.Commands())
	}
	if got := must(t, k, wire.NetFnApp, cmdGetMessageFlags); got[0]&flagWatchdogPre == 0 {
		t.Errorf("message flags % x, want the watchdog pre-timeout", got)
	}
	waitPower(t, l, 0, machine.PowerOff)
	got := must(t, k, wire.NetFnApp, cmdGetWatchdog)
	if got[0]&wdRunning != 0 || got[3] != 1<<4 {
		t.Errorf("after expiry % x: want stopped, SMS/OS expired", got)
	}
	last := must(t, k, wire.NetFnStorage, cmdGetSELEntry, 0, 0, 0xff, 0xff, 0, 0xff)
	var found bool
	for id := uint16(0); id != 0xffff; {
		d := must(t, k, wire.NetFnStorage, cmdGetSELEntry, 0, 0, byte(id), byte(id>>8), 0, 0xff)
		id = binary.LittleEndian.Uint16(d[0:2])
		if d[2+10] == sensorTypeWatchdog2 && d[2+13] == 0xc0|wdActPowerDown {
			found = true
		}
	}
	if !found {
		t.Errorf("no Watchdog 2 power down record; last % x", last)
	}
}

// TestInbandFloodIsPaced: a guest that floods its interface is answered at
// its machine's rate; another machine's guest is answered meanwhile,
// within its burst.
func TestInbandFloodIsPaced(t *testing.T) {
	testenv.Integration(t)
	const rate, burst, flood = 50, 10, 60
	l := newKCSLab(t, 2, WithInbandRate(rate, burst))
	k0, k1 := l.kcs(t, 0), l.kcs(t, 1)
	done := make(chan time.Duration, 1)
	start := time.Now()
	go func() {
		for range flood {
			if _, _, err := k0.Do(wire.NetFnApp, cmdGetDeviceID); err != nil {
				break
			}
		}
		done <- time.Since(start)
	}()
	for range burst {
		must(t, k1, wire.NetFnApp, cmdGetDeviceID)
	}
	select {
	case took := <-done:
		t.Errorf("the flood of %d requests ended (%v) before the other machine's %d were answered", flood, took, burst)
	default:
	}
	// The flood cannot beat the rate: the requests past the burst take
	// at least (flood-burst)/rate.
	if took, least := <-done, time.Duration(flood-burst)*time.Second/rate; took < least {
		t.Errorf("%d requests in %v, faster than the rate allows (%v)", flood, took, least)
	}
}

// TestInbandResets: a BMC reset asked in-band is answered, then the BMC
// hangs up (qemu answers the guest "initialization in progress" until it
// reconnects) and takes the next connection.
func TestInbandResets(t *testing.T) {
	testenv.Integration(t)
	l := newKCSLab(t, 1)
	k := l.kcs(t, 0)
	must(t, k, wire.NetFnApp, cmdColdReset)
	select {
	case <-k.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the BMC kept the connection after a cold reset")
	}
	must(t, l.kcs(t, 0), wire.NetFnApp, cmdGetDeviceID)
}

// TestInbandSocketFiles: a stale socket is replaced, a regular file in the
// socket's place is left alone, garbage on the stream is skipped.
func TestInbandSocketFiles(t *testing.T) {
	testenv.Integration(t)
	dir := kcsDir(t)
	be := sim.New(2, sim.WithIPMISockets(dir))
	ms := be.List()
	stale := ms[0].IPMISocket
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close() // the file stays, nobody listens: a daemon that died
	if err := os.WriteFile(ms[1].IPMISocket, []byte("not a socket"), 0o600); err != nil {
		t.Fatal(err)
	}
	l := newLab(t, 2, "127.0.0.1", be)
	k := l.kcs(t, 0)
	if _, err := k.Conn().Write([]byte{0x13, 0x37, wire.VMMsgChar, 0xaa, wire.VMCmdChar}); err != nil {
		t.Fatal(err)
	}
	must(t, k, wire.NetFnApp, cmdGetDeviceID)
	if b, err := os.ReadFile(ms[1].IPMISocket); err != nil || string(b) != "not a socket" {
		t.Errorf("the regular file was touched: %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Clean(stale)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode: %v %v, want 0600", fi.Mode(), err)
	}
}
