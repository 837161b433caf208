// Package lldp sends what a switch announces on a port (IEEE 802.1AB) to
// a VM's NIC: one frame per tap, built from the NIC's machine.LLDP, so
// what a node hears on the wire is what its BMC's Redfish reports as the
// port's LLDPReceive. `vbmcd lldp` runs it for the machines it serves.
package lldp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"github.com/bmlab/bmlab/internal/machine"
)

// TTL is how long a receiver keeps a frame's information (TLV Time To
// Live), four transmit intervals as 802.1AB's defaults.
const TTL = 120

// Multicast is the nearest-bridge group address: a bridge never forwards
// it, so a frame reaches only the NIC at the other end of the tap.
var Multicast = net.HardwareAddr{0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e}

// EtherType is LLDP's.
const EtherType = 0x88cc

// TLV types and subtypes used here.
const (
	tlvEnd        = 0
	tlvChassisID  = 1
	tlvPortID     = 2
	tlvTTL        = 3
	tlvSystemName = 5
	tlvSystemCaps = 7
	tlvMgmtAddr   = 8
	tlvOrg        = 127

	chassisMAC    = 4 // MAC address
	chassisIfName = 6 // interface name
	portIfName    = 5 // interface name
	capBridge     = 1 << 2
)

// Frame is the Ethernet frame a switch sends on l's port, from src (the
// port's MAC address): chassis ID (the bridge's MAC, or its name), port ID
// (the tap's name), TTL, system name, system capabilities (a bridge), the
// management address when there is one, and the port VLAN ID (IEEE 802.1
// organizationally specific TLV) when there is one.
func Frame(l machine.LLDP, src net.HardwareAddr) ([]byte, error) {
	if l.PortID == "" || l.ChassisID == "" {
		return nil, errors.New("lldp: no port or chassis")
	}
	f := make([]byte, 0, 128)
	f = append(f, Multicast...)
	f = append(f, src...)
	f = binary.BigEndian.AppendUint16(f, EtherType)
	tlv := func(typ int, v []byte) {
		f = binary.BigEndian.AppendUint16(f, uint16(typ)<<9|uint16(len(v)))
		f = append(f, v...)
	}
	switch l.ChassisIDSubtype {
	case "MacAddr":
		mac, err := net.ParseMAC(l.ChassisID)
		if err != nil {
			return nil, fmt.Errorf("lldp: chassis %q: %w", l.ChassisID, err)
		}
		tlv(tlvChassisID, append([]byte{chassisMAC}, mac...))
	default:
		tlv(tlvChassisID, append([]byte{chassisIfName}, l.ChassisID...))
	}
	tlv(tlvPortID, append([]byte{portIfName}, l.PortID...))
	tlv(tlvTTL, binary.BigEndian.AppendUint16(nil, TTL))
	if l.SystemName != "" {
		tlv(tlvSystemName, []byte(l.SystemName))
	}
	tlv(tlvSystemCaps, []byte{0, capBridge, 0, capBridge})
	if a, err := netip.ParseAddr(l.ManagementIPv4); err == nil && a.Is4() {
		v := []byte{5, 1} // address string length, IANA family IPv4
		v = append(v, a.AsSlice()...)
		v = append(v, 1, 0, 0, 0, 0, 0) // interface numbering unknown, 0; no OID
		tlv(tlvMgmtAddr, v)
	}
	if l.VLAN != 0 {
		tlv(tlvOrg, []byte{0x00, 0x80, 0xc2, 1, byte(l.VLAN >> 8), byte(l.VLAN)})
	}
	tlv(tlvEnd, nil)
	return f, nil
}

// Send sends l's frame out of its port (the tap named l.PortID), from the
// tap's MAC address. A tap that is not in this network namespace (the
// machine runs on another host) is an error that names it.
func Send(l machine.LLDP) error {
	ifi, err := net.InterfaceByName(l.PortID)
	if err != nil {
		return fmt.Errorf("lldp: port %s: %w", l.PortID, err)
	}
	f, err := Frame(l, ifi.HardwareAddr)
	if err != nil {
		return err
	}
	fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW, 0) // send only: no protocol, nothing received
	if err != nil {
		return fmt.Errorf("lldp: packet socket: %w", err)
	}
	defer syscall.Close(fd)
	to := &syscall.SockaddrLinklayer{Protocol: htons(EtherType), Ifindex: ifi.Index, Halen: 6}
	copy(to.Addr[:], Multicast)
	if err := syscall.Sendto(fd, f, 0, to); err != nil {
		return fmt.Errorf("lldp: send on %s: %w", l.PortID, err)
	}
	return nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
