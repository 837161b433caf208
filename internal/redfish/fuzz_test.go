package redfish

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// noNetwork is the event delivery transport under fuzzing: subscriptions the
// fuzzer makes point anywhere, and nothing may leave the process.
type noNetwork struct{}

func (noNetwork) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("no network under fuzzing")
}

var fuzzMethods = []string{"GET", "HEAD", "POST", "PATCH", "PUT", "DELETE", "OPTIONS"}

// FuzzRequest sends the whole service arbitrary methods, paths, queries,
// bodies, content types and one extra header, as an authenticated client,
// a session client and an anonymous one. Whatever comes in, the service
// answers: never a panic, never a 500, and every error a Redfish error
// body. Run for minutes with:
//
//	go test ./internal/redfish -run '^$' -fuzz FuzzRequest -fuzztime 3m
func FuzzRequest(f *testing.F) {
	fx := newFixture(f, 2)
	fx.srv.events.client = &http.Client{Transport: noNetwork{}}
	tok, _ := fx.login(f, testUser, testPass)
	sys := fx.sys(0)
	seeds := []struct {
		method      uint8
		path, body  string
		ctype       string
		hName, hVal string
	}{
		{0, "/redfish/v1/", "", "", "", ""},
		{0, "/redfish/v1/$metadata", "", "", "Accept", "application/xml"},
		{0, systemsURI + "?$top=1&$skip=1", "", "", "", ""},
		{0, sys + "?$select=Boot", "", "", "OData-Version", "4.0"},
		{1, sys, "", "", "If-None-Match", `"abc"`},
		{3, sys, `{"Boot": {"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once"}}`, "application/json", "If-Match", "*"},
		{2, sys + "/Actions/ComputerSystem.Reset", `{"ResetType": "ForceRestart"}`, "application/json", "", ""},
		{3, sys + "/Bios/Settings", `{"Attributes": {"BootMode": "Uefi", "x": [1, {"y": null}]}}`, "application/json; charset=utf-8", "", ""},
		{2, sessionsURI, `{"UserName": "admin", "Password": "s3cret"}`, "application/json", "", ""},
		{2, accountsURI, `{"UserName": "op", "Password": "op-password-1", "RoleId": "Operator"}`, "application/json", "", ""},
		{5, accountsURI + "/op", "", "", "", ""},
		{2, "/redfish/v1/EventService/Subscriptions", `{"Destination": "http://127.0.0.1:9/ev", "Protocol": "Redfish", "Context": "c"}`, "application/json", "", ""},
		{2, "/redfish/v1/EventService/Actions/EventService.SubmitTestEvent", `{"MessageId": "Base.1.16.0.Success"}`, "application/json", "", ""},
		{2, managerURI(fx.ids[0]) + "/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia", `{"Image": "http://127.0.0.1:9/x.iso", "Inserted": true}`, "application/json", "", ""},
		{3, "/redfish/v1/AccountService", `{"AccountLockoutThreshold": 3}`, "application/json", "", ""},
		{0, "/redfish/v1/Systems/sim-0001/../../Managers", "", "", "", ""},
		{0, "/redfish/v1/Systems/%2e%2e/", "", "", "Authorization", "Basic Og=="},
		{4, sys, "{", "text/plain", "Content-Length", "1"},
		{6, "/redfish", "", "", "X-Auth-Token", "nope"},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, []byte(s.body), s.ctype, s.hName, s.hVal, uint8(0))
	}
	f.Fuzz(func(t *testing.T, method uint8, path string, body []byte, ctype, hName, hVal string, who uint8) {
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		m := fuzzMethods[int(method)%len(fuzzMethods)]
		r, err := http.NewRequest(m, "http://bmc"+path, bytes.NewReader(body))
		if err != nil {
			return // not a request line any client can send
		}
		r.RemoteAddr = "192.0.2.1:1234"
		r.RequestURI = r.URL.RequestURI()
		if ctype != "" {
			r.Header.Set("Content-Type", ctype)
		}
		switch who % 3 {
		case 0:
			r.SetBasicAuth(testUser, testPass)
		case 1:
			r.Header.Set("X-Auth-Token", tok)
		}
		if hName != "" && validHeader(hName, hVal) {
			r.Header.Set(hName, hVal)
		}
		w := httptest.NewRecorder()
		fx.h.ServeHTTP(w, r)
		if w.Code >= 500 && w.Code != http.StatusNotImplemented && w.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s %s %q: %d %s", m, path, body, w.Code, w.Body.String())
		}
		if w.Code >= 400 && m != "HEAD" {
			var e struct {
				Error struct {
					Code string `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error.Code == "" {
				t.Fatalf("%s %s: %d without a Redfish error body: %q", m, path, w.Code, w.Body.String())
			}
		}
	})
}

// validHeader is a header a client can put on the wire (net/http refuses
// to send the rest).
func validHeader(name, val string) bool {
	for _, c := range name {
		if c <= ' ' || c >= 0x7f || strings.ContainsRune("()<>@,;:\\\"/[]?={}", c) {
			return false
		}
	}
	for _, c := range val {
		if c == '\r' || c == '\n' || c == 0 {
			return false
		}
	}
	return true
}
