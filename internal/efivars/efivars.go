package efivars

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"unicode/utf16"
)

// GUID is an EFI GUID in its textual form, lower case
// ("8be4df61-93ca-11d2-aa0d-00e098032b8c").
type GUID string

// GUIDOf decodes the 16 bytes of an EFI_GUID: Data1 (32 bits), Data2 and
// Data3 (16 bits each) little-endian, then Data4 as 8 bytes (UEFI 2.10
// Appendix A).
func GUIDOf(b []byte) GUID {
	return GUID(fmt.Sprintf("%08x-%04x-%04x-%x-%x",
		binary.LittleEndian.Uint32(b[0:4]), binary.LittleEndian.Uint16(b[4:6]),
		binary.LittleEndian.Uint16(b[6:8]), b[8:10], b[10:16]))
}

// Well-known GUIDs.
const (
	// GlobalVariable owns PK, KEK, SetupMode, SecureBoot (UEFI 2.10 §3.3).
	GlobalVariable GUID = "8be4df61-93ca-11d2-aa0d-00e098032b8c"
	// ImageSecurityDatabase owns db and dbx (UEFI 2.10 §32.6.1).
	ImageSecurityDatabase GUID = "d719b2cb-3d3a-4596-a3bc-dad00e67656f"

	// authenticatedVariableStore marks a store of
	// AUTHENTICATED_VARIABLE_HEADERs (edk2 MdeModulePkg VariableFormat.h).
	authenticatedVariableStore GUID = "aaf32c78-947b-439a-a180-2e144ec37792"
	variableStore              GUID = "ddcf3616-3275-4164-98b6-fe85707ffe7d"
)

// certTypes names the signature types of UEFI 2.10 §32.4.1 by GUID, as the
// #define names Redfish's Signature.SignatureType uses.
var certTypes = map[GUID]string{
	"c1c41626-504c-4092-aca9-41f936934328": "EFI_CERT_SHA256_GUID",
	"3c5766e8-269c-4e34-aa14-ed776e85b3b6": "EFI_CERT_RSA2048_GUID",
	"e2b36190-879b-4a3d-ad8d-f2e7bba32784": "EFI_CERT_RSA2048_SHA256_GUID",
	"826ca512-cf10-4ac9-b187-be01496631bd": "EFI_CERT_SHA1_GUID",
	"67f8444f-8743-48f1-a328-1eaab8736080": "EFI_CERT_RSA2048_SHA1_GUID",
	"a5c059a1-94e4-4aa7-87b5-ab155c2bf072": "EFI_CERT_X509_GUID",
	"0b6e5233-a65c-44c9-9407-d9ab83bfc8bd": "EFI_CERT_SHA224_GUID",
	"ff3e5307-9fd0-48c9-85f1-8ad56c701e01": "EFI_CERT_SHA384_GUID",
	"093e0fae-a6c4-4f50-9f1b-d41e2b89c19a": "EFI_CERT_SHA512_GUID",
	"3bd2a492-96c0-4079-b420-fcf98ef103ed": "EFI_CERT_X509_SHA256_GUID",
	"7076876e-80c2-4ee6-aad2-28b349a6865b": "EFI_CERT_X509_SHA384_GUID",
	"446dbf63-2502-4cda-bcfa-2465d2b0fe9d": "EFI_CERT_X509_SHA512_GUID",
}

// X509Type is the SignatureType of an X.509 certificate entry.
const X509Type = "EFI_CERT_X509_GUID"

// Variable is one live variable of a store.
type Variable struct {
	Name       string
	Vendor     GUID
	Attributes uint32
	Data       []byte
	// offset is where the variable's header starts in the file.
	offset int
}

// Store is a parsed edk2 variable store (an OVMF_VARS.fd file).
type Store struct {
	Vars []Variable
	raw  []byte
}

// Variable states (edk2 VariableFormat.h). A state byte starts as 0xff and
// bits are cleared as the variable moves on; a live variable is ADDED, or
// ADDED while a newer copy is written (IN_DELETED_TRANSITION).
const (
	varAdded               = 0x3f
	varInDeletedTransition = 0xfe
	varDeleted             = 0xfd
	varStartID             = 0x55aa
	authHeaderLen          = 60 // AUTHENTICATED_VARIABLE_HEADER
	plainHeaderLen         = 32 // VARIABLE_HEADER
)

