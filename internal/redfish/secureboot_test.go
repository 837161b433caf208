package redfish

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/machine"
)

// TestSecureBootKeys walks the key resets over Redfish as Ironic's clean
// steps send them (sushy's secure_boot.reset_keys) and per database: what
// each database lists, the mode, and the factory databases that stay.
func TestSecureBootKeys(t *testing.T) {
	f := newFixture(t, 1)
	sb := f.sys(0) + "/SecureBoot"
	dbs := sb + "/SecureBootDatabases"
	count := func(path string) int {
		t.Helper()
		v := decode(t, f.do(req{path: path}))
		n, ok := v["Members@odata.count"].(float64)
		if !ok {
			t.Fatalf("%s: no Members@odata.count in %v", path, v)
		}
		return int(n)
	}
	state := func() (string, map[string]int) {
		t.Helper()
		mode := decode(t, f.do(req{path: sb}))["SecureBootMode"].(string)
		held := map[string]int{}
		for _, db := range []string{"PK", "KEK", "db", "dbx", "PKDefault", "dbxDefault"} {
			held[db] = count(dbs+"/"+db+"/Certificates") + count(dbs+"/"+db+"/Signatures")
		}
		return mode, held
	}
	factory := map[string]int{"PK": 1, "KEK": 1, "db": 1, "dbx": 1, "PKDefault": 1, "dbxDefault": 1}
	if got := count(dbs); got != 8 {
		t.Errorf("%d databases, want 8 (PK, KEK, db, dbx and their defaults)", got)
	}
	steps := []struct {
		path, body string
		wantMode   string
		wantHeld   map[string]int
	}{
		{"", "", "UserMode", factory},
		{sb + "/Actions/SecureBoot.ResetKeys", `{"ResetKeysType": "DeletePK"}`, "SetupMode",
			map[string]int{"PK": 0, "KEK": 1, "db": 1, "dbx": 1, "PKDefault": 1, "dbxDefault": 1}},
		{dbs + "/dbx/Actions/SecureBootDatabase.ResetKeys", `{"ResetKeysType": "DeleteAllKeys"}`, "SetupMode",
			map[string]int{"PK": 0, "KEK": 1, "db": 1, "dbx": 0, "PKDefault": 1, "dbxDefault": 1}},
		{dbs + "/PK/Actions/SecureBootDatabase.ResetKeys", `{"ResetKeysType": "ResetAllKeysToDefault"}`, "UserMode",
			map[string]int{"PK": 1, "KEK": 1, "db": 1, "dbx": 0, "PKDefault": 1, "dbxDefault": 1}},
		{sb + "/Actions/SecureBoot.ResetKeys", `{"ResetKeysType": "DeleteAllKeys"}`, "SetupMode",
			map[string]int{"PK": 0, "KEK": 0, "db": 0, "dbx": 0, "PKDefault": 1, "dbxDefault": 1}},
		{sb + "/Actions/SecureBoot.ResetKeys", `{"ResetKeysType": "ResetAllKeysToDefault"}`, "UserMode", factory},
	}
	for _, st := range steps {
		if st.path != "" {
			if w := f.do(req{method: "POST", path: st.path, body: st.body}); w.Code != http.StatusNoContent {
				t.Fatalf("POST %s %s: %d %s", st.path, st.body, w.Code, w.Body)
			}
		}
		mode, held := state()
		if mode != st.wantMode {
			t.Errorf("after %s: SecureBootMode %s, want %s", st.body, mode, st.wantMode)
		}
		if diff := cmp.Diff(st.wantHeld, held); diff != "" {
			t.Errorf("after %s, entries per database (-want +got):\n%s", st.body, diff)
		}
	}
	if v := decode(t, f.do(req{path: dbs + "/PK/Certificates/1"})); v["Subject"].(map[string]any)["CommonName"] != "bmlab test platform key" {
		t.Errorf("PK certificate 1: %v", v)
	}
	for _, bad := range []struct {
		path, body string
		status     int
		msg        MessageID
	}{
		{sb + "/Actions/SecureBoot.ResetKeys", `{"ResetKeysType": "ResetPK"}`, 400, MsgActionParameterValueNotInList},
		{sb + "/Actions/SecureBoot.ResetKeys", `{}`, 400, MsgActionParameterMissing},
		{dbs + "/db/Actions/SecureBootDatabase.ResetKeys", `{"ResetKeysType": "DeletePK"}`, 400, MsgActionParameterValueNotInList},
		{dbs + "/dbDefault/Actions/SecureBootDatabase.ResetKeys", `{"ResetKeysType": "DeleteAllKeys"}`, 400, MsgActionNotSupported},
		{dbs + "/dbt/Actions/SecureBootDatabase.ResetKeys", `{"ResetKeysType": "DeleteAllKeys"}`, 404, MsgResourceNotFound},
	} {
		w := f.do(req{method: "POST", path: bad.path, body: bad.body})
		if ids := messageIDs(t, w); w.Code != bad.status || len(ids) == 0 || ids[0] != string(bad.msg) {
			t.Errorf("POST %s %s: %d %v, want %d %s", bad.path, bad.body, w.Code, ids, bad.status, bad.msg)
		}
	}
	for _, p := range []string{dbs + "/dbt", dbs + "/PK/Certificates/2", dbs + "/dbx/Signatures/2", dbs + "/db/Signatures/1"} {
		if w := f.do(req{path: p}); w.Code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, w.Code)
		}
	}
}

// noKeys is a backend without key databases (as KubeVirt's): the machine
// interface only, so it is no machine.KeyStorer.
type noKeys struct{ machine.Backend }

// TestSecureBootWithoutKeys: on a backend without key databases the
// SecureBoot resource still turns secure boot on and off but links no
// databases and offers no key reset, whose targets would answer 404
// (sushy's secure_boot.databases failed on KubeVirt before).
func TestSecureBootWithoutKeys(t *testing.T) {
	f := newFixture(t, 1)
	srv := New(machine.NewService(noKeys{f.be}, nil), nil, WithCredentials(testUser, testPass))
	f.h = srv.Handler()
	sb := f.sys(0) + "/SecureBoot"
	v := decode(t, f.do(req{path: sb}))
	if _, ok := v["SecureBootDatabases"]; ok {
		t.Errorf("SecureBootDatabases linked without key databases: %v", v)
	}
	if _, ok := v["Actions"]; ok {
		t.Errorf("ResetKeys offered without key databases: %v", v)
	}
	if w := f.do(req{path: sb + "/SecureBootDatabases"}); w.Code != http.StatusNotFound {
		t.Errorf("GET SecureBootDatabases: %d, want 404", w.Code)
	}
	if w := f.do(req{method: "PATCH", path: sb, body: `{"SecureBootEnable": true}`}); w.Code != http.StatusOK && w.Code != http.StatusNoContent {
		t.Fatalf("PATCH SecureBootEnable: %d %s", w.Code, w.Body)
	}
	if v := decode(t, f.do(req{path: sb})); v["SecureBootEnable"] != true {
		t.Errorf("SecureBootEnable %v after the PATCH, want true", v["SecureBootEnable"])
	}
	// With key databases (the fixture's sim backend) both are there.
	g := newFixture(t, 1)
	v = decode(t, g.do(req{path: g.sys(0) + "/SecureBoot"}))
	if _, ok := v["SecureBootDatabases"]; !ok {
		t.Errorf("no SecureBootDatabases with key databases: %v", v)
	}
	if _, ok := v["Actions"]; !ok {
		t.Errorf("no ResetKeys with key databases: %v", v)
	}
}
