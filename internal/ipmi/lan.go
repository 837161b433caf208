package ipmi

import (
	"net"
	"net/netip"

	"github.com/bmlab/bmlab/internal/ipmi/wire"
	"github.com/bmlab/bmlab/internal/machine"
)

// The LAN configuration parameters (IPMI v2.0 §23.1-§23.2, Table 23-4):
// what `ipmitool lan print` and `lan6 print` show, over LAN and in-band,
// and what ironic-python-agent reads as the node's BMC address and MAC
// (hardware.py, get_bmc_address, get_bmc_mac, get_bmc_v6address). They
// describe the machine's BMC NIC (machine.NICOf): the machine's own BMC
// address (--bmc-addresses), else its endpoint's, else the service's
// listener; the prefix and gateway of the host network the address is on;
// the BMC's own MAC. They are read-only: the BMC's address is vbmcd's
// configuration, not the BMC's (Set answers "parameter is read-only").

// LAN configuration parameters.
const (
	lanSetInProgress   = 0
	lanAuthSupport     = 1
	lanAuthEnables     = 2
	lanIPAddress       = 3
	lanIPSource        = 4
	lanMAC             = 5
	lanSubnetMask      = 6
	lanIPv4Header      = 7
	lanARPControl      = 10
	lanGratuitousARP   = 11
	lanGateway         = 12
	lanGatewayMAC      = 13
	lanBackupGateway   = 14
	lanBackupGwMAC     = 15
	lanVLANID          = 20
	lanVLANPriority    = 21
	lanCipherCount     = 22
	lanCipherSuites    = 23
	lanCipherPrivLevel = 24
	lanIPv6Support     = 50
	lanIPv6Enables     = 51
	lanIPv6Status      = 55
	lanIPv6Static      = 56
	lanIPv6Dynamic     = 59
)

// Completion codes of Get/Set LAN Configuration Parameters (§23.1, §23.2).
const (
	codeLANParamUnsupported wire.CompletionCode = 0x80
	codeLANParamReadOnly    wire.CompletionCode = 0x82
)

// lanRevision is the parameter revision byte (§23.2: 11h).
const lanRevision = 0x11

// nic is this machine's BMC NIC now.
func (b *bmc) nic() (machine.BMCNIC, wire.CompletionCode) {
	m, cc := b.machine()
	if cc != wire.CodeOK {
		return machine.BMCNIC{}, cc
	}
	return machine.NICOf(m, b.cfg.addr, b.cfg.hostNet), wire.CodeOK
}

// lanChannelOf resolves a channel number of a LAN configuration request:
// the LAN channel, or "this channel" over LAN. The system interface has no
// LAN configuration.
func lanChannelOf(s *sessRef, c byte) bool {
	c &= 0x0f
	return c == lanChannel || (c == currentChannel && (s == nil || !s.system))
}

