package session

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"

	"github.com/bmlab/bmlab/internal/ipmi/wire"
)

// Errors of Open; the BMC drops such packets silently, as the spec asks
// (IPMI v2.0 §13.28.4: a packet that fails its integrity check is discarded).
var (
	ErrIntegrity = errors.New("integrity check failed")
	ErrNotSealed = errors.New("packet lacks the session's integrity or confidentiality")
	ErrDecrypt   = errors.New("payload does not decrypt")
)

// nextHeader is the RMCP+ session trailer's next header byte (IPMI v2.0
// §13.6, Table 13-8).
const nextHeader = 0x07

// Keys are an established session's keys: K1 for integrity, K2 for
// confidentiality (IPMI v2.0 §13.32). A Keys is safe for concurrent use.
type Keys struct {
	suite Suite
	k1    []byte
	block cipher.Block
	ihash func() hash.Hash
}

// NewKeys derives K1 and K2 from the session integrity key (IPMI v2.0
// §13.32: Kn = HMAC_SIK(const n), the constant being 20 bytes of n for
// every algorithm, SHA-256 included, as ipmitool and FreeIPMI have it).
func NewKeys(s Suite, sik []byte) (*Keys, error) {
	k := &Keys{suite: s}
	if h := newHash(s.Auth); h != nil {
		const n = 20
		k.k1 = mac(h, sik, bytes.Repeat([]byte{1}, n))
		k2 := mac(h, sik, bytes.Repeat([]byte{2}, n))
		if s.Conf == ConfAESCBC128 {
			if len(k2) < 16 {
				return nil, fmt.Errorf("K2 has %d bytes, AES-CBC-128 needs 16", len(k2))
			}
			b, err := aes.NewCipher(k2[:16])
			if err != nil {
				return nil, err
			}
			k.block = b
		}
	}
	switch s.Integrity {
	case IntegrityHMACSHA1_96:
		k.ihash = sha1.New
	case IntegrityHMACSHA256128:
		k.ihash = sha256.New
	case IntegrityNone:
	default:
		return nil, fmt.Errorf("integrity algorithm %#02x not supported", s.Integrity)
	}
	return k, nil
}

// Suite returns the session's cipher suite.
func (k *Keys) Suite() Suite { return k.suite }

func (k *Keys) authCodeLen() int { return AuthCodeLen(k.suite.Integrity) }

// integrityPad is the number of 0xFF bytes that make the signed part of a
// packet, from the auth type through the next header, a multiple of 4
// (IPMI v2.0 §13.28.4).
func integrityPad(headerAndPayload int) int {
	return (4 - (headerAndPayload+2)%4) % 4
}

// Seal appends to dst the session header, the payload (encrypted when the
// suite has confidentiality) and the session trailer with its auth code.
func (k *Keys) Seal(dst []byte, h wire.V2Header, payload []byte) []byte {
	h.Encrypted = k.block != nil
	h.Authenticated = k.ihash != nil
	if k.block != nil {
		payload = k.encrypt(payload)
	}
	start := len(dst)
	dst = wire.AppendV2(dst, h, payload)
	if k.ihash == nil {
		return dst
	}
	pad := integrityPad(len(dst) - start)
	for range pad {
		dst = append(dst, 0xff)
	}
	dst = append(dst, byte(pad), nextHeader)
	code := mac(k.ihash, k.k1, dst[start:])[:k.authCodeLen()]
	return append(dst, code...)
}

// Open checks a packet's integrity and returns its payload, decrypted.
func (k *Keys) Open(p wire.V2Packet) ([]byte, error) {
	if k.ihash != nil {
		if !p.Header.Authenticated {
			return nil, ErrNotSealed
		}
		n := k.authCodeLen()
		pad := integrityPad(len(p.Whole) - len(p.Trailer))
		if len(p.Trailer) != pad+2+n {
			return nil, fmt.Errorf("%w: trailer has %d bytes, want %d", ErrIntegrity, len(p.Trailer), pad+2+n)
		}
		if int(p.Trailer[pad]) != pad || p.Trailer[pad+1] != nextHeader {
			return nil, fmt.Errorf("%w: bad pad length or next header", ErrIntegrity)
		}
		signed := p.Whole[:len(p.Whole)-n]
		if !Equal(mac(k.ihash, k.k1, signed)[:n], p.Whole[len(p.Whole)-n:]) {
			return nil, ErrIntegrity
		}
	}
	if k.block == nil {
		return p.Payload, nil
	}
	if !p.Header.Encrypted {
		return nil, ErrNotSealed
	}
	return k.decrypt(p.Payload)
}

// encrypt is AES-CBC-128 as IPMI v2.0 §13.29 has it: a random 16-byte IV,
// then the data padded with 1, 2, 3, … and the pad length, to a multiple of
// 16 bytes, encrypted.
func (k *Keys) encrypt(data []byte) []byte {
	pad := (16 - (len(data)+1)%16) % 16
	out := make([]byte, 16, 16+len(data)+pad+1)
	if _, err := rand.Read(out[:16]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	out = append(out, data...)
	for i := 1; i <= pad; i++ {
		out = append(out, byte(i))
	}
	out = append(out, byte(pad))
	cipher.NewCBCEncrypter(k.block, out[:16]).CryptBlocks(out[16:], out[16:])
	return out
}

func (k *Keys) decrypt(p []byte) ([]byte, error) {
	if len(p) < 32 || len(p)%16 != 0 {
		return nil, fmt.Errorf("%w: want an IV and a multiple of 16 bytes, got %d", ErrDecrypt, len(p))
	}
	out := make([]byte, len(p)-16)
	cipher.NewCBCDecrypter(k.block, p[:16]).CryptBlocks(out, p[16:])
	pad := int(out[len(out)-1])
	if pad > 15 || pad+1 > len(out) {
		return nil, fmt.Errorf("%w: pad length %d", ErrDecrypt, pad)
	}
	return out[:len(out)-1-pad], nil
}

// Window is the inbound session sequence number window (IPMI v2.0
// §6.12.13): a number is accepted once, when it is at most 15 above the
// highest accepted so far or, not yet seen, at most 16 below it. Zero is
// never valid in a session. The first number accepted sets the window.
type Window struct {
	top     uint32
	seen    uint32 // bit i: top-1-i was accepted
	started bool
}

// Accept reports whether seq is inside the window and new, and records it.
func (w *Window) Accept(seq uint32) bool {
	if seq == 0 {
		return false
	}
	if !w.started {
		w.started, w.top = true, seq
		return true
	}
	d := int64(seq) - int64(w.top)
	if d < -(1 << 31) { // wrapped past 2^32
		d += 1 << 32
	} else if d > 1<<31 {
		d -= 1 << 32
	}
	switch {
	case d > 0 && d <= 15:
		w.seen = w.seen<<d | 1<<(d-1)
		w.top = seq
		return true
	case d < 0 && d >= -16:
		bit := uint32(1) << (-d - 1)
		if w.seen&bit != 0 {
			return false
		}
		w.seen |= bit
		return true
	}
	return false
}
