package wire

import "encoding/binary"

// RMCP message classes (ASF 2.0 §3.2.2.1, IPMI v2.0 §13.1.3).
const (
	ClassASF  = 0x06
	ClassIPMI = 0x07
	classAck  = 0x80
)

// RMCPVersion is RMCP version 1.0 (IPMI v2.0 §13.1.3).
const RMCPVersion = 0x06

// RMCPNoAck is the sequence number of RMCP messages that want no RMCP ACK,
// which IPMI messages always are (IPMI v2.0 §13.1.3).
const RMCPNoAck = 0xff

// RMCP is the 4-byte RMCP header (IPMI v2.0 §13.1.3, Table 13-2).
type RMCP struct {
	Sequence uint8
	Class    uint8 // the message class, bits 4:0
	Ack      bool
}

// RMCPLen is the length of an RMCP header.
const RMCPLen = 4

// DecodeRMCP decodes the RMCP header at the start of b and returns the rest.
func DecodeRMCP(b []byte) (RMCP, []byte, error) {
	if len(b) < RMCPLen {
		return RMCP{}, nil, short("rmcp header", RMCPLen, len(b))
	}
	if b[0] != RMCPVersion {
		return RMCP{}, nil, malformed("rmcp version %#02x, want %#02x", b[0], RMCPVersion)
	}
	return RMCP{Sequence: b[2], Class: b[3] & 0x1f, Ack: b[3]&classAck != 0}, b[RMCPLen:], nil
}

// Append appends the header to b.
func (r RMCP) Append(b []byte) []byte {
	c := r.Class & 0x1f
	if r.Ack {
		c |= classAck
	}
	return append(b, RMCPVersion, 0, r.Sequence, c)
}

// ASF message types (ASF 2.0 §3.2.4).
const (
	ASFPresencePong = 0x40
	ASFPresencePing = 0x80
)

// asfIANA is the ASF enterprise number, 4542 (ASF 2.0 §3.2.4.1).
const asfIANA = 4542

// ASF is an ASF message header: enterprise number, type, tag and the data
// (ASF 2.0 §3.2.4, Table 13-3 in IPMI v2.0).
type ASF struct {
	Type uint8
	Tag  uint8
	Data []byte
}

const asfHeaderLen = 8

// DecodeASF decodes an ASF message (after the RMCP header).
func DecodeASF(b []byte) (ASF, error) {
	if len(b) < asfHeaderLen {
		return ASF{}, short("asf message", asfHeaderLen, len(b))
	}
	if iana := binary.BigEndian.Uint32(b[0:4]); iana != asfIANA {
		return ASF{}, malformed("asf enterprise number %d, want %d", iana, asfIANA)
	}
	n := int(b[7])
	if len(b) < asfHeaderLen+n {
		return ASF{}, short("asf data", asfHeaderLen+n, len(b))
	}
	return ASF{Type: b[4], Tag: b[5], Data: b[asfHeaderLen : asfHeaderLen+n]}, nil
}

// Append appends the message to b.
func (a ASF) Append(b []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, asfIANA)
	b = append(b, a.Type, a.Tag, 0, byte(len(a.Data)))
	return append(b, a.Data...)
}

// PongData is the Presence Pong data of a BMC that speaks IPMI: enterprise
// number 4542, no OEM data, "IPMI supported" and ASF 1.0 in the supported
// entities, no interactions (ASF 2.0 §3.2.4.3, IPMI v2.0 §13.2.3).
func PongData() []byte {
	d := make([]byte, 16)
	binary.BigEndian.PutUint32(d[0:4], asfIANA)
	d[8] = 0x81
	return d
}
