package machine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/sim"
)

var testKeys = machine.KeyStore{
	machine.KeyPK:  {{Type: "EFI_CERT_X509_GUID", Owner: "o-pk", Data: []byte("pk")}},
	machine.KeyKEK: {{Type: "EFI_CERT_X509_GUID", Owner: "o-kek", Data: []byte("kek")}},
	machine.KeyDB:  {{Type: "EFI_CERT_X509_GUID", Owner: "o-db", Data: []byte("db1")}, {Type: "EFI_CERT_X509_GUID", Owner: "o-db", Data: []byte("db2")}},
	machine.KeyDBX: {{Type: "EFI_CERT_SHA256_GUID", Owner: "o-dbx", Data: []byte("hash")}},
}

// TestResetKeys walks the key resets of SecureBoot.ResetKeys and of one
// database: what the databases hold and the mode they put the firmware in.
func TestResetKeys(t *testing.T) {
	ctx := context.Background()
	be := sim.New(1, sim.WithFactoryKeys(testKeys))
	svc := machine.NewService(be, nil)
	id := be.List()[0].ID
	held := func() []machine.KeyDatabase {
		t.Helper()
		_, cur, factory, err := svc.Keys(id)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(testKeys, factory); diff != "" {
			t.Fatalf("factory keys (-want +got):\n%s", diff)
		}
		var out []machine.KeyDatabase
		for _, db := range machine.KeyDatabases {
			if _, ok := cur[db]; ok {
				if diff := cmp.Diff(testKeys[db], cur[db]); diff != "" {
					t.Fatalf("%s holds (-factory +got):\n%s", db, diff)
				}
				out = append(out, db)
			}
		}
		return out
	}
	all := []machine.KeyDatabase{machine.KeyPK, machine.KeyKEK, machine.KeyDB, machine.KeyDBX}
	steps := []struct {
		db       machine.KeyDatabase
		reset    machine.KeyReset
		wantHeld []machine.KeyDatabase
		wantMode string
	}{
		{"", machine.DeletePK, all[1:], "SetupMode"},
		{machine.KeyDB, machine.DeleteAllKeys, []machine.KeyDatabase{machine.KeyKEK, machine.KeyDBX}, "SetupMode"},
		{machine.KeyPK, machine.ResetKeysToDefault, []machine.KeyDatabase{machine.KeyPK, machine.KeyKEK, machine.KeyDBX}, "UserMode"},
		{"", machine.DeleteAllKeys, nil, "SetupMode"},
		{"", machine.ResetKeysToDefault, all, "UserMode"},
	}
	if diff := cmp.Diff(all, held()); diff != "" {
		t.Fatalf("a new machine's databases (-want +got):\n%s", diff)
	}
	for _, st := range steps {
		m, err := svc.ResetKeys(ctx, id, st.db, st.reset)
		if err != nil {
			t.Fatalf("%s %s: %v", st.db, st.reset, err)
		}
		if diff := cmp.Diff(st.wantHeld, held()); diff != "" {
			t.Errorf("after %s %s, databases held (-want +got):\n%s", st.db, st.reset, diff)
		}
		if got := m.Settings.SecureBootMode(); got != st.wantMode {
			t.Errorf("after %s %s: mode %s, want %s", st.db, st.reset, got, st.wantMode)
		}
	}
	if _, err := svc.ResetKeys(ctx, id, machine.KeyDB, machine.DeletePK); !errors.Is(err, machine.ErrInvalid) {
		t.Errorf("DeletePK on db: %v, want ErrInvalid", err)
	}
	if _, err := svc.ResetKeys(ctx, id, "dbt", machine.DeleteAllKeys); !errors.Is(err, machine.ErrNotFound) {
		t.Errorf("DeleteAllKeys on dbt: %v, want ErrNotFound", err)
	}
}

// TestKeyChangeAppliesAtTheNextStart: with secure boot on, a running
// machine whose keys changed runs stale until a cold restart; with it off
// the keys are not in use and nothing is stale.
func TestKeyChangeAppliesAtTheNextStart(t *testing.T) {
	ctx := context.Background()
	be := sim.New(1, sim.WithFactoryKeys(testKeys))
	svc := machine.NewService(be, nil)
	id := be.List()[0].ID
	if err := svc.Reset(ctx, id, machine.ResetOn); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.ResetKeys(ctx, id, "", machine.DeleteAllKeys); err != nil {
		t.Fatal(err)
	}
	if be.Stale(id) {
		t.Errorf("secure boot off: a key change made the machine stale")
	}
	if _, err := svc.SetSecureBoot(ctx, id, true); err != nil {
		t.Fatal(err)
	}
	if err := svc.Reset(ctx, id, machine.ResetForceRestart); err != nil {
		t.Fatal(err)
	}
	if be.Stale(id) {
		t.Fatalf("stale right after a restart")
	}
	if _, err := svc.ResetKeys(ctx, id, "", machine.ResetKeysToDefault); err != nil {
		t.Fatal(err)
	}
	if !be.Stale(id) {
		t.Errorf("secure boot on: keys reset while running, but the machine is not stale")
	}
	if err := svc.Reset(ctx, id, machine.ResetForceRestart); err != nil {
		t.Fatal(err)
	}
	if be.Stale(id) {
		t.Errorf("stale after the cold restart that applies the keys")
	}
}

func TestNoKeysWithoutAKeyStorer(t *testing.T) {
	svc := machine.NewService(noKeys{sim.New(1)}, nil)
	id := svc.List()[0].ID
	if _, _, _, err := svc.Keys(id); !errors.Is(err, machine.ErrUnsupported) {
		t.Errorf("Keys: %v, want ErrUnsupported", err)
	}
	if _, err := svc.ResetKeys(context.Background(), id, "", machine.DeleteAllKeys); !errors.Is(err, machine.ErrUnsupported) {
		t.Errorf("ResetKeys: %v, want ErrUnsupported", err)
	}
}

// noKeys hides the sim backend's KeyStorer.
type noKeys struct{ machine.Backend }