// Parse reads the variable store of an OVMF vars image: a firmware volume
// (PI 1.8 vol. 3 §3.2.1 EFI_FIRMWARE_VOLUME_HEADER) whose data begins with
// a VARIABLE_STORE_HEADER and holds the variables.
func Parse(raw []byte) (*Store, error) {
	if len(raw) < 0x48 {
		return nil, fmt.Errorf("firmware volume header: want at least %d bytes, got %d", 0x48, len(raw))
	}
	if string(raw[40:44]) != "_FVH" {
		return nil, errors.New("not a firmware volume: no _FVH signature at offset 40")
	}
	hlen := int(binary.LittleEndian.Uint16(raw[48:50]))
	if hlen+28 > len(raw) {
		return nil, fmt.Errorf("variable store header at %d: want %d bytes, got %d", hlen, hlen+28, len(raw))
	}
	sh := raw[hlen:]
	var header int
	switch g := GUIDOf(sh[0:16]); g {
	case authenticatedVariableStore:
		header = authHeaderLen
	case variableStore:
		header = plainHeaderLen
	default:
		return nil, fmt.Errorf("unknown variable store %s", g)
	}
	size := int(binary.LittleEndian.Uint32(sh[16:20]))
	if size > len(sh) {
		return nil, fmt.Errorf("variable store says %d bytes, file has %d after the header", size, len(sh))
	}
	s := &Store{raw: raw}
	off := hlen + 28 // sizeof(VARIABLE_STORE_HEADER)
	end := hlen + size
	for off+header <= end {
		v := raw[off:]
		if binary.LittleEndian.Uint16(v[0:2]) != varStartID {
			break // the free space
		}
		state := v[2]
		var nameLen, dataLen int
		var guid []byte
		attrs := binary.LittleEndian.Uint32(v[4:8])
		if header == authHeaderLen {
			nameLen = int(binary.LittleEndian.Uint32(v[36:40]))
			dataLen = int(binary.LittleEndian.Uint32(v[40:44]))
			guid = v[44:60]
		} else {
			nameLen = int(binary.LittleEndian.Uint32(v[8:12]))
			dataLen = int(binary.LittleEndian.Uint32(v[12:16]))
			guid = v[16:32]
		}
		total := header + nameLen + dataLen
		if nameLen < 0 || dataLen < 0 || off+total > end {
			return nil, fmt.Errorf("variable at %d: want %d bytes, store has %d", off, total, end-off)
		}
		if state == varAdded || state == varAdded&varInDeletedTransition {
			s.Vars = append(s.Vars, Variable{
				Name:       UTF16Name(v[header : header+nameLen]),
				Vendor:     GUIDOf(guid),
				Attributes: attrs,
				Data:       v[header+nameLen : total],
				offset:     off,
			})
		}
		off += (total + 3) &^ 3 // HEADER_ALIGN
	}
	return s, nil
}

// ReadFile parses the store in a vars image file.
func ReadFile(path string) (*Store, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// UTF16Name decodes a NUL-terminated UCS-2 name, little-endian, as UEFI
// stores a variable's or a GPT partition's name.
func UTF16Name(b []byte) string {
	u := make([]uint16, 0, len(b)/2)
	for i := 0; i+1 < len(b); i += 2 {
		c := binary.LittleEndian.Uint16(b[i:])
		if c == 0 {
			break
		}
		u = append(u, c)
	}
	return string(utf16.Decode(u))
}

// Get returns the live variable name of vendor, or nil.
func (s *Store) Get(name string, vendor GUID) *Variable {
	for i := range s.Vars {
		if s.Vars[i].Name == name && s.Vars[i].Vendor == vendor {
			return &s.Vars[i]
		}
	}
	return nil
}

// Without returns the image with the named variables of vendor marked
// deleted, as the variable driver marks a variable it deletes: the state
// byte loses VAR_DELETED's bit, the rest is untouched. Names the store does
// not hold are ignored.
func (s *Store) Without(vendorOf func(name string) GUID, names ...string) []byte {
	out := bytes.Clone(s.raw)
	for _, n := range names {
		if v := s.Get(n, vendorOf(n)); v != nil {
			out[v.offset+2] &= varDeleted
		}
	}
	return out
}

// Signature is one EFI_SIGNATURE_DATA of a signature list.
type Signature struct {
	// Type is the list's SignatureType, as its #define name
	// (EFI_CERT_X509_GUID), or the GUID when it is not a known one.
	Type  string
	Owner GUID
	Data  []byte
}

// IsCertificate reports whether the entry is an X.509 certificate.
func (sg Signature) IsCertificate() bool { return sg.Type == X509Type }

// Certificate parses an X.509 entry.
func (sg Signature) Certificate() (*x509.Certificate, error) {
	if !sg.IsCertificate() {
		return nil, fmt.Errorf("signature of type %s is not a certificate", sg.Type)
	}
	return x509.ParseCertificate(sg.Data)
}

// Hex is the data as Redfish's Signature.SignatureString carries it for
// the UEFI registry: hex, in the order of the bytes.
func (sg Signature) Hex() string { return hex.EncodeToString(sg.Data) }

// Fingerprint is the SHA-256 of the data, hex.
func (sg Signature) Fingerprint() string {
	h := sha256.Sum256(sg.Data)
	return hex.EncodeToString(h[:])
}

// SignatureLists decodes the EFI_SIGNATURE_LISTs of a key database
// variable (UEFI 2.10 §32.4.1): each list is a type GUID, its total size,
// a header size and a signature size, the header, then signatures of an
// owner GUID and data.
func SignatureLists(b []byte) ([]Signature, error) {
	var out []Signature
	for off := 0; off < len(b); {
		if len(b)-off < 28 {
			return nil, fmt.Errorf("signature list at %d: want 28 bytes, got %d", off, len(b)-off)
		}
		l := b[off:]
		typ := GUIDOf(l[0:16])
		listSize := int(binary.LittleEndian.Uint32(l[16:20]))
		hdrSize := int(binary.LittleEndian.Uint32(l[20:24]))
		sigSize := int(binary.LittleEndian.Uint32(l[24:28]))
		if listSize < 28 || listSize > len(l) || sigSize < 16 || 28+hdrSize > listSize || (listSize-28-hdrSize)%sigSize != 0 {
			return nil, fmt.Errorf("signature list at %d: sizes list %d, header %d, signature %d do not fit %d bytes", off, listSize, hdrSize, sigSize, len(l))
		}
		name := certTypes[typ]
		if name == "" {
			name = string(typ)
		}
		for p := 28 + hdrSize; p < listSize; p += sigSize {
			out = append(out, Signature{Type: name, Owner: GUIDOf(l[p : p+16]), Data: bytes.Clone(l[p+16 : p+sigSize])})
		}
		off += listSize
	}
	return out, nil
}
