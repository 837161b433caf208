package redfish

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/bmlab/bmlab/internal/accounts"
)

// The findings of the DMTF Redfish-Protocol-Validator (1.2.9) against vbmcd,
// one case each; every case failed before the fix.
func TestProtocolValidatorFindings(t *testing.T) {
	opt, st := withStore(t)
	f := newFixture(t, 1, opt)
	if _, err := st.Create(accounts.New{UserName: "ro", Password: "ro-password", Role: accounts.ReadOnly, Enabled: true}); err != nil {
		t.Fatal(err)
	}

	t.Run("REQ_HEADERS_ODATA_VERSION: an OData version other than 4.0 gets 412", func(t *testing.T) {
		w := f.do(req{path: "/redfish/v1/", header: map[string]string{"OData-Version": "4.1"}})
		wantError(t, w, http.StatusPreconditionFailed, "HeaderInvalid")
		if w := f.do(req{path: "/redfish/v1/", header: map[string]string{"OData-Version": "4.0"}}); w.Code != http.StatusOK {
			t.Errorf("OData-Version 4.0: %d", w.Code)
		}
	})

	t.Run("REQ_QUERY_UNSUPPORTED_DOLLAR_PARAMS: an unknown $-parameter gets 501", func(t *testing.T) {
		w := f.do(req{path: "/redfish/v1/Systems?$rpvunknown"})
		wantError(t, w, http.StatusNotImplemented, "QueryParameterUnsupported")
		w = f.do(req{path: "/redfish/v1/Systems?%24expand=.&x=1"})
		wantError(t, w, http.StatusNotImplemented, "QueryParameterUnsupported")
		// Parameters without $ are ignored (DSP0266 §7.3).
		if w := f.do(req{path: "/redfish/v1/Systems?vendor=1"}); w.Code != http.StatusOK {
			t.Errorf("unknown plain parameter: %d, want 200", w.Code)
		}
	})

	t.Run("REQ_POST_CREATE_TO_MEMBERS_PROP: POST to Members is POST to the collection", func(t *testing.T) {
		w := f.do(req{method: "POST", path: "/redfish/v1/SessionService/Sessions/Members", noAuth: true,
			body: `{"UserName":"` + testUser + `","Password":"` + testPass + `"}`})
		if w.Code != http.StatusCreated || w.Header().Get("X-Auth-Token") == "" {
			t.Fatalf("login through Members: %d %s", w.Code, w.Body)
		}
		w = f.do(req{method: "POST", path: "/redfish/v1/AccountService/Accounts/Members",
			body: `{"UserName":"via-members","Password":"via-members-pw","RoleId":"ReadOnly"}`})
		if w.Code != http.StatusCreated {
			t.Fatalf("account through Members: %d %s", w.Code, w.Body)
		}
		// A collection that takes no POST still answers 405 at Members.
		w = f.do(req{method: "POST", path: "/redfish/v1/Systems/Members", body: `{}`})
		if w.Code != http.StatusMethodNotAllowed && w.Code != http.StatusNotFound {
			t.Errorf("POST Systems/Members: %d", w.Code)
		}
	})

	t.Run("RESP_HEADERS_LINK_REL_DESCRIBED_BY: GET and HEAD name the JSON Schema", func(t *testing.T) {
		for _, c := range []struct{ path, want string }{
			{"/redfish/v1/", "ServiceRoot.v1_17_0.json"},
			{"/redfish/v1/Systems", "ComputerSystemCollection.json"},
			{"/redfish/v1/Systems/" + f.ids[0], "ComputerSystem."},
			{"/redfish/v1/AccountService", "AccountService.v"},
			{"/redfish/v1/AccountService/Accounts", "ManagerAccountCollection.json"},
			{"/redfish/v1/SessionService/Sessions", "SessionCollection.json"},
		} {
			for _, m := range []string{"GET", "HEAD"} {
				w := f.do(req{method: m, path: c.path})
				link := w.Header().Get("Link")
				if w.Code != 200 || !strings.Contains(link, "https://redfish.dmtf.org/schemas/v1/"+c.want) || !strings.HasSuffix(link, "; rel=describedby") {
					t.Errorf("%s %s: %d Link %q, want the %s schema", m, c.path, w.Code, link, c.want)
				}
			}
		}
		// The Link names the version of the @odata.type served
		// (RESP_HEADERS_LINK_SCHEMA_VER_MATCH).
		w := f.do(req{path: "/redfish/v1/Systems/" + f.ids[0]})
		var body struct {
			Type string `json:"@odata.type"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		ver := strings.Split(body.Type, ".")[1]
		if !strings.Contains(w.Header().Get("Link"), "ComputerSystem."+ver+".json") {
			t.Errorf("Link %q does not name %s", w.Header().Get("Link"), body.Type)
		}
	})

	t.Run("SEC_ACCOUNTS_SUPPORT_ETAGS: PATCH of an account with a stale If-Match gets 412", func(t *testing.T) {
		path := "/redfish/v1/AccountService/Accounts/" + accountID(t, f, "ro")
		w := f.do(req{method: "PATCH", path: path, body: `{"Enabled": false}`, header: map[string]string{"If-Match": `"0123"`}})
		wantError(t, w, http.StatusPreconditionFailed, "PreconditionFailed")
		w = f.do(req{method: "PATCH", path: path, body: `{"Enabled": false}`, header: map[string]string{"If-Match": f.etag(path)}})
		if w.Code != http.StatusOK {
			t.Errorf("PATCH with the current ETag: %d %s", w.Code, w.Body)
		}
		w = f.do(req{method: "PATCH", path: "/redfish/v1/AccountService", body: `{"AccountLockoutThreshold": 4}`, header: map[string]string{"If-Match": `"0123"`}})
		wantError(t, w, http.StatusPreconditionFailed, "PreconditionFailed")
	})
}

// accountID finds the Id of the account named user.
func accountID(t *testing.T, f *fixture, user string) string {
	t.Helper()
	var coll struct {
		Members []struct {
			ID string `json:"@odata.id"`
		}
	}
	if err := json.Unmarshal(f.do(req{path: "/redfish/v1/AccountService/Accounts"}).Body.Bytes(), &coll); err != nil {
		t.Fatal(err)
	}
	for _, m := range coll.Members {
		var a struct{ ID, UserName string }
		if err := json.Unmarshal(f.do(req{path: m.ID}).Body.Bytes(), &a); err != nil {
			t.Fatal(err)
		}
		if a.UserName == user {
			return a.ID
		}
	}
	t.Fatalf("no account %q", user)
	return ""
}

// wantError checks a response's status and that its Redfish error names id.
func wantError(t *testing.T, w interface {
	Result() *http.Response
}, status int, id string) {
	t.Helper()
	resp := w.Result()
	var e struct {
		Error struct {
			Code     string `json:"code"`
			Extended []struct {
				MessageID string `json:"MessageId"`
			} `json:"@Message.ExtendedInfo"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatalf("status %d, body not a Redfish error: %v", resp.StatusCode, err)
	}
	if resp.StatusCode != status {
		t.Errorf("status %d, want %d", resp.StatusCode, status)
	}
	for _, x := range e.Error.Extended {
		if strings.HasSuffix(x.MessageID, "."+id) {
			return
		}
	}
	t.Errorf("messages %+v, want %s", e.Error.Extended, id)
}
