package machine

import (
	"context"
	"fmt"
	"slices"
)

// KeyDatabase names a UEFI secure boot key database (UEFI 2.10 §32.3).
type KeyDatabase string

// Key databases, in the order of trust: the platform key signs the key
// exchange keys, which sign the allowed (db) and forbidden (dbx) lists.
const (
	KeyPK  KeyDatabase = "PK"
	KeyKEK KeyDatabase = "KEK"
	KeyDB  KeyDatabase = "db"
	KeyDBX KeyDatabase = "dbx"
)

// KeyDatabases lists the key databases.
var KeyDatabases = []KeyDatabase{KeyPK, KeyKEK, KeyDB, KeyDBX}

// KeyReset is a reset of secure boot keys, in Redfish's words
// (SecureBoot.ResetKeys, SecureBootDatabase.ResetKeys).
type KeyReset string

// Key resets.
const (
	ResetKeysToDefault KeyReset = "ResetAllKeysToDefault"
	DeleteAllKeys      KeyReset = "DeleteAllKeys"
	DeletePK           KeyReset = "DeletePK"
)

// KeyEntry is one entry of a key database (an EFI_SIGNATURE_DATA): an
// X.509 certificate or a hash.
type KeyEntry struct {
	// Type is the signature type's #define name (EFI_CERT_X509_GUID,
	// EFI_CERT_SHA256_GUID, ...).
	Type string
	// Owner is the GUID of the entry's owner (SignatureOwner).
	Owner string
	// Data is the certificate (DER) or the hash.
	Data []byte
}

// IsCertificate reports whether the entry is an X.509 certificate.
func (e KeyEntry) IsCertificate() bool { return e.Type == "EFI_CERT_X509_GUID" }

// KeyStore is what each key database holds.
type KeyStore map[KeyDatabase][]KeyEntry

// KeyStorer is a Backend whose machines' firmware has secure boot key
// databases.
type KeyStorer interface {
	// FactoryKeys returns what the databases of a machine's firmware hold
	// with the factory keys: what ResetAllKeysToDefault restores.
	FactoryKeys(id string) (KeyStore, error)
}

// Keys returns what a machine's key databases hold from its next start on
// (the factory keys less the deleted databases), and the factory keys.
func (s *Service) Keys(id string) (*Machine, KeyStore, KeyStore, error) {
	m, err := s.Get(id)
	if err != nil {
		return nil, nil, nil, err
	}
	ks, ok := s.be.(KeyStorer)
	if !ok {
		return nil, nil, nil, fmt.Errorf("%w: this backend's machines have no secure boot key databases", ErrUnsupported)
	}
	factory, err := ks.FactoryKeys(m.ID)
	if err != nil {
		return nil, nil, nil, err
	}
	cur := KeyStore{}
	for _, db := range KeyDatabases {
		if !slices.Contains(m.Settings.DeletedKeys, db) {
			cur[db] = factory[db]
		}
	}
	return m, cur, factory, nil
}

// SecureBootMode is the UEFI secure boot mode the key databases put the
// firmware in (Redfish SecureBoot.SecureBootMode): SetupMode without a
// platform key, UserMode with one. The firmware (OVMF) implements neither
// AuditMode nor DeployedMode.
func (s Settings) SecureBootMode() string {
	if slices.Contains(s.DeletedKeys, KeyPK) {
		return "SetupMode"
	}
	return "UserMode"
}

// ResetKeys resets or deletes secure boot keys: of one database, or of all
// when db is "". The change applies at the next start, when the firmware's
// variable store is made anew from the keys; a running machine gets it at
// its next cold restart, as other firmware changes.
func (s *Service) ResetKeys(ctx context.Context, id string, db KeyDatabase, kr KeyReset) (*Machine, error) {
	if db != "" && !slices.Contains(KeyDatabases, db) {
		return nil, fmt.Errorf("%w: no key database %q", ErrNotFound, db)
	}
	m, unlock, err := s.resolve(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if _, ok := s.be.(KeyStorer); !ok {
		return nil, fmt.Errorf("%w: this backend's machines have no secure boot key databases", ErrUnsupported)
	}
	deleted := slices.Clone(m.Settings.DeletedKeys)
	switch {
	case kr == ResetKeysToDefault && db == "":
		deleted = nil
	case kr == ResetKeysToDefault:
		deleted = slices.DeleteFunc(deleted, func(d KeyDatabase) bool { return d == db })
	case kr == DeleteAllKeys && db == "":
		deleted = slices.Clone(KeyDatabases)
	case kr == DeleteAllKeys:
		deleted = append(deleted, db)
	case kr == DeletePK && db == "":
		deleted = append(deleted, KeyPK)
	default:
		return nil, invalidf("key reset %q is not one of %v", kr, keyResetsFor(db))
	}
	deleted = sortKeys(deleted)
	if slices.Equal(deleted, m.Settings.DeletedKeys) {
		return m, nil
	}
	st := m.Settings.Clone()
	st.DeletedKeys = deleted
	if err := s.be.Save(ctx, m.ID, st); err != nil {
		return nil, err
	}
	return s.be.Get(m.ID)
}

// keyResetsFor lists the resets of one database ("": all of them).
func keyResetsFor(db KeyDatabase) []KeyReset {
	if db == "" {
		return []KeyReset{ResetKeysToDefault, DeleteAllKeys, DeletePK}
	}
	return []KeyReset{ResetKeysToDefault, DeleteAllKeys}
}

// sortKeys returns the databases of ks once each, in KeyDatabases order;
// nil when there are none.
func sortKeys(ks []KeyDatabase) []KeyDatabase {
	var out []KeyDatabase
	for _, db := range KeyDatabases {
		if slices.Contains(ks, db) {
			out = append(out, db)
		}
	}
	return out
}

// ParseKeyDatabases reads a stored list of deleted databases; unknown names
// are an error, so a store written by a newer version is not misread.
func ParseKeyDatabases(names []string) ([]KeyDatabase, error) {
	var out []KeyDatabase
	for _, n := range names {
		if !slices.Contains(KeyDatabases, KeyDatabase(n)) {
			return nil, fmt.Errorf("unknown secure boot key database %q", n)
		}
		out = append(out, KeyDatabase(n))
	}
	return sortKeys(out), nil
}
