package lldp

import (
	"encoding/binary"
	"net"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
)

// TestFrameDecodedByTcpdump: tcpdump, an independent LLDP decoder, reads
// in each frame what the port's LLDPReceive says: the chassis (a bridge's
// MAC, or its name), the port (the tap), the system name, a bridge's
// capabilities, the management address and the port VLAN when there are.
func TestFrameDecodedByTcpdump(t *testing.T) {
	tcpdump := testenv.Command(t, "tcpdump")
	src := net.HardwareAddr{0xfe, 0x54, 0x00, 0x11, 0x22, 0x33}
	for _, c := range []struct {
		l    machine.LLDP
		want []string
		not  []string
	}{
		{machine.LLDP{ChassisID: "52:54:00:26:00:0A", ChassisIDSubtype: "MacAddr", SystemName: "bmnat-lab", PortID: "vnet7", ManagementIPv4: "10.198.65.1"},
			[]string{"fe:54:00:11:22:33 > 01:80:c2:00:00:0e, ethertype LLDP (0x88cc)", "Chassis ID TLV (1), length 7 Subtype MAC address (4): 52:54:00:26:00:0a",
				"Port ID TLV (2), length 6 Subtype Interface Name (5): vnet7", "Time to Live TLV (3), length 2: TTL 120s",
				"System Name TLV (5), length 9: bmnat-lab", "Bridge", "Management Address length 5, AFI IPv4 (1): 10.198.65.1", "End TLV (0), length 0"},
			[]string{"VLAN"}},
		{machine.LLDP{ChassisID: "baremetal", ChassisIDSubtype: "IfName", SystemName: "baremetal", PortID: "vnet12", VLAN: 120},
			[]string{"Subtype Interface name (6): baremetal", "Subtype Interface Name (5): vnet12", "port vlan id (PVID): 120"},
			[]string{"Management Address"}},
	} {
		f, err := Frame(c.l, src)
		if err != nil {
			t.Fatal(err)
		}
		got := decode(t, tcpdump, f)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%+v: tcpdump's decoding lacks %q:\n%s", c.l, w, got)
			}
		}
		for _, n := range c.not {
			if strings.Contains(got, n) {
				t.Errorf("%+v: tcpdump's decoding has %q:\n%s", c.l, n, got)
			}
		}
		if strings.Contains(got, "malformed") || strings.Contains(got, "invalid") {
			t.Errorf("%+v: tcpdump finds the frame broken:\n%s", c.l, got)
		}
	}
	if _, err := Frame(machine.LLDP{ChassisID: "x", ChassisIDSubtype: "MacAddr", PortID: "vnet0"}, src); err == nil {
		t.Error("a MacAddr chassis that is no MAC address: no error")
	}
}

// decode writes a frame to a pcap file and returns tcpdump's verbose
// decoding, with runs of blanks made one space.
func decode(t *testing.T, tcpdump string, frame []byte) string {
	t.Helper()
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, 0xa1b2c3d4)
	b = binary.LittleEndian.AppendUint16(b, 2)
	b = binary.LittleEndian.AppendUint16(b, 4)
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint32(b, 65535)
	b = binary.LittleEndian.AppendUint32(b, 1) // Ethernet
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(frame)))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(frame)))
	b = append(b, frame...)
	p := testenv.WriteFile(t, t.TempDir(), "lldp.pcap", b)
	out, err := exec.Command(tcpdump, "-r", p, "-e", "-nn", "-vv").CombinedOutput()
	if err != nil {
		t.Fatalf("tcpdump: %v\n%s", err, out)
	}
	return regexp.MustCompile(`[ \t\n]+`).ReplaceAllString(string(out), " ")
}
