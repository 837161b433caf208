package redfish

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/bmlab/bmlab/internal/accounts"
)

func withStore(t testing.TB) (Option, *accounts.Store) {
	t.Helper()
	st, err := accounts.Open(t.TempDir(), accounts.WithCost(bcrypt.MinCost), accounts.WithReserved(testUser))
	if err != nil {
		t.Fatal(err)
	}
	return WithAccounts(st), st
}

// Every role gets what its privileges allow on every kind of route, and no
// more (DSP0266 §13.2; Redfish Privilege Registry defaults).
func TestRolesEnforced(t *testing.T) {
	opt, st := withStore(t)
	f := newFixture(t, 2, opt)
	for _, n := range []accounts.New{
		{UserName: "ro", Password: "ro-password", Role: accounts.ReadOnly, Enabled: true},
		{UserName: "op", Password: "op-password", Role: accounts.Operator, Enabled: true},
		{UserName: "adm", Password: "adm-password", Role: accounts.Administrator, Enabled: true},
	} {
		if _, err := st.Create(n); err != nil {
			t.Fatal(err)
		}
	}
	sys := "/redfish/v1/Systems/" + f.ids[0]
	reset := req{method: "POST", path: sys + "/Actions/ComputerSystem.Reset", body: `{"ResetType":"On"}`}
	boot := req{method: "PATCH", path: sys, body: `{"Boot":{"BootSourceOverrideTarget":"Pxe"}}`}
	create := req{method: "POST", path: "/redfish/v1/AccountService/Accounts", body: `{"UserName":"new-%s","Password":"new-password","RoleId":"ReadOnly"}`}
	policy := req{method: "PATCH", path: "/redfish/v1/AccountService", body: `{"AccountLockoutThreshold":4}`}
	bmcReset := req{method: "POST", path: managerURI(f.ids[0]) + "/Actions/Manager.Reset", body: `{"ResetType":"ForceRestart"}`}
	for _, tc := range []struct {
		user                                       string
		get, reset, boot, create, policy, bmcReset int
	}{
		{"ro", 200, 403, 403, 403, 403, 403},
		{"op", 200, 204, 200, 403, 403, 403},
		{"adm", 200, 204, 200, 201, 200, 204},
	} {
		t.Run(tc.user, func(t *testing.T) {
			pass := tc.user + "-password"
			check := func(what string, q req, want int) {
				t.Helper()
				q.user, q.pass = tc.user, pass
				if what == "create" {
					q.body = `{"UserName":"new-` + tc.user + `","Password":"new-password","RoleId":"ReadOnly"}`
				}
				if w := f.do(q); w.Code != want {
					t.Errorf("%s as %s: %d, want %d: %s", what, tc.user, w.Code, want, w.Body.String())
				}
			}
			check("GET system", req{path: sys}, tc.get)
			check("reset", reset, tc.reset)
			check("boot", boot, tc.boot)
			check("create account", create, tc.create)
			check("lockout policy", policy, tc.policy)
			check("BMC reset", bmcReset, tc.bmcReset)
		})
	}
	// ReadOnly changes its own password (ConfigureSelf), not its role.
	ro, _ := st.ByName("ro")
	self := "/redfish/v1/AccountService/Accounts/" + ro.ID
	if w := f.do(req{method: "PATCH", path: self, user: "ro", pass: "ro-password", body: `{"RoleId":"Administrator"}`}); w.Code != http.StatusForbidden {
		t.Errorf("ReadOnly raising its own role: %d %s", w.Code, w.Body.String())
	}
	if w := f.do(req{method: "PATCH", path: self, user: "ro", pass: "ro-password", body: `{"Password":"ro-password2"}`}); w.Code != http.StatusOK {
		t.Fatalf("ReadOnly changing its own password: %d %s", w.Code, w.Body.String())
	}
	// The cached credential is dropped with the change.
	if w := f.do(req{path: sys, user: "ro", pass: "ro-password"}); w.Code != http.StatusUnauthorized {
		t.Errorf("old password after the change: %d", w.Code)
	}
	if w := f.do(req{path: sys, user: "ro", pass: "ro-password2"}); w.Code != http.StatusOK {
		t.Errorf("new password: %d", w.Code)
	}
	// Roles collection, as the DMTF Protocol-Validator looks for it.
	if w := f.do(req{path: "/redfish/v1/AccountService/Roles/ReadOnly", user: "ro", pass: "ro-password2"}); w.Code != 200 {
		t.Errorf("Roles/ReadOnly: %d", w.Code)
	}
}

func TestPerSystemAccountAndLockout(t *testing.T) {
	opt, st := withStore(t)
	f := newFixture(t, 2, opt)
	w := f.do(req{method: "POST", path: "/redfish/v1/AccountService/Accounts",
		body: `{"UserName":"tenant","Password":"tenant-pass","RoleId":"Operator","Oem":{"Bmlab":{"System":"` + f.ids[0] + `"}}}`})
	if w.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", w.Code, w.Body.String())
	}
	loc := w.Header().Get("Location")
	if w := f.do(req{path: "/redfish/v1/Systems/" + f.ids[0], user: "tenant", pass: "tenant-pass"}); w.Code != 200 {
		t.Errorf("own system: %d", w.Code)
	}
	if w := f.do(req{path: "/redfish/v1/Systems/" + f.ids[1], user: "tenant", pass: "tenant-pass"}); w.Code != http.StatusUnauthorized {
		t.Errorf("other system: %d, want 401 (as for machines' own users)", w.Code)
	}
	if err := st.SetPolicy(accounts.Policy{Threshold: 2, Duration: 3600e9}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		f.do(req{path: "/redfish/v1/Systems", user: "tenant", pass: "wrong-pass"})
	}
	if w := f.do(req{path: "/redfish/v1/Systems", user: "tenant", pass: "tenant-pass"}); w.Code != http.StatusUnauthorized {
		t.Errorf("locked account with the right password: %d", w.Code)
	}
	if v := decode(t, f.do(req{path: loc})); v["Locked"] != true {
		t.Errorf("account not shown locked: %v", v)
	}
	if w := f.do(req{method: "PATCH", path: loc, body: `{"Locked":false}`}); w.Code != 200 {
		t.Fatalf("unlock: %d %s", w.Code, w.Body.String())
	}
	if w := f.do(req{path: "/redfish/v1/Systems", user: "tenant", pass: "tenant-pass"}); w.Code != 200 {
		t.Errorf("after unlock: %d", w.Code)
	}
	if w := f.do(req{method: "DELETE", path: loc}); w.Code != http.StatusNoContent {
		t.Fatalf("delete: %d", w.Code)
	}
	if w := f.do(req{path: "/redfish/v1/Systems", user: "tenant", pass: "tenant-pass"}); w.Code != http.StatusUnauthorized {
		t.Errorf("deleted account: %d", w.Code)
	}
}

// A stored Operator account on the hot path: after the first request its
// Basic credentials are cached, so a GET costs no bcrypt and the privilege
// check is one AND (compare with BenchmarkGetSystem, the bootstrap user).
func BenchmarkGetSystemStoredAccount(b *testing.B) {
	opt, st := withStore(b)
	f := newFixture(b, 10, opt)
	if _, err := st.Create(accounts.New{UserName: "op", Password: "op-password", Role: accounts.Operator, Enabled: true}); err != nil {
		b.Fatal(err)
	}
	r := httptest.NewRequest("GET", f.sys(0), nil)
	r.SetBasicAuth("op", "op-password")
	w := &discard{h: http.Header{}}
	f.h.ServeHTTP(w, r)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		clear(w.h)
		f.h.ServeHTTP(w, r)
	}
}
