package ipmi

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/ipmi/client"
	"github.com/bmlab/bmlab/internal/ipmi/session"
	"github.com/bmlab/bmlab/internal/ipmi/wire"
)

// openFrom sends n Open Session requests from src (a loopback address the
// test binds, standing for a forged source) and reads their answers.
func openFrom(t *testing.T, bmcAddr, src string, n int) []wire.OpenSessionResponse {
	t.Helper()
	conn, err := net.ListenPacket("udp", net.JoinHostPort(src, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	to, err := net.ResolveUDPAddr("udp", bmcAddr)
	if err != nil {
		t.Fatal(err)
	}
	var out []wire.OpenSessionResponse
	buf := make([]byte, 512)
	for i := range n {
		osr := wire.OpenSessionRequest{Tag: uint8(i), ConsoleID: uint32(i + 1), Algorithms: session.Suites[17].Algorithms}
		pkt := wire.RMCP{Sequence: wire.RMCPNoAck, Class: wire.ClassIPMI}.Append(nil)
		pkt = wire.AppendV2(pkt, wire.V2Header{PayloadType: wire.PayloadOpenSessionRequest}, osr.Append(nil))
		if _, err := conn.WriteTo(pkt, to); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		k, _, err := conn.ReadFrom(buf)
		if err != nil {
			t.Fatalf("Open Session %d from %s: %v", i, src, err)
		}
		_, rest, err := wire.DecodeRMCP(buf[:k])
		if err != nil {
			t.Fatal(err)
		}
		pk, err := wire.DecodeV2(rest)
		if err != nil {
			t.Fatal(err)
		}
		r, err := wire.DecodeOpenSessionResponse(pk.Payload)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// Open Session needs no credentials and its source can be forged: a flood of
// them from many sources must neither lock out an honest console nor push
// out an established session (issue 15: 17 forged requests filled the table
// for 10 s).
func TestForgedOpenSessionsCannotFillTheTable(t *testing.T) {
	l := newLab(t, 1, "127.0.0.1", nil)
	ctx := context.Background()
	cfg := client.Config{Username: testUser, Password: testPass}
	est, err := client.Dial(ctx, l.addrs[0], cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer est.Close()
	for i := range 40 {
		for _, r := range openFrom(t, l.addrs[0], fmt.Sprintf("127.0.1.%d", i+1), 1) {
			if r.Status != wire.StatusOK {
				t.Fatalf("forged Open Session %d: status %s", i, r.Status)
			}
		}
	}
	c, err := client.Dial(ctx, l.addrs[0], cfg)
	if err != nil {
		t.Fatalf("an honest console after 40 forged Open Sessions: %v", err)
	}
	c.Close()
	if code, _, err := est.Do(wire.NetFnChassis, cmdGetChassisStatus); err != nil || code != wire.CodeOK {
		t.Errorf("the established session after the flood: %v %v", err, code)
	}
	// One source holds at most pendingPerSource sessions in set-up.
	openFrom(t, l.addrs[0], "127.0.2.1", 3*pendingPerSource)
	l.mgr.mu.Lock()
	b := l.mgr.bmcs[l.ids[0]]
	l.mgr.mu.Unlock()
	b.mu.Lock()
	n := 0
	for _, s := range b.sessions {
		if s.src.String() == "127.0.2.1" {
			n++
		}
	}
	b.mu.Unlock()
	if n > pendingPerSource {
		t.Errorf("one source holds %d sessions in set-up, want at most %d", n, pendingPerSource)
	}
}
