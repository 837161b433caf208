package wire

import (
	"encoding/binary"
	"fmt"
)

// Status is an RMCP+ and RAKP message status code (IPMI v2.0 §13.24,
// Table 13-15).
type Status uint8

// RMCP+ status codes.
const (
	StatusOK                    Status = 0x00
	StatusNoResources           Status = 0x01
	StatusInvalidSessionID      Status = 0x02
	StatusInvalidPayloadType    Status = 0x03
	StatusInvalidAuthAlg        Status = 0x04
	StatusInvalidIntegrityAlg   Status = 0x05
	StatusNoMatchingAuthPayload Status = 0x06
	StatusNoMatchingIntegrity   Status = 0x07
	StatusInactiveSessionID     Status = 0x08
	StatusInvalidRole           Status = 0x09
	StatusUnauthorizedRole      Status = 0x0a
	StatusNoResourcesForRole    Status = 0x0b
	StatusInvalidNameLength     Status = 0x0c
	StatusUnauthorizedName      Status = 0x0d
	StatusUnauthorizedGUID      Status = 0x0e
	StatusInvalidIntegrityValue Status = 0x0f
	StatusInvalidConfAlg        Status = 0x10
	StatusNoCipherSuiteMatch    Status = 0x11
	StatusIllegalParameter      Status = 0x12
)

var statusNames = map[Status]string{
	StatusOK:                    "no errors",
	StatusNoResources:           "insufficient resources to create a session",
	StatusInvalidSessionID:      "invalid session ID",
	StatusInvalidPayloadType:    "invalid payload type",
	StatusInvalidAuthAlg:        "invalid authentication algorithm",
	StatusInvalidIntegrityAlg:   "invalid integrity algorithm",
	StatusNoMatchingAuthPayload: "no matching authentication payload",
	StatusNoMatchingIntegrity:   "no matching integrity payload",
	StatusInactiveSessionID:     "inactive session ID",
	StatusInvalidRole:           "invalid role",
	StatusUnauthorizedRole:      "unauthorized role or privilege level requested",
	StatusNoResourcesForRole:    "insufficient resources to create a session at the requested role",
	StatusInvalidNameLength:     "invalid name length",
	StatusUnauthorizedName:      "unauthorized name",
	StatusUnauthorizedGUID:      "unauthorized GUID",
	StatusInvalidIntegrityValue: "invalid integrity check value",
	StatusInvalidConfAlg:        "invalid confidentiality algorithm",
	StatusNoCipherSuiteMatch:    "no cipher suite match with proposed security algorithms",
	StatusIllegalParameter:      "illegal or unrecognized parameter",
}

func (s Status) String() string {
	if n, ok := statusNames[s]; ok {
		return fmt.Sprintf("%#02x (%s)", uint8(s), n)
	}
	return fmt.Sprintf("%#02x", uint8(s))
}

// Algorithms proposed or chosen for a session (IPMI v2.0 §13.17, Tables
// 13-17 to 13-19). Each is the algorithm number, bits 5:0.
type Algorithms struct {
	Auth, Integrity, Conf uint8
}

const algPayloadLen = 8

func decodeAlg(b []byte, typ uint8, what string) (uint8, error) {
	if b[0] != typ {
		return 0, malformed("%s payload type %#02x, want %#02x", what, b[0], typ)
	}
	if b[3] != algPayloadLen {
		return 0, malformed("%s payload length %d, want 8", what, b[3])
	}
	return b[4] & 0x3f, nil
}

func appendAlg(b []byte, typ, alg uint8) []byte {
	return append(b, typ, 0, 0, algPayloadLen, alg&0x3f, 0, 0, 0)
}

func decodeAlgs(b []byte) (Algorithms, error) {
	var a Algorithms
	var err error
	if a.Auth, err = decodeAlg(b[0:8], 0x00, "authentication"); err != nil {
		return a, err
	}
	if a.Integrity, err = decodeAlg(b[8:16], 0x01, "integrity"); err != nil {
		return a, err
	}
	a.Conf, err = decodeAlg(b[16:24], 0x02, "confidentiality")
	return a, err
}

func (a Algorithms) append(b []byte) []byte {
	b = appendAlg(b, 0x00, a.Auth)
	b = appendAlg(b, 0x01, a.Integrity)
	return appendAlg(b, 0x02, a.Conf)
}

// OpenSessionRequest is the RMCP+ Open Session Request (IPMI v2.0 §13.17).
type OpenSessionRequest struct {
	Tag          uint8
	MaxPrivilege uint8 // bits 3:0; 0 means the highest the algorithms allow
	ConsoleID    uint32
	Algorithms
}

