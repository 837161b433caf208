package ipmi

import (
	"context"
	"net"
	"testing"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/ipmi/session"
	"github.com/bmlab/bmlab/internal/ipmi/wire"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/sim"
)

// fuzzBMC is a BMC without a socket, over the sim backend, with one
// established suite-0 session (id 1) so that command decoders are reached
// without keys, and a suite-17 session (id 2) for the integrity path.
func fuzzBMC(t testing.TB) *bmc {
	be := &consoleSim{Backend: sim.New(1)}
	svc := machine.NewService(be, nil)
	cfg := defaultConfig()
	cfg.cipher0 = true
	m := svc.List()[0]
	b := newBMC(context.Background(), m, svc, &cfg, zap.NewNop())
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	b.lan = &lanSock{conn: conn}
	b.users = []machine.Credential{{Username: "admin", Password: "pw"}}
	k0, _ := session.NewKeys(session.Suites[0], nil)
	k17, _ := session.NewKeys(session.Suites[17], []byte("sik"))
	b.sessions[1] = &sess{id: 1, consoleID: 11, state: stateActive, suite: session.Suites[0], limit: privAdmin, priv: privAdmin, keys: k0, user: "admin"}
	b.sessions[2] = &sess{id: 2, consoleID: 12, state: stateActive, suite: session.Suites[17], limit: privAdmin, priv: privAdmin, keys: k17, user: "admin"}
	return b
}

// inSession0 frames an IPMI request in session 1 (suite 0: no keys).
func inSession0(seq uint32, netFn wire.NetFn, cmd uint8, data []byte) []byte {
	req := wire.Request{RsAddr: 0x20, NetFn: netFn, RqAddr: 0x81, Cmd: cmd, Data: data}
	out := wire.RMCP{Sequence: 0xff, Class: wire.ClassIPMI}.Append(nil)
	return wire.AppendV2(out, wire.V2Header{SessionID: 1, Sequence: seq}, req.Append(nil))
}

// FuzzHandle feeds whole datagrams to a BMC: RMCP, ASF, v1.5 and RMCP+
// framing, session set-up, integrity, SOL and every command decoder.
func FuzzHandle(f *testing.F) {
	f.Add([]byte{0x06, 0x00, 0xff, 0x07, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0x09, 0x20, 0x18, 0xc8, 0x81, 0x00, 0x38, 0x8e, 0x04, 0xb5})
	f.Add(inSession0(1, wire.NetFnChassis, cmdSetBootOptions, []byte{5, 0xe0, 0x14, 0, 0, 0}))
	f.Add(inSession0(2, wire.NetFnChassis, cmdGetBootOptions, []byte{5, 0, 0}))
	f.Add(inSession0(3, wire.NetFnChassis, cmdChassisIdentify, []byte{0, 1}))
	f.Add(inSession0(4, wire.NetFnApp, cmdGetChannelCipherSuites, []byte{0x0e, 0, 0x80}))
	f.Add(inSession0(5, wire.NetFnApp, cmdActivatePayload, []byte{1, 1, 0xc0, 0, 0, 0}))
	f.Add(inSession0(6, wire.NetFnTransport, cmdGetSOLConfig, []byte{1, 8, 0, 0}))
	f.Add(inSession0(7, wire.NetFnApp, cmdGetSessionInfo, []byte{0xff, 1, 0, 0, 0}))
	f.Add(inSession0(8, wire.NetFnApp, cmdSetSessionPrivilege, []byte{4}))
	os := wire.OpenSessionRequest{Tag: 1, MaxPrivilege: 4, ConsoleID: 7, Algorithms: session.Suites[17].Algorithms}
	f.Add(wire.AppendV2(wire.RMCP{Sequence: 0xff, Class: wire.ClassIPMI}.Append(nil), wire.V2Header{PayloadType: wire.PayloadOpenSessionRequest}, os.Append(nil)))
	r1 := wire.RAKP1{Tag: 2, BMCID: 2, Role: 0x14, Username: []byte("admin")}
	f.Add(wire.AppendV2(wire.RMCP{Sequence: 0xff, Class: wire.ClassIPMI}.Append(nil), wire.V2Header{PayloadType: wire.PayloadRAKP1}, r1.Append(nil)))
	b := fuzzBMC(f)
	from := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9}
	f.Fuzz(func(t *testing.T, pkt []byte) {
		_ = b.handle(pkt, from)
		// Keep the sessions the corpus relies on; Close Session may drop them.
		b.mu.Lock()
		if b.sessions[1] == nil || b.sessions[2] == nil || len(b.sessions) > 8 {
			b.mu.Unlock()
			nb := fuzzBMC(t)
			b.mu.Lock()
			b.sessions = nb.sessions
		}
		b.sessions[1].window = session.Window{}
		if b.sol != nil {
			go b.sol.stop()
			b.sol = nil
		}
		b.mu.Unlock()
	})
}

// FuzzSystemInterface runs any request as the in-band face does (the
// system interface, every command at the ADMINISTRATOR level): no panic,
// an answer qemu can carry (at most 300 bytes with its header).
func FuzzSystemInterface(f *testing.F) {
	f.Add(byte(wire.NetFnTransport), byte(cmdGetLANConfig), []byte{1, 3, 0, 0})
	f.Add(byte(wire.NetFnApp), byte(cmdSetWatchdog), []byte{4, 0x32, 1, 0, 20, 0})
	f.Add(byte(wire.NetFnApp), byte(cmdSetGlobalEnables), []byte{0x0d})
	f.Add(byte(wire.NetFnStorage), byte(cmdGetSELEntry), []byte{0, 0, 0xff, 0xff, 0, 0xff})
	f.Add(byte(wire.NetFnSensor), byte(cmdPlatformEvent), []byte{0x41, 4, 0x23, 1, 0x6f, 0xc1, 0x04, 0xff})
	f.Add(byte(wire.NetFnApp), byte(cmdSetUserName), []byte("\x05osuser\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"))
	b := fuzzBMC(f)
	f.Fuzz(func(t *testing.T, netFn, cmd byte, data []byte) {
		if netFn == byte(wire.NetFnApp) && (cmd == cmdColdReset || cmd == cmdWarmReset) {
			return // resets the BMC through the model, which the fuzzer cannot undo
		}
		_, out := b.command(&sessRef{system: true}, wire.Request{NetFn: wire.NetFn(netFn & 0x3e), Cmd: cmd, Data: data})
		if len(out) > 296 {
			t.Fatalf("%d bytes of answer", len(out))
		}
		b.mu.Lock()
		b.stopWatchdogLocked()
		b.mu.Unlock()
	})
}
