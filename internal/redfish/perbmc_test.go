package redfish

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestBMCsKeepTheirOwnNamesAndCounts: what a rack's BMCs would not share,
// two machines' own BMCs (AtBMC) do not share either (issue 46: a 409 "name
// taken" at one BMC told another's account names, and account,
// subscription and event ids counted across every BMC told one BMC of the
// others' activity).
//   - User names are per BMC: each BMC makes an "ops" of its own, each logs
//     in at its own BMC with its own password and not at the other; on the
//     service's listener, which serves both, the name is ambiguous and
//     refused. A global account's name, a user of every BMC, clashes with
//     any.
//   - A lock is per BMC: wrong passwords for one BMC's ops lock it for
//     their source, not the other BMC's ops.
//   - An account's Id at a BMC is its IPMI user ID: both opses are
//     Accounts/3.
//   - Subscription ids are random, and each subscription counts its own
//     EventIds: each BMC's subscriber gets EventId 1 for its machine's
//     first power change.
func TestBMCsKeepTheirOwnNamesAndCounts(t *testing.T) {
	f := eventFixture(t)
	opt, _ := withStore(t)
	opt(f.srv)
	a, b := f.ids[0], f.ids[1]
	create := func(bmc, user, pass string) *httptest.ResponseRecorder {
		return f.do(req{method: "POST", path: "/redfish/v1/AccountService/Accounts", bmc: bmc,
			body: `{"UserName":"` + user + `","Password":"` + pass + `","RoleId":"Administrator"}`})
	}
	wa, wb := create(a, "ops", "ops-at-a-pass"), create(b, "ops", "ops-at-b-pass")
	if wa.Code != http.StatusCreated || wb.Code != http.StatusCreated {
		t.Errorf("ops at each BMC: %d %s, %d %s; want 201 twice", wa.Code, wa.Body, wb.Code, wb.Body)
	}
	if la, lb := wa.Header().Get("Location"), wb.Header().Get("Location"); la != lb || la != "/redfish/v1/AccountService/Accounts/3" {
		t.Errorf("the opses are at %s and %s, want Accounts/3 at each BMC (their IPMI user ID)", la, lb)
	}
	if w := f.do(req{method: "POST", path: "/redfish/v1/AccountService/Accounts",
		body: `{"UserName":"ops","Password":"ops-global-pass","RoleId":"ReadOnly"}`}); w.Code != http.StatusConflict {
		t.Errorf("a global ops, beside the BMCs' own: %d, want 409", w.Code)
	}
	if w := f.do(req{method: "POST", path: "/redfish/v1/AccountService/Accounts",
		body: `{"UserName":"everyone","Password":"everyone-pass","RoleId":"ReadOnly"}`}); w.Code != http.StatusCreated {
		t.Fatalf("a global account: %d %s", w.Code, w.Body)
	}
	if w := create(a, "everyone", "another-pass"); w.Code != http.StatusConflict {
		t.Errorf("a BMC's account named as a global one: %d, want 409", w.Code)
	}

	login := func(bmc, pass, remote string) int {
		return f.do(req{path: "/redfish/v1/Systems", bmc: bmc, user: "ops", pass: pass, remote: remote}).Code
	}
	for _, tc := range []struct {
		bmc, pass string
		want      int
	}{
		{a, "ops-at-a-pass", http.StatusOK}, {b, "ops-at-b-pass", http.StatusOK},
		{b, "ops-at-a-pass", http.StatusUnauthorized}, {a, "ops-at-b-pass", http.StatusUnauthorized},
		{"", "ops-at-a-pass", http.StatusUnauthorized}, // the service's listener: which ops?
	} {
		if got := login(tc.bmc, tc.pass, "192.0.2.5:1"); got != tc.want {
			t.Errorf("ops with %s at BMC %q: %d, want %d", tc.pass, tc.bmc, got, tc.want)
		}
	}
	for range 5 { // the default lockout threshold
		login(a, "wrong-password", "192.0.2.66:1")
	}
	if got := login(a, "ops-at-a-pass", "192.0.2.66:2"); got != http.StatusUnauthorized {
		t.Errorf("ops at BMC a from the guesser's address after 5 failures: %d, want 401 locked", got)
	}
	if got := login(b, "ops-at-b-pass", "192.0.2.66:3"); got != http.StatusOK {
		t.Errorf("ops at BMC b from the same address: %d, want 200 (its lock is its own)", got)
	}

	// Subscriptions and their EventIds.
	var subs []string
	var listeners []*listener
	for _, bmc := range []string{a, b} {
		ls := newListener(t)
		w := f.do(req{method: "POST", path: "/redfish/v1/EventService/Subscriptions", bmc: bmc, body: `{"Destination":"` + ls.URL + `"}`})
		if w.Code != http.StatusCreated {
			t.Fatalf("subscribe at %s's BMC: %d %s", bmc, w.Code, w.Body)
		}
		subs, listeners = append(subs, w.Header().Get("Location")), append(listeners, ls)
	}
	for _, s := range subs {
		if id := s[strings.LastIndex(s, "/")+1:]; len(id) != 16 {
			t.Errorf("subscription %s: want a random id of 16 hex digits", s)
		}
	}
	for i, bmc := range []string{a, b} {
		if w := f.do(req{method: "POST", path: systemURI(bmc) + "/Actions/ComputerSystem.Reset", bmc: bmc, body: `{"ResetType":"On"}`}); w.Code >= 300 {
			t.Fatalf("power on %s: %d %s", bmc, w.Code, w.Body)
		}
		ev := listeners[i].waitFor(t, "", 10*time.Second)
		if id := ev["Events"].([]any)[0].(map[string]any)["EventId"]; id != "1" {
			t.Errorf("the first event of %s's subscriber has EventId %v, want 1", bmc, id)
		}
	}
}
