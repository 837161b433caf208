package efivars

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"math/big"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/testenv"
)

// guidBytes encodes a textual GUID as an EFI_GUID.
func guidBytes(t *testing.T, g GUID) []byte {
	t.Helper()
	var b [16]byte
	h := strings.ReplaceAll(string(g), "-", "")
	var raw [16]byte
	for i := range raw {
		var v byte
		for _, c := range h[2*i : 2*i+2] {
			v <<= 4
			switch {
			case c >= '0' && c <= '9':
				v |= byte(c - '0')
			default:
				v |= byte(c-'a') + 10
			}
		}
		raw[i] = v
	}
	binary.LittleEndian.PutUint32(b[0:], binary.BigEndian.Uint32(raw[0:4]))
	binary.LittleEndian.PutUint16(b[4:], binary.BigEndian.Uint16(raw[4:6]))
	binary.LittleEndian.PutUint16(b[6:], binary.BigEndian.Uint16(raw[6:8]))
	copy(b[8:], raw[8:])
	return b[:]
}

// sigList builds one EFI_SIGNATURE_LIST of entries of one size.
func sigList(t *testing.T, typ GUID, owner GUID, entries ...[]byte) []byte {
	size := 16 + len(entries[0])
	var b bytes.Buffer
	b.Write(guidBytes(t, typ))
	binary.Write(&b, binary.LittleEndian, uint32(28+size*len(entries)))
	binary.Write(&b, binary.LittleEndian, uint32(0))
	binary.Write(&b, binary.LittleEndian, uint32(size))
	for _, e := range entries {
		b.Write(guidBytes(t, owner))
		b.Write(e)
	}
	return b.Bytes()
}

type testVar struct {
	name   string
	vendor GUID
	state  byte
	data   []byte
}

// image builds a firmware volume holding an authenticated variable store.
func image(t *testing.T, vars ...testVar) []byte {
	t.Helper()
	const hlen = 0x48
	raw := make([]byte, 0x2000)
	copy(raw[40:], "_FVH")
	binary.LittleEndian.PutUint16(raw[48:], hlen)
	copy(raw[hlen:], guidBytes(t, authenticatedVariableStore))
	binary.LittleEndian.PutUint32(raw[hlen+16:], uint32(len(raw)-hlen))
	raw[hlen+20], raw[hlen+21] = 0x5a, 0xfe
	off := hlen + 28
	for i := off; i < len(raw); i++ {
		raw[i] = 0xff
	}
	for _, v := range vars {
		name := utf16.Encode([]rune(v.name + "\x00"))
		h := raw[off:]
		binary.LittleEndian.PutUint16(h[0:], varStartID)
		h[2], h[3] = v.state, 0
		binary.LittleEndian.PutUint32(h[4:], 0x27)
		for j := 8; j < 36; j++ {
			h[j] = 0
		}
		binary.LittleEndian.PutUint32(h[36:], uint32(2*len(name)))
		binary.LittleEndian.PutUint32(h[40:], uint32(len(v.data)))
		copy(h[44:], guidBytes(t, v.vendor))
		p := authHeaderLen
		for _, c := range name {
			binary.LittleEndian.PutUint16(h[p:], c)
			p += 2
		}
		copy(h[p:], v.data)
		off += (p + len(v.data) + 3) &^ 3
	}
	return raw
}

