package session

import (
	"crypto/hmac"
	"encoding/binary"
)

// Exchange is what both ends know of a RAKP exchange once RAKP Message 2 is
// out (IPMI v2.0 §13.31): the ids, the two random numbers, the BMC's GUID,
// the requested role byte and the user name.
type Exchange struct {
	Auth          uint8 // authentication algorithm
	ConsoleID     uint32
	BMCID         uint32
	ConsoleRandom [16]byte
	BMCRandom     [16]byte
	GUID          [16]byte
	Role          uint8 // the whole role byte of RAKP Message 1
	Username      []byte
}

func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

// RAKP2Code is the key exchange auth code of RAKP Message 2:
// HMAC_Kuid(SIDm, SIDc, Rm, Rc, GUIDc, ROLEm, ULENGTHm, UNAMEm), where m is
// the remote console and c the BMC (IPMI v2.0 §13.31).
func (e *Exchange) RAKP2Code(kuid []byte) []byte {
	h := newHash(e.Auth)
	if h == nil {
		return nil
	}
	return mac(h, kuid, le32(e.ConsoleID), le32(e.BMCID), e.ConsoleRandom[:], e.BMCRandom[:], e.GUID[:],
		[]byte{e.Role, byte(len(e.Username))}, e.Username)
}

// RAKP3Code is the key exchange auth code of RAKP Message 3:
// HMAC_Kuid(Rc, SIDm, ROLEm, ULENGTHm, UNAMEm) (IPMI v2.0 §13.31).
func (e *Exchange) RAKP3Code(kuid []byte) []byte {
	h := newHash(e.Auth)
	if h == nil {
		return nil
	}
	return mac(h, kuid, e.BMCRandom[:], le32(e.ConsoleID), []byte{e.Role, byte(len(e.Username))}, e.Username)
}

// SIK is the session integrity key: HMAC_Kg(Rm, Rc, ROLEm, ULENGTHm,
// UNAMEm), with Kg the BMC key or, when there is none, Kuid (IPMI v2.0
// §13.31, §13.32).
func (e *Exchange) SIK(kg []byte) []byte {
	h := newHash(e.Auth)
	if h == nil {
		return nil
	}
	return mac(h, kg, e.ConsoleRandom[:], e.BMCRandom[:], []byte{e.Role, byte(len(e.Username))}, e.Username)
}

// RAKP4Code is the integrity check value of RAKP Message 4:
// HMAC_SIK(Rm, SIDc, GUIDc), truncated per the algorithm (IPMI v2.0 §13.31).
func (e *Exchange) RAKP4Code(sik []byte) []byte {
	h := newHash(e.Auth)
	if h == nil {
		return nil
	}
	return mac(h, sik, e.ConsoleRandom[:], le32(e.BMCID), e.GUID[:])[:ICVLen(e.Auth)]
}

// Equal compares auth codes in constant time.
func Equal(a, b []byte) bool { return hmac.Equal(a, b) }