const openSessionRequestLen = 32

// DecodeOpenSessionRequest decodes an Open Session Request payload.
func DecodeOpenSessionRequest(b []byte) (OpenSessionRequest, error) {
	if len(b) < openSessionRequestLen {
		return OpenSessionRequest{}, short("open session request", openSessionRequestLen, len(b))
	}
	r := OpenSessionRequest{
		Tag:          b[0],
		MaxPrivilege: b[1] & 0x0f,
		ConsoleID:    binary.LittleEndian.Uint32(b[4:8]),
	}
	var err error
	r.Algorithms, err = decodeAlgs(b[8:32])
	return r, err
}

// Append appends the encoded request to b.
func (r OpenSessionRequest) Append(b []byte) []byte {
	b = append(b, r.Tag, r.MaxPrivilege&0x0f, 0, 0)
	b = binary.LittleEndian.AppendUint32(b, r.ConsoleID)
	return r.Algorithms.append(b)
}

// OpenSessionResponse is the RMCP+ Open Session Response (IPMI v2.0 §13.18).
// When Status is not OK, only the first 8 bytes are sent.
type OpenSessionResponse struct {
	Tag          uint8
	Status       Status
	MaxPrivilege uint8
	ConsoleID    uint32
	BMCID        uint32
	Algorithms
}

// DecodeOpenSessionResponse decodes an Open Session Response payload.
func DecodeOpenSessionResponse(b []byte) (OpenSessionResponse, error) {
	if len(b) < 8 {
		return OpenSessionResponse{}, short("open session response", 8, len(b))
	}
	r := OpenSessionResponse{Tag: b[0], Status: Status(b[1]), MaxPrivilege: b[2] & 0x0f, ConsoleID: binary.LittleEndian.Uint32(b[4:8])}
	if r.Status != StatusOK {
		return r, nil
	}
	if len(b) < 36 {
		return OpenSessionResponse{}, short("open session response", 36, len(b))
	}
	r.BMCID = binary.LittleEndian.Uint32(b[8:12])
	var err error
	r.Algorithms, err = decodeAlgs(b[12:36])
	return r, err
}

// Append appends the encoded response to b.
func (r OpenSessionResponse) Append(b []byte) []byte {
	b = append(b, r.Tag, byte(r.Status), r.MaxPrivilege&0x0f, 0)
	b = binary.LittleEndian.AppendUint32(b, r.ConsoleID)
	if r.Status != StatusOK {
		return b
	}
	b = binary.LittleEndian.AppendUint32(b, r.BMCID)
	return r.Algorithms.append(b)
}

// RAKP1 is RAKP Message 1 (IPMI v2.0 §13.20).
type RAKP1 struct {
	Tag           uint8
	BMCID         uint32
	ConsoleRandom [16]byte
	Role          uint8 // the whole byte: bit 4 name-only lookup, bits 3:0 privilege
	Username      []byte
}

// DecodeRAKP1 decodes RAKP Message 1.
func DecodeRAKP1(b []byte) (RAKP1, error) {
	const fixed = 28
	if len(b) < fixed {
		return RAKP1{}, short("rakp message 1", fixed, len(b))
	}
	r := RAKP1{Tag: b[0], BMCID: binary.LittleEndian.Uint32(b[4:8]), Role: b[24]}
	copy(r.ConsoleRandom[:], b[8:24])
	n := int(b[27])
	if n > 16 {
		return RAKP1{}, malformed("rakp message 1: user name length %d, want at most 16", n)
	}
	if len(b) < fixed+n {
		return RAKP1{}, short("rakp message 1 user name", fixed+n, len(b))
	}
	r.Username = b[fixed : fixed+n]
	return r, nil
}

// Append appends the encoded message to b.
func (r RAKP1) Append(b []byte) []byte {
	b = append(b, r.Tag, 0, 0, 0)
	b = binary.LittleEndian.AppendUint32(b, r.BMCID)
	b = append(b, r.ConsoleRandom[:]...)
	b = append(b, r.Role, 0, 0, byte(len(r.Username)))
	return append(b, r.Username...)
}

// RAKP2 is RAKP Message 2 (IPMI v2.0 §13.21). When Status is not OK, only
// the first 8 bytes are sent.
type RAKP2 struct {
	Tag       uint8
	Status    Status
	ConsoleID uint32
	BMCRandom [16]byte
	BMCGUID   [16]byte
	AuthCode  []byte
}