func selfSigned(t *testing.T, cn string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Unix(0, 0), NotAfter: time.Unix(1<<31, 0)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// TestParseAndDelete reads a store with a replaced copy of PK, certificates
// and a hash, then deletes PK as the variable driver does.
func TestParseAndDelete(t *testing.T) {
	const owner GUID = "77fa9abd-0359-4d32-bd60-28f4e78f784b"
	pk, oldPK, kek := selfSigned(t, "pk"), selfSigned(t, "old pk"), selfSigned(t, "kek")
	hash := sha256.Sum256([]byte("revoked"))
	raw := image(t,
		testVar{"PK", GlobalVariable, varAdded & varDeleted, sigList(t, "a5c059a1-94e4-4aa7-87b5-ab155c2bf072", owner, oldPK)},
		testVar{"PK", GlobalVariable, varAdded, sigList(t, "a5c059a1-94e4-4aa7-87b5-ab155c2bf072", owner, pk)},
		testVar{"KEK", GlobalVariable, varAdded & varInDeletedTransition, sigList(t, "a5c059a1-94e4-4aa7-87b5-ab155c2bf072", owner, kek)},
		testVar{"dbx", ImageSecurityDatabase, varAdded, sigList(t, "c1c41626-504c-4092-aca9-41f936934328", owner, hash[:], hash[:])},
	)
	s, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range s.Vars {
		names = append(names, v.Name+"/"+string(v.Vendor))
	}
	want := []string{"PK/" + string(GlobalVariable), "KEK/" + string(GlobalVariable), "dbx/" + string(ImageSecurityDatabase)}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Fatalf("live variables (-want +got):\n%s", diff)
	}
	sigs, err := SignatureLists(s.Get("PK", GlobalVariable).Data)
	if err != nil {
		t.Fatal(err)
	}
	if len(sigs) != 1 || !bytes.Equal(sigs[0].Data, pk) || sigs[0].Owner != owner || !sigs[0].IsCertificate() {
		t.Fatalf("PK holds %+v, want the new certificate owned by %s", sigs, owner)
	}
	if c, err := sigs[0].Certificate(); err != nil || c.Subject.CommonName != "pk" {
		t.Errorf("PK certificate: %v, %v", c, err)
	}
	sigs, err = SignatureLists(s.Get("dbx", ImageSecurityDatabase).Data)
	if err != nil {
		t.Fatal(err)
	}
	if len(sigs) != 2 || sigs[0].Type != "EFI_CERT_SHA256_GUID" || sigs[1].Hex() != (Signature{Data: hash[:]}).Hex() {
		t.Errorf("dbx holds %+v, want two SHA-256 hashes", sigs)
	}

	vendor := func(n string) GUID {
		if n == "dbx" {
			return ImageSecurityDatabase
		}
		return GlobalVariable
	}
	out := s.Without(vendor, "PK", "nosuch")
	if len(out) != len(raw) {
		t.Fatalf("Without changed the size: %d, want %d", len(out), len(raw))
	}
	s2, err := Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	if s2.Get("PK", GlobalVariable) != nil {
		t.Errorf("PK still live after Without")
	}
	if s2.Get("KEK", GlobalVariable) == nil || s2.Get("dbx", ImageSecurityDatabase) == nil {
		t.Errorf("Without took more than PK: %+v", s2.Vars)
	}
	if !bytes.Equal(raw, s.raw) {
		t.Errorf("Without changed the parsed store's own bytes")
	}
}

func TestParseRefusesWhatIsNotAStore(t *testing.T) {
	for name, raw := range map[string][]byte{
		"short":    make([]byte, 10),
		"no _FVH":  make([]byte, 0x1000),
		"bad list": nil,
	} {
		if name == "bad list" {
			if _, err := SignatureLists([]byte{1, 2, 3}); err == nil {
				t.Errorf("%s: no error", name)
			}
			continue
		}
		if _, err := Parse(raw); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestOVMFTemplates reads the templates Debian's ovmf package ships: the
// enrolled one has the four databases, every X.509 entry parses, and the
// empty one has none.
func TestOVMFTemplates(t *testing.T) {
	const enrolled, empty = "/usr/share/OVMF/OVMF_VARS_4M.ms.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd"
	_, err := os.Stat(enrolled)
	testenv.Require(t, err == nil, "the ovmf package ("+enrolled+")")
	s, err := ReadFile(enrolled)
	if err != nil {
		t.Fatal(err)
	}
	for _, db := range []struct {
		name   string
		vendor GUID
	}{{"PK", GlobalVariable}, {"KEK", GlobalVariable}, {"db", ImageSecurityDatabase}, {"dbx", ImageSecurityDatabase}} {
		v := s.Get(db.name, db.vendor)
		if v == nil {
			t.Errorf("%s: no %s", enrolled, db.name)
			continue
		}
		sigs, err := SignatureLists(v.Data)
		if err != nil || len(sigs) == 0 {
			t.Errorf("%s of %s: %d entries, %v", db.name, enrolled, len(sigs), err)
		}
		for _, sg := range sigs {
			if sg.IsCertificate() {
				if c, err := sg.Certificate(); err != nil {
					t.Errorf("%s of %s: %v", db.name, enrolled, err)
				} else {
					t.Logf("%s: %s (owner %s)", db.name, c.Subject.CommonName, sg.Owner)
				}
			}
		}
	}
	e, err := ReadFile(empty)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"PK", "KEK"} {
		if e.Get(n, GlobalVariable) != nil {
			t.Errorf("%s holds %s", empty, n)
		}
	}
}
