package virt

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/bmlab/bmlab/internal/efivars"
	"github.com/bmlab/bmlab/internal/machine"
)

// Secure boot keys live in OVMF's variable store, which libvirt makes for
// each domain from the loader's NVRAM template and recreates at a start
// with VIR_DOMAIN_START_RESET_NVRAM. The key state maps onto templates:
//
//   - the factory keys: the secure-boot template with keys enrolled
//     (Debian's OVMF_VARS_4M.ms.fd: PK and KEK from Debian, Microsoft's CAs
//     in db, one dbx hash), read from the file itself;
//   - every database deleted: the empty template (OVMF_VARS_4M.fd), which
//     holds no keys;
//   - some deleted (DeletePK, or a database's own DeleteAllKeys): a copy of
//     the secure-boot template with those variables marked deleted, written
//     once to Config.VarsDir on the host vbmcd runs on.
//
// With secure boot off the domain runs OVMF without secure boot from the
// empty template whatever the keys; the keys apply whenever secure boot is
// on again.

// keyVendor is the vendor GUID of a key database variable.
func keyVendor(name string) efivars.GUID {
	if name == string(machine.KeyDB) || name == string(machine.KeyDBX) {
		return efivars.ImageSecurityDatabase
	}
	return efivars.GlobalVariable
}

// factoryStore is the parsed secure-boot template, read once.
type factoryStore struct {
	once  sync.Once
	store *efivars.Store
	keys  machine.KeyStore
	err   error
}

func (f *factoryStore) load(path string) (*efivars.Store, machine.KeyStore, error) {
	f.once.Do(func() {
		if path == "" {
			f.err = fmt.Errorf("%w: no secure-boot UEFI firmware (OVMF secboot with enrolled keys) on this host; install the ovmf package", machine.ErrUnsupported)
			return
		}
		s, err := efivars.ReadFile(path)
		if err != nil {
			f.err = fmt.Errorf("secure boot keys of %s: %w", path, err)
			return
		}
		ks, err := KeysOf(s)
		if err != nil {
			f.err = fmt.Errorf("secure boot keys of %s: %w", path, err)
			return
		}
		f.store, f.keys = s, ks
	})
	return f.store, f.keys, f.err
}

// ReadKeys reads the key databases of the variable store in an OVMF vars
// image.
func ReadKeys(path string) (machine.KeyStore, error) {
	s, err := efivars.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return KeysOf(s)
}

// KeysOf reads the key databases of a variable store.
func KeysOf(s *efivars.Store) (machine.KeyStore, error) {
	ks := machine.KeyStore{}
	for _, db := range machine.KeyDatabases {
		v := s.Get(string(db), keyVendor(string(db)))
		if v == nil {
			continue
		}
		sigs, err := efivars.SignatureLists(v.Data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", db, err)
		}
		for _, sg := range sigs {
			ks[db] = append(ks[db], machine.KeyEntry{Type: sg.Type, Owner: string(sg.Owner), Data: sg.Data})
		}
	}
	return ks, nil
}

// FactoryKeys implements machine.KeyStorer: the keys of the secure-boot
// template on the host vbmcd runs on (every host of a Hosts set is assumed
// to have the same OVMF, as for the firmware paths).
func (b *Backend) FactoryKeys(string) (machine.KeyStore, error) {
	_, ks, err := b.factory.load(b.fw.SecureVars)
	return ks, err
}

// varsFor returns the NVRAM template that holds the factory keys less the
// deleted databases, writing a derived template when needed.
func (b *Backend) varsFor(deleted []machine.KeyDatabase) (string, error) {
	switch len(deleted) {
	case 0:
		return b.fw.SecureVars, nil
	case len(machine.KeyDatabases):
		return b.fw.Vars, nil
	}
	store, _, err := b.factory.load(b.fw.SecureVars)
	if err != nil {
		return "", err
	}
	names := make([]string, len(deleted))
	for i, db := range deleted {
		names[i] = string(db)
	}
	dir := b.cfg.VarsDir
	if dir == "" {
		dir = DefaultVarsDir
	}
	base := strings.TrimSuffix(filepath.Base(b.fw.SecureVars), ".fd")
	path := filepath.Join(dir, base+".no-"+strings.Join(names, "-")+".fd")
	want := store.Without(keyVendor, names...)
	if have, err := os.ReadFile(path); err == nil && bytes.Equal(have, want) {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("variable store without %s: %w", strings.Join(names, ", "), err)
	}
	tmp, err := os.CreateTemp(dir, ".vars-*")
	if err != nil {
		return "", fmt.Errorf("variable store without %s: %w", strings.Join(names, ", "), err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(want)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// libvirtd copies the template as its own user; qemu never reads it.
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return "", fmt.Errorf("write variable store %s: %w", path, err)
	}
	return path, nil
}

// DefaultVarsDir is where derived variable stores go when Config.VarsDir is
// empty.
const DefaultVarsDir = "/var/lib/vbmcd/ovmf"