// getLANConfig (IPMI v2.0 §23.2): channel (bit 7: the revision only),
// parameter, set selector, block selector.
func (b *bmc) getLANConfig(s *sessRef, d []byte) (wire.CompletionCode, []byte) {
	if !lanChannelOf(s, d[0]) {
		return wire.CodeInvalidDataField, nil
	}
	out := []byte{lanRevision}
	if d[0]&0x80 != 0 {
		return wire.CodeOK, out
	}
	param, set := d[1], d[2]
	nic, cc := b.nic()
	if cc != wire.CodeOK {
		return cc, nil
	}
	v4 := nic.Address.Is4()
	ip4 := func(a netip.Addr) []byte {
		if a.IsValid() && a.Is4() {
			b := a.As4()
			return b[:]
		}
		return []byte{0, 0, 0, 0}
	}
	switch param {
	case lanSetInProgress:
		return wire.CodeOK, append(out, 0x00) // set complete
	case lanAuthSupport:
		return wire.CodeOK, append(out, 0x00) // no IPMI v1.5 authentication type (RMCP+ only)
	case lanAuthEnables:
		return wire.CodeOK, append(out, 0, 0, 0, 0, 0)
	case lanIPAddress:
		if !v4 {
			return wire.CodeOK, append(out, 0, 0, 0, 0)
		}
		return wire.CodeOK, append(out, ip4(nic.Address)...)
	case lanIPSource:
		src := byte(0x01) // static address
		if !nic.Address.IsValid() {
			src = 0x00 // unspecified
		}
		return wire.CodeOK, append(out, src)
	case lanMAC:
		return wire.CodeOK, append(out, nic.MAC...)
	case lanSubnetMask:
		if !v4 || nic.Bits == 0 {
			return wire.CodeOK, append(out, 0, 0, 0, 0)
		}
		return wire.CodeOK, append(out, net.CIDRMask(nic.Bits, 32)...)
	case lanIPv4Header:
		// The spec's defaults: TTL 40h, don't fragment, precedence 0,
		// TOS "minimize delay" (§23.2, parameter 7).
		return wire.CodeOK, append(out, 0x40, 0x40, 0x10)
	case lanARPControl:
		return wire.CodeOK, append(out, 0x02) // ARP responses on, gratuitous ARP off
	case lanGratuitousARP:
		return wire.CodeOK, append(out, 0x00)
	case lanGateway:
		if !v4 {
			return wire.CodeOK, append(out, 0, 0, 0, 0)
		}
		return wire.CodeOK, append(out, ip4(nic.Gateway)...)
	case lanGatewayMAC, lanBackupGwMAC:
		return wire.CodeOK, append(out, 0, 0, 0, 0, 0, 0) // unknown
	case lanBackupGateway:
		return wire.CodeOK, append(out, 0, 0, 0, 0)
	case lanVLANID:
		return wire.CodeOK, append(out, 0x00, 0x00) // VLAN off
	case lanVLANPriority:
		return wire.CodeOK, append(out, 0x00)
	case lanCipherCount:
		return wire.CodeOK, append(out, byte(len(b.cfg.suites())))
	case lanCipherSuites:
		return wire.CodeOK, append(append(out, 0x00), b.cfg.suites()...)
	case lanCipherPrivLevel:
		// Nibbles for the fixed suites 0-14 (Table 22-19): the maximum
		// privilege of each one offered, administrator; suite 17 has no
		// nibble here.
		levels := make([]byte, 9)
		for _, id := range b.cfg.suites() {
			if id <= 14 {
				levels[1+id/2] |= privAdmin << (4 * (id % 2))
			}
		}
		return wire.CodeOK, append(out, levels...)
	case lanIPv6Support:
		return wire.CodeOK, append(out, 0x03) // IPv6 alone, or with IPv4
	case lanIPv6Enables:
		if nic.Address.Is6() {
			return wire.CodeOK, append(out, 0x01) // IPv6 addressing only
		}
		return wire.CodeOK, append(out, 0x00) // IPv4 only
	case lanIPv6Status:
		return wire.CodeOK, append(out, 1, 1, 0x00) // one static address, one dynamic slot, no SLAAC or DHCPv6
	case lanIPv6Static:
		if set != 0 {
			return wire.CodeParamOutOfRange, nil
		}
		rec := append(out, 0x00) // set selector
		if nic.Address.Is6() {
			a := nic.Address.As16()
			rec = append(rec, 0x80) // enabled, static
			rec = append(rec, a[:]...)
			return wire.CodeOK, append(rec, byte(nic.Bits), 0x00) // prefix, status active
		}
		rec = append(rec, 0x00) // disabled
		rec = append(rec, make([]byte, 16)...)
		return wire.CodeOK, append(rec, 0, 0x01) // status disabled
	case lanIPv6Dynamic:
		if set != 0 {
			return wire.CodeParamOutOfRange, nil
		}
		// The one dynamic slot is unused: the address is static.
		rec := append(out, 0x00, 0x00)
		rec = append(rec, make([]byte, 16)...)
		return wire.CodeOK, append(rec, 0, 0x01) // status disabled
	}
	return codeLANParamUnsupported, nil
}

// setLANConfig (IPMI v2.0 §23.1): the parameters are vbmcd's
// configuration; only Set In Progress is taken (and kept "set complete").
func (b *bmc) setLANConfig(s *sessRef, d []byte) (wire.CompletionCode, []byte) {
	if !lanChannelOf(s, d[0]) {
		return wire.CodeInvalidDataField, nil
	}
	switch d[1] {
	case lanSetInProgress:
		if len(d) != 3 {
			return wire.CodeDataLengthInvalid, nil
		}
		return wire.CodeOK, nil
	case lanAuthSupport, lanIPAddress, lanIPSource, lanMAC, lanSubnetMask, lanGateway, lanGatewayMAC,
		lanBackupGateway, lanBackupGwMAC, lanCipherCount, lanCipherSuites, lanIPv6Support, lanIPv6Status,
		lanIPv6Enables, lanIPv6Static, lanIPv6Dynamic, lanAuthEnables, lanIPv4Header, lanARPControl,
		lanGratuitousARP, lanVLANID, lanVLANPriority, lanCipherPrivLevel:
		return codeLANParamReadOnly, nil
	}
	return codeLANParamUnsupported, nil
}
