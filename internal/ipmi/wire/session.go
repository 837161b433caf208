package wire

import "encoding/binary"

// AuthType is the first byte of a session header: an IPMI v1.5
// authentication type, or RMCP+ format (IPMI v2.0 §13.6, Table 13-8).
type AuthType uint8

// Authentication types.
const (
	AuthNone     AuthType = 0x00
	AuthMD2      AuthType = 0x01
	AuthMD5      AuthType = 0x02
	AuthPassword AuthType = 0x04
	AuthOEM      AuthType = 0x05
	AuthRMCPPlus AuthType = 0x06
)

// V15Header is the IPMI v1.5 session header (IPMI v2.0 §13.6, Table 13-8,
// "IPMI v1.5 Session Wrapper"). AuthCode is present unless AuthType is none.
type V15Header struct {
	AuthType  AuthType
	Sequence  uint32
	SessionID uint32
	AuthCode  []byte // 16 bytes, or nil for AuthNone
}

// DecodeV15 decodes a v1.5 session header and returns it with the message it
// wraps. b starts at the authentication type byte.
func DecodeV15(b []byte) (V15Header, []byte, error) {
	const fixed = 1 + 4 + 4 + 1
	if len(b) < fixed {
		return V15Header{}, nil, short("v1.5 session header", fixed, len(b))
	}
	h := V15Header{
		AuthType:  AuthType(b[0]),
		Sequence:  binary.LittleEndian.Uint32(b[1:5]),
		SessionID: binary.LittleEndian.Uint32(b[5:9]),
	}
	if h.AuthType == AuthRMCPPlus {
		return V15Header{}, nil, malformed("auth type 6 is RMCP+, not a v1.5 header")
	}
	rest := b[9:]
	if h.AuthType != AuthNone {
		if len(rest) < 16+1 {
			return V15Header{}, nil, short("v1.5 session header with auth code", fixed+16, len(b))
		}
		h.AuthCode = rest[:16]
		rest = rest[16:]
	}
	n := int(rest[0])
	rest = rest[1:]
	if len(rest) < n {
		return V15Header{}, nil, short("v1.5 message", n, len(rest))
	}
	return h, rest[:n], nil
}

// AppendV15 appends a v1.5 session header and msg to b.
func AppendV15(b []byte, h V15Header, msg []byte) []byte {
	b = append(b, byte(h.AuthType))
	b = binary.LittleEndian.AppendUint32(b, h.Sequence)
	b = binary.LittleEndian.AppendUint32(b, h.SessionID)
	if h.AuthType != AuthNone {
		var code [16]byte
		copy(code[:], h.AuthCode)
		b = append(b, code[:]...)
	}
	b = append(b, byte(len(msg)))
	return append(b, msg...)
}

// PayloadType is an RMCP+ payload type (IPMI v2.0 §13.27.3, Table 13-16).
type PayloadType uint8

// Payload types.
const (
	PayloadIPMI                PayloadType = 0x00
	PayloadSOL                 PayloadType = 0x01
	PayloadOEM                 PayloadType = 0x02
	PayloadOpenSessionRequest  PayloadType = 0x10
	PayloadOpenSessionResponse PayloadType = 0x11
	PayloadRAKP1               PayloadType = 0x12
	PayloadRAKP2               PayloadType = 0x13
	PayloadRAKP3               PayloadType = 0x14
	PayloadRAKP4               PayloadType = 0x15
)

// V2Header is the IPMI v2.0/RMCP+ session header (IPMI v2.0 §13.6, Table
// 13-8, "IPMI v2.0/RMCP+ Session Header").
type V2Header struct {
	Encrypted     bool
	Authenticated bool
	PayloadType   PayloadType
	OEMIANA       uint32 // only for PayloadOEM
	OEMPayloadID  uint16 // only for PayloadOEM
	SessionID     uint32
	Sequence      uint32
}

// V2Packet is a decoded RMCP+ packet: its header, its payload and the
// session trailer that follows (integrity pad, pad length, next header and
// auth code; empty when the packet is not authenticated). Whole is every byte
// after the RMCP header; the integrity auth code covers all of it but the
// auth code itself (IPMI v2.0 §13.28.4).
type V2Packet struct {
	Header  V2Header
	Payload []byte
	Trailer []byte
	Whole   []byte
}

// DecodeV2 decodes an RMCP+ packet; b starts at the auth type byte (0x06).
func DecodeV2(b []byte) (V2Packet, error) {
	if len(b) < 2 {
		return V2Packet{}, short("rmcp+ session header", 12, len(b))
	}
	if AuthType(b[0]) != AuthRMCPPlus {
		return V2Packet{}, malformed("auth type %#02x, want 0x06 (RMCP+)", b[0])
	}
	var h V2Header
	h.Encrypted = b[1]&0x80 != 0
	h.Authenticated = b[1]&0x40 != 0
	h.PayloadType = PayloadType(b[1] & 0x3f)
	off := 2
	want := 12
	if h.PayloadType == PayloadOEM {
		want += 6
	}
	if len(b) < want {
		return V2Packet{}, short("rmcp+ session header", want, len(b))
	}
	if h.PayloadType == PayloadOEM {
		h.OEMIANA = binary.LittleEndian.Uint32(b[2:6])
		h.OEMPayloadID = binary.LittleEndian.Uint16(b[6:8])
		off = 8
	}
	h.SessionID = binary.LittleEndian.Uint32(b[off : off+4])
	h.Sequence = binary.LittleEndian.Uint32(b[off+4 : off+8])
	n := int(binary.LittleEndian.Uint16(b[off+8 : off+10]))
	off += 10
	if len(b) < off+n {
		return V2Packet{}, short("rmcp+ payload", off+n, len(b))
	}
	return V2Packet{Header: h, Payload: b[off : off+n], Trailer: b[off+n:], Whole: b}, nil
}

// AppendV2 appends an RMCP+ session header and payload to b. The session
// trailer, when the packet is authenticated, is the session layer's to add.
func AppendV2(b []byte, h V2Header, payload []byte) []byte {
	t := byte(h.PayloadType) & 0x3f
	if h.Encrypted {
		t |= 0x80
	}
	if h.Authenticated {
		t |= 0x40
	}
	b = append(b, byte(AuthRMCPPlus), t)
	if h.PayloadType == PayloadOEM {
		b = binary.LittleEndian.AppendUint32(b, h.OEMIANA)
		b = binary.LittleEndian.AppendUint16(b, h.OEMPayloadID)
	}
	b = binary.LittleEndian.AppendUint32(b, h.SessionID)
	b = binary.LittleEndian.AppendUint32(b, h.Sequence)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(payload)))
	return append(b, payload...)
}