// DecodeRAKP2 decodes RAKP Message 2.
func DecodeRAKP2(b []byte) (RAKP2, error) {
	if len(b) < 8 {
		return RAKP2{}, short("rakp message 2", 8, len(b))
	}
	r := RAKP2{Tag: b[0], Status: Status(b[1]), ConsoleID: binary.LittleEndian.Uint32(b[4:8])}
	if r.Status != StatusOK {
		return r, nil
	}
	if len(b) < 40 {
		return RAKP2{}, short("rakp message 2", 40, len(b))
	}
	copy(r.BMCRandom[:], b[8:24])
	copy(r.BMCGUID[:], b[24:40])
	r.AuthCode = b[40:]
	return r, nil
}

// Append appends the encoded message to b.
func (r RAKP2) Append(b []byte) []byte {
	b = append(b, r.Tag, byte(r.Status), 0, 0)
	b = binary.LittleEndian.AppendUint32(b, r.ConsoleID)
	if r.Status != StatusOK {
		return b
	}
	b = append(b, r.BMCRandom[:]...)
	b = append(b, r.BMCGUID[:]...)
	return append(b, r.AuthCode...)
}

// RAKP3 is RAKP Message 3 (IPMI v2.0 §13.22).
type RAKP3 struct {
	Tag      uint8
	Status   Status
	BMCID    uint32
	AuthCode []byte
}

// DecodeRAKP3 decodes RAKP Message 3.
func DecodeRAKP3(b []byte) (RAKP3, error) {
	tag, st, id, code, err := decodeReply("rakp message 3", b)
	return RAKP3{Tag: tag, Status: st, BMCID: id, AuthCode: code}, err
}

// Append appends the encoded message to b.
func (r RAKP3) Append(b []byte) []byte {
	return appendReply(b, r.Tag, r.Status, r.BMCID, r.AuthCode)
}

// RAKP4 is RAKP Message 4 (IPMI v2.0 §13.23).
type RAKP4 struct {
	Tag            uint8
	Status         Status
	ConsoleID      uint32
	IntegrityCheck []byte
}

// DecodeRAKP4 decodes RAKP Message 4.
func DecodeRAKP4(b []byte) (RAKP4, error) {
	tag, st, id, check, err := decodeReply("rakp message 4", b)
	return RAKP4{Tag: tag, Status: st, ConsoleID: id, IntegrityCheck: check}, err
}

// Append appends the encoded message to b.
func (r RAKP4) Append(b []byte) []byte {
	return appendReply(b, r.Tag, r.Status, r.ConsoleID, r.IntegrityCheck)
}

// decodeReply decodes the layout RAKP Messages 3 and 4 share (IPMI v2.0
// §13.22, §13.23): message tag, status code, two reserved bytes, a session
// ID (the peer's) and a trailing code of the negotiated algorithm's length.
func decodeReply(name string, b []byte) (tag uint8, st Status, id uint32, code []byte, err error) {
	if len(b) < 8 {
		return 0, 0, 0, nil, short(name, 8, len(b))
	}
	return b[0], Status(b[1]), binary.LittleEndian.Uint32(b[4:8]), b[8:], nil
}

// appendReply appends a message of decodeReply's layout to b.
func appendReply(b []byte, tag uint8, st Status, id uint32, code []byte) []byte {
	b = append(b, tag, byte(st), 0, 0)
	b = binary.LittleEndian.AppendUint32(b, id)
	return append(b, code...)
}

// SOL is a Serial-over-LAN payload (IPMI v2.0 §15.9, Table 15-2). Seq 0
// marks an ACK-only packet; sequence numbers run 1–15.
type SOL struct {
	Seq      uint8
	AckSeq   uint8
	Accepted uint8
	Status   uint8 // operation (console to BMC) or status (BMC to console)
	Data     []byte
}

// SOL operation and status bits (IPMI v2.0 §15.9).
const (
	SOLNack             = 0x40 // both directions
	SOLCharsUnavailable = 0x20 // BMC to console: character transfer unavailable
	SOLDeactivating     = 0x10 // BMC to console
	SOLBreak            = 0x10 // console to BMC: generate break
)

// DecodeSOL decodes a SOL payload.
func DecodeSOL(b []byte) (SOL, error) {
	if len(b) < 4 {
		return SOL{}, short("sol payload", 4, len(b))
	}
	return SOL{Seq: b[0] & 0x0f, AckSeq: b[1] & 0x0f, Accepted: b[2], Status: b[3], Data: b[4:]}, nil
}

// Append appends the encoded payload to b.
func (s SOL) Append(b []byte) []byte {
	b = append(b, s.Seq&0x0f, s.AckSeq&0x0f, s.Accepted, s.Status)
	return append(b, s.Data...)
}
