package session

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"hash"

	"github.com/bmlab/bmlab/internal/ipmi/wire"
)

// Authentication algorithms (IPMI v2.0 §13.28, Table 13-17).
const (
	AuthNone       = 0x00
	AuthHMACSHA1   = 0x01
	AuthHMACMD5    = 0x02
	AuthHMACSHA256 = 0x03
)

// Integrity algorithms (IPMI v2.0 §13.28.4, Table 13-18).
const (
	IntegrityNone          = 0x00
	IntegrityHMACSHA1_96   = 0x01
	IntegrityHMACMD5_128   = 0x02
	IntegrityMD5_128       = 0x03
	IntegrityHMACSHA256128 = 0x04
)

// Confidentiality algorithms (IPMI v2.0 §13.28.5, Table 13-19).
const (
	ConfNone      = 0x00
	ConfAESCBC128 = 0x01
)

// Suite is a cipher suite: an ID and its algorithm triple (IPMI v2.0
// §22.15.2, Table 22-20).
type Suite struct {
	ID uint8
	wire.Algorithms
}

// Suites the BMC can speak, by ID. 3 and 17 are the ones clients use; 0
// (no authentication at all) is only offered when explicitly enabled.
var Suites = map[uint8]Suite{
	0:  {0, wire.Algorithms{Auth: AuthNone, Integrity: IntegrityNone, Conf: ConfNone}},
	3:  {3, wire.Algorithms{Auth: AuthHMACSHA1, Integrity: IntegrityHMACSHA1_96, Conf: ConfAESCBC128}},
	17: {17, wire.Algorithms{Auth: AuthHMACSHA256, Integrity: IntegrityHMACSHA256128, Conf: ConfAESCBC128}},
}

// Lookup returns the suite among ids whose algorithms are a.
func Lookup(ids []uint8, a wire.Algorithms) (Suite, bool) {
	for _, id := range ids {
		if s, ok := Suites[id]; ok && s.Algorithms == a {
			return s, true
		}
	}
	return Suite{}, false
}

// newHash returns the hash of an authentication algorithm, nil for none.
func newHash(auth uint8) func() hash.Hash {
	switch auth {
	case AuthHMACSHA1:
		return sha1.New
	case AuthHMACMD5:
		return md5.New
	case AuthHMACSHA256:
		return sha256.New
	}
	return nil
}

func mac(h func() hash.Hash, key []byte, parts ...[]byte) []byte {
	m := hmac.New(h, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// ICVLen is the length of the RAKP 4 integrity check value of an
// authentication algorithm (IPMI v2.0 §13.28.1–§13.28.1b): HMAC-SHA1-96,
// HMAC-MD5-128, HMAC-SHA256-128.
func ICVLen(auth uint8) int {
	switch auth {
	case AuthHMACSHA1:
		return 12
	case AuthHMACMD5, AuthHMACSHA256:
		return 16
	}
	return 0
}

// AuthCodeLen is the length of a packet's integrity auth code (IPMI v2.0
// §13.28.4, Table 13-18).
func AuthCodeLen(integrity uint8) int {
	switch integrity {
	case IntegrityHMACSHA1_96:
		return 12
	case IntegrityHMACMD5_128, IntegrityMD5_128, IntegrityHMACSHA256128:
		return 16
	}
	return 0
}
