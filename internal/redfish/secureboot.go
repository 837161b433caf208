package redfish

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/machine"
)

// Secure boot key databases (DSP8010 SecureBootDatabase, Certificate,
// Signature): PK, KEK, db and dbx as the machine's firmware holds them from
// its next start, and the same four with the factory keys (PKDefault, ...),
// read-only. Each database lists its X.509 entries as Certificates and its
// other entries (hashes) as Signatures, numbered from 1 in store order.

const defaultSuffix = "Default"

// secureBootKeyResets are the key reset types SecureBoot.ResetKeys accepts.
var secureBootKeyResets = []string{string(machine.ResetKeysToDefault), string(machine.DeleteAllKeys), string(machine.DeletePK)}

// databaseKeyResets are the ones SecureBootDatabase.ResetKeys accepts.
var databaseKeyResets = []string{string(machine.ResetKeysToDefault), string(machine.DeleteAllKeys)}

func secureBootURI(id string) string { return systemURI(id) + "/SecureBoot" }
func keyDatabasesURI(id string) string {
	return secureBootURI(id) + "/SecureBootDatabases"
}

// keyDatabaseIDs lists the databases a system serves.
func keyDatabaseIDs() []string {
	var out []string
	for _, db := range machine.KeyDatabases {
		out = append(out, string(db))
	}
	for _, db := range machine.KeyDatabases {
		out = append(out, string(db)+defaultSuffix)
	}
	return out
}

// secureBoot renders a system's SecureBoot resource. keys says whether its
// backend holds key databases: without (KubeVirt, whose firmware's
// variables vbmcd can neither read nor write) neither the databases nor the
// key reset is advertised, so a client finds no link that answers 404.
func secureBoot(m *machine.Machine, keys bool) obj {
	u := secureBootURI(m.ID)
	current := m.SecureBootActive && m.Power != machine.PowerOff
	o := obj{
		"@odata.id":             u,
		"@odata.type":           "#SecureBoot.v1_1_0.SecureBoot",
		"Id":                    "SecureBoot",
		"Name":                  "UEFI Secure Boot",
		"SecureBootEnable":      m.Settings.SecureBoot,
		"SecureBootCurrentBoot": enabledDisabled(current),
		"SecureBootMode":        m.Settings.SecureBootMode(),
	}
	if keys {
		o["SecureBootDatabases"] = ref{keyDatabasesURI(m.ID)}
		o["Actions"] = obj{
			"#SecureBoot.ResetKeys": obj{
				"target":                                u + "/Actions/SecureBoot.ResetKeys",
				"ResetKeysType@Redfish.AllowableValues": secureBootKeyResets,
			},
		}
	}
	return o
}

// hasKeys reports whether a system's backend holds secure boot key
// databases.
func (s *Server) hasKeys(id string) bool {
	_, _, _, err := s.svc.Keys(id)
	return !errors.Is(err, machine.ErrUnsupported)
}

// keyEntries returns a database's entries by its Redfish ID: the ones it
// holds, or the factory ones for a ...Default database. ok is false for a
// database the system does not have.
func keyEntries(cur, factory machine.KeyStore, id string) (entries []machine.KeyEntry, isDefault, ok bool) {
	name, isDefault := strings.CutSuffix(id, defaultSuffix)
	if !slices.Contains(machine.KeyDatabases, machine.KeyDatabase(name)) {
		return nil, false, false
	}
	if isDefault {
		return factory[machine.KeyDatabase(name)], true, true
	}
	return cur[machine.KeyDatabase(name)], false, true
}

// numbered returns the entries of one kind (certificates or not) by ID.
func numbered(entries []machine.KeyEntry, certs bool) map[string]machine.KeyEntry {
	out := map[string]machine.KeyEntry{}
	for _, e := range entries {
		if e.IsCertificate() == certs {
			out[strconv.Itoa(len(out)+1)] = e
		}
	}
	return out
}

func numberedIDs(entries []machine.KeyEntry, certs bool) []string {
	n := len(numbered(entries, certs))
	out := make([]string, n)
	for i := range out {
		out[i] = strconv.Itoa(i + 1)
	}
	return out
}

func keyDatabase(sysID, id string, isDefault bool) obj {
	u := keyDatabasesURI(sysID) + "/" + id
	o := obj{
		"@odata.id":    u,
		"@odata.type":  "#SecureBootDatabase.v1_0_3.SecureBootDatabase",
		"Id":           id,
		"Name":         "UEFI Secure Boot database " + id,
		"DatabaseId":   id,
		"Certificates": ref{u + "/Certificates"},
		"Signatures":   ref{u + "/Signatures"},
	}
	if isDefault {
		o["Description"] = "The factory keys of " + strings.TrimSuffix(id, defaultSuffix) + ", which ResetAllKeysToDefault restores"
		return o
	}
	o["Actions"] = obj{
		"#SecureBootDatabase.ResetKeys": obj{
			"target":                                u + "/Actions/SecureBootDatabase.ResetKeys",
			"ResetKeysType@Redfish.AllowableValues": databaseKeyResets,
		},
	}
	return o
}

// keyCertificate renders an X.509 entry (Certificate v1_5_0).
func keyCertificate(u, id string, e machine.KeyEntry) obj {
	sum := sha256.Sum256(e.Data)
	o := obj{
		"@odata.id":                u + "/" + id,
		"@odata.type":              "#Certificate.v1_5_0.Certificate",
		"Id":                       id,
		"Name":                     "UEFI Secure Boot certificate " + id,
		"CertificateString":        string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: e.Data})),
		"CertificateType":          "PEM",
		"CertificateUsageTypes":    []string{"BIOS"},
		"Fingerprint":              colonHex(sum[:]),
		"FingerprintHashAlgorithm": "TPM_ALG_SHA256",
		"UefiSignatureOwner":       e.Owner,
	}
	if x, err := x509.ParseCertificate(e.Data); err == nil {
		o["Subject"] = certIdentifier(x.Subject.CommonName, x.Subject.Organization, x.Subject.Country)
		o["Issuer"] = certIdentifier(x.Issuer.CommonName, x.Issuer.Organization, x.Issuer.Country)
		o["ValidNotBefore"] = x.NotBefore.UTC().Format(time.RFC3339)
		o["ValidNotAfter"] = x.NotAfter.UTC().Format(time.RFC3339)
		o["SerialNumber"] = colonHex(x.SerialNumber.Bytes())
	}
	return o
}

func certIdentifier(cn string, org, country []string) obj {
	o := obj{"CommonName": cn}
	if len(org) > 0 {
		o["Organization"] = org[0]
	}
	if len(country) > 0 {
		o["Country"] = country[0]
	}
	return o
}

func colonHex(b []byte) string {
	h := strings.ToUpper(hex.EncodeToString(b))
	var s strings.Builder
	for i := 0; i < len(h); i += 2 {
		if i > 0 {
			s.WriteByte(':')
		}
		s.WriteString(h[i : i+2])
	}
	return s.String()
}

// keySignature renders a non-certificate entry (Signature v1_0_3, UEFI
// registry: SignatureString is the SignatureData in hex).
func keySignature(u, id string, e machine.KeyEntry) obj {
	return obj{
		"@odata.id":             u + "/" + id,
		"@odata.type":           "#Signature.v1_0_3.Signature",
		"Id":                    id,
		"Name":                  "UEFI Secure Boot signature " + id,
		"SignatureTypeRegistry": "UEFI",
		"SignatureType":         e.Type,
		"SignatureString":       hex.EncodeToString(e.Data),
		"UefiSignatureOwner":    e.Owner,
	}
}

// --- handlers ---

// keysOf returns the entries of the database in c.params[1].
func (s *Server) keysOf(c *call) ([]machine.KeyEntry, bool, bool) {
	_, cur, factory, err := s.svc.Keys(c.m.ID)
	if err != nil {
		return nil, false, false
	}
	return keyEntries(cur, factory, c.params[1])
}

func renderKeyDatabases(s *Server, c *call) any {
	if _, _, _, err := s.svc.Keys(c.m.ID); err != nil {
		return nil
	}
	return subCollection(c, "SecureBootDatabaseCollection", "UEFI Secure Boot Database Collection", keyDatabaseIDs())
}

func renderKeyDatabase(s *Server, c *call) any {
	_, isDefault, ok := s.keysOf(c)
	if !ok {
		return nil
	}
	return keyDatabase(c.m.ID, c.params[1], isDefault)
}

// keyMember renders a database's Certificates (certs) or Signatures
// collection, or, when c names one, its member.
func (s *Server) keyMember(c *call, certs bool, member bool) any {
	entries, _, ok := s.keysOf(c)
	if !ok {
		return nil
	}
	kind, odataType := "Signatures", "SignatureCollection"
	if certs {
		kind, odataType = "Certificates", "CertificateCollection"
	}
	if !member {
		return subCollection(c, odataType, kind+" of "+c.params[1], numberedIDs(entries, certs))
	}
	e, ok := numbered(entries, certs)[c.params[2]]
	if !ok {
		return nil
	}
	u := keyDatabasesURI(c.m.ID) + "/" + c.params[1] + "/" + kind
	if certs {
		return keyCertificate(u, c.params[2], e)
	}
	return keySignature(u, c.params[2], e)
}

func renderKeyCertificates(s *Server, c *call) any { return s.keyMember(c, true, false) }
func renderKeyCertificate(s *Server, c *call) any  { return s.keyMember(c, true, true) }
func renderKeySignatures(s *Server, c *call) any   { return s.keyMember(c, false, false) }
func renderKeySignature(s *Server, c *call) any    { return s.keyMember(c, false, true) }

// postResetKeys resets or deletes the keys of every database
// (SecureBoot.ResetKeys). The firmware's variable store is made from them
// at the next start.
func postResetKeys(s *Server, c *call) *apiError {
	const action = "SecureBoot.ResetKeys"
	kt, aerr := actionEnum(c, action, "ResetKeysType", secureBootKeyResets)
	if aerr != nil {
		return aerr
	}
	_, err := s.svc.ResetKeys(ctx(c), c.m.ID, "", machine.KeyReset(kt))
	return s.changed(c, err, "secure boot keys reset", zap.String("type", kt))
}

// postDatabaseResetKeys resets or deletes one database's keys
// (SecureBootDatabase.ResetKeys); the factory databases are read-only.
func postDatabaseResetKeys(s *Server, c *call) *apiError {
	const action = "SecureBootDatabase.ResetKeys"
	_, isDefault, ok := s.keysOf(c)
	if !ok {
		return notFound(c)
	}
	if isDefault {
		return newError(http.StatusBadRequest, MsgActionNotSupported, action).
			with("the " + c.params[1] + " database holds the factory keys and cannot change")
	}
	kt, aerr := actionEnum(c, action, "ResetKeysType", databaseKeyResets)
	if aerr != nil {
		return aerr
	}
	_, err := s.svc.ResetKeys(ctx(c), c.m.ID, machine.KeyDatabase(c.params[1]), machine.KeyReset(kt))
	return s.changed(c, err, "secure boot database keys reset", zap.String("database", c.params[1]), zap.String("type", kt))
}
