package redfish

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/machine"
)

// giveCredentials makes user/pass the own credentials of machine id.
func (f *fixture) giveCredentials(id, user, pass string) {
	f.t.Helper()
	_, err := f.svc.UpdateSettings(context.Background(), id, func(s *machine.Settings) error {
		s.Credentials = append(s.Credentials, machine.Credential{Username: user, Password: pass})
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

// onSys is a case's request to the first system's resource at sub (the
// system itself for ""), with body.
func onSys(method, sub, body string) func(f *fixture) req {
	return func(f *fixture) req { return req{method: method, path: f.sys(0) + sub, body: body} }
}

func TestErrorResponses(t *testing.T) {
	type outcome struct {
		Status int
		IDs    []string
		Header string // the value of the header the case names
	}
	cases := []struct {
		name   string
		setup  func(f *fixture)
		req    func(f *fixture) req
		header string
		want   outcome
	}{
		{name: "bad JSON",
			req:  onSys("PATCH", "", `{"Boot": `),
			want: outcome{Status: 400, IDs: []string{"MalformedJSON"}}},
		{name: "body not an object",
			req:  onSys("PATCH", "", `["Boot"]`),
			want: outcome{Status: 400, IDs: []string{"UnrecognizedRequestBody"}}},
		{name: "empty object",
			req:  onSys("PATCH", "", `{}`),
			want: outcome{Status: 400, IDs: []string{"EmptyJSON"}}},
		{name: "unknown property",
			req:  onSys("PATCH", "", `{"Frobnicate": true}`),
			want: outcome{Status: 400, IDs: []string{"PropertyUnknown"}}},
		{name: "unknown nested property",
			req:  onSys("PATCH", "", `{"Boot": {"BootWithoutAName": "0001"}}`),
			want: outcome{Status: 400, IDs: []string{"PropertyUnknown"}}},
		{name: "read-only property",
			req:  onSys("PATCH", "", `{"PowerState": "On"}`),
			want: outcome{Status: 400, IDs: []string{"PropertyNotWritable"}}},
		{name: "wrong type",
			req:  onSys("PATCH", "", `{"Boot": {"BootSourceOverrideTarget": 3}}`),
			want: outcome{Status: 400, IDs: []string{"PropertyValueTypeError"}}},
		{name: "object expected",
			req:  onSys("PATCH", "", `{"Boot": "Pxe"}`),
			want: outcome{Status: 400, IDs: []string{"PropertyValueTypeError"}}},
		{name: "bad enum",
			req:  onSys("PATCH", "", `{"Boot": {"BootSourceOverrideTarget": "Floppy"}}`),
			want: outcome{Status: 400, IDs: []string{"PropertyValueNotInList"}}},
		{name: "every mistake reported",
			req:  onSys("PATCH", "", `{"Boot": {"BootSourceOverrideMode": "BIOS", "BootSourceOverrideEnabled": 1}, "Zap": 1}`),
			want: outcome{Status: 400, IDs: []string{"PropertyValueTypeError", "PropertyValueNotInList", "PropertyUnknown"}}},
		{name: "unknown ResetType",
			req:  onSys("POST", "/Actions/ComputerSystem.Reset", `{"ResetType": "Explode"}`),
			want: outcome{Status: 400, IDs: []string{"ActionParameterValueNotInList"}}},
		{name: "missing ResetType",
			req:  onSys("POST", "/Actions/ComputerSystem.Reset", `{}`),
			want: outcome{Status: 400, IDs: []string{"ActionParameterMissing"}}},
		{name: "reset without a body",
			req:  onSys("POST", "/Actions/ComputerSystem.Reset", ""),
			want: outcome{Status: 400, IDs: []string{"ActionParameterMissing"}}},
		{name: "ResetType of the wrong type",
			req:  onSys("POST", "/Actions/ComputerSystem.Reset", `{"ResetType": true}`),
			want: outcome{Status: 400, IDs: []string{"ActionParameterValueTypeError"}}},
		{name: "unknown action parameter",
			req:  onSys("POST", "/Actions/ComputerSystem.Reset", `{"ResetType": "On", "Force": 1}`),
			want: outcome{Status: 400, IDs: []string{"ActionParameterUnknown"}}},
		{name: "Nmi on a machine that is off",
			req:  onSys("POST", "/Actions/ComputerSystem.Reset", `{"ResetType": "Nmi"}`),
			want: outcome{Status: 409, IDs: []string{"ResourceInUse"}}},
		{name: "wrong method on a member", header: "Allow",
			req:  onSys("DELETE", "", ""),
			want: outcome{Status: 405, IDs: []string{"OperationNotAllowed"}, Header: "GET, HEAD, PATCH"}},
		{name: "wrong method on a collection", header: "Allow",
			req:  func(f *fixture) req { return req{method: "POST", path: "/redfish/v1/Systems", body: `{}`} },
			want: outcome{Status: 405, IDs: []string{"OperationNotAllowed"}, Header: "GET, HEAD"}},
		{name: "GET on an action", header: "Allow",
			req:  onSys("GET", "/Actions/ComputerSystem.Reset", ""),
			want: outcome{Status: 405, IDs: []string{"OperationNotAllowed"}, Header: "POST"}},
		{name: "PATCH on the read-only TaskService", header: "Allow",
			req: func(f *fixture) req {
				return req{method: "PATCH", path: "/redfish/v1/TaskService", body: `{"ServiceEnabled": false}`}
			},
			want: outcome{Status: 405, IDs: []string{"OperationNotAllowed"}, Header: "GET, HEAD"}},
		{name: "wrong Content-Type",
			req: func(f *fixture) req {
				return req{method: "PATCH", path: f.sys(0), body: `IndicatorLED=Lit`, ctype: "application/x-www-form-urlencoded"}
			},
			want: outcome{Status: 415, IDs: []string{"HeaderInvalid"}}},
		{name: "empty text/plain POST (a browser's cross-site form)",
			req: func(f *fixture) req {
				return req{method: "POST", path: f.sys(0) + "/Actions/ComputerSystem.Reset", ctype: "text/plain"}
			},
			want: outcome{Status: 415, IDs: []string{"HeaderInvalid"}}},
		{name: "cross-site form POST to a name is refused, not redirected",
			req: func(f *fixture) req {
				return req{method: "POST", path: systemsURI + "/sim-0001/Actions/ComputerSystem.Reset", body: `ResetType=On`, ctype: "application/x-www-form-urlencoded"}
			},
			want: outcome{Status: 415, IDs: []string{"HeaderInvalid"}}},
		{name: "Manager.Reset with a system's ResetType",
			req: func(f *fixture) req {
				return req{method: "POST", path: managerURI(f.ids[0]) + "/Actions/Manager.Reset", body: `{"ResetType": "On"}`}
			},
			want: outcome{Status: 400, IDs: []string{"ActionParameterValueNotInList"}}},
		{name: "If-Match mismatch",
			req: func(f *fixture) req {
				return req{method: "PATCH", path: f.sys(0), body: `{"IndicatorLED": "Lit"}`, header: map[string]string{"If-Match": `"0123"`}}
			},
			want: outcome{Status: 412, IDs: []string{"PreconditionFailed"}}},
		{name: "weak ETag in If-Match never matches",
			req: func(f *fixture) req {
				return req{method: "PATCH", path: f.sys(0), body: `{"IndicatorLED": "Lit"}`, header: map[string]string{"If-Match": "W/" + f.etag(f.sys(0))}}
			},
			want: outcome{Status: 412, IDs: []string{"PreconditionFailed"}}},
		{name: "no credentials", header: "WWW-Authenticate",
			req:  func(f *fixture) req { return req{path: f.sys(0), noAuth: true} },
			want: outcome{Status: 401, IDs: []string{"NoValidSession"}, Header: hdrChallenge}},
		{name: "wrong password", header: "WWW-Authenticate",
			req:  func(f *fixture) req { return req{path: "/redfish/v1/Systems", user: testUser, pass: "nope"} },
			want: outcome{Status: 401, IDs: []string{"NoValidSession"}, Header: hdrChallenge}},
		{name: "unknown session token", header: "WWW-Authenticate",
			req: func(f *fixture) req {
				return req{path: "/redfish/v1/Systems", noAuth: true, header: map[string]string{"X-Auth-Token": "feedface"}}
			},
			want: outcome{Status: 401, IDs: []string{"NoValidSession"}, Header: hdrChallenge}},
		{name: "unauthenticated request for an unknown path", header: "WWW-Authenticate",
			req:  func(f *fixture) req { return req{path: "/redfish/v1/Secrets", noAuth: true} },
			want: outcome{Status: 401, IDs: []string{"NoValidSession"}, Header: hdrChallenge}},
		{name: "a system's credentials on another system", header: "WWW-Authenticate",
			setup: func(f *fixture) { f.giveCredentials(f.ids[0], "alice", "wonder") },
			req:   func(f *fixture) req { return req{path: f.sys(1), user: "alice", pass: "wonder"} },
			want:  outcome{Status: 401, IDs: []string{"NoValidSession"}, Header: hdrChallenge}},
		{name: "a system's credentials on another system's manager",
			setup: func(f *fixture) { f.giveCredentials(f.ids[0], "alice", "wonder") },
			req: func(f *fixture) req {
				return req{path: "/redfish/v1/Managers/" + f.ids[1], user: "alice", pass: "wonder"}
			},
			want: outcome{Status: 401, IDs: []string{"NoValidSession"}}},
		{name: "unknown system",
			req:  func(f *fixture) req { return req{path: "/redfish/v1/Systems/no-such-node"} },
			want: outcome{Status: 404, IDs: []string{"ResourceNotFound"}}},
		{name: "unknown sub-resource",
			req:  onSys("GET", "/Processors/CPU9", ""),
			want: outcome{Status: 404, IDs: []string{"ResourceNotFound"}}},
		{name: "unknown PCIe device",
			req:  func(f *fixture) req { return req{path: chassisOf(f.ids[0]) + "/PCIeDevices/0000-09-00/PCIeFunctions"} },
			want: outcome{Status: 404, IDs: []string{"ResourceNotFound"}}},
		{name: "unknown PCIe function",
			req: func(f *fixture) req {
				return req{path: chassisOf(f.ids[0]) + "/PCIeDevices/0000-01-00/PCIeFunctions/1"}
			},
			want: outcome{Status: 404, IDs: []string{"ResourceNotFound"}}},
		{name: "unknown network port",
			req: func(f *fixture) req {
				m, _ := f.svc.Get(f.ids[0])
				return req{path: chassisOf(f.ids[0]) + "/NetworkAdapters/" + nicID(m.NICs[0]) + "/Ports/2"}
			},
			want: outcome{Status: 404, IDs: []string{"ResourceNotFound"}}},
		{name: "ports of an unknown adapter",
			req:  func(f *fixture) req { return req{path: chassisOf(f.ids[0]) + "/NetworkAdapters/nope/Ports"} },
			want: outcome{Status: 404, IDs: []string{"ResourceNotFound"}}},
		{name: "unknown path",
			req:  func(f *fixture) req { return req{path: "/redfish/v1/Fabrics"} },
			want: outcome{Status: 404, IDs: []string{"ResourceNotFound"}}},
		{name: "unknown session",
			req:  func(f *fixture) req { return req{path: "/redfish/v1/SessionService/Sessions/abc"} },
			want: outcome{Status: 404, IDs: []string{"ResourceNotFound"}}},
		{name: "secure boot on while Legacy",
			setup: func(f *fixture) { f.patchOK(f.sys(0), `{"Boot": {"BootSourceOverrideMode": "Legacy"}}`) },
			req:   onSys("PATCH", "/SecureBoot", `{"SecureBootEnable": true}`),
			want:  outcome{Status: 409, IDs: []string{"PropertyValueConflict"}}},
		{name: "Legacy while secure boot is on",
			setup: func(f *fixture) { f.patchOK(f.sys(0)+"/SecureBoot", `{"SecureBootEnable": true}`) },
			req:   onSys("PATCH", "", `{"Boot": {"BootSourceOverrideMode": "Legacy"}}`),
			want:  outcome{Status: 409, IDs: []string{"PropertyValueConflict"}}},
		{name: "SecureBootEnable of the wrong type",
			req:  onSys("PATCH", "/SecureBoot", `{"SecureBootEnable": "yes"}`),
			want: outcome{Status: 400, IDs: []string{"PropertyValueTypeError"}}},
		{name: "SecureBootCurrentBoot is read-only",
			req:  onSys("PATCH", "/SecureBoot", `{"SecureBootCurrentBoot": "Enabled"}`),
			want: outcome{Status: 400, IDs: []string{"PropertyNotWritable"}}},
		{name: "unknown BIOS attribute",
			req:  onSys("PATCH", "/Bios/Settings", `{"Attributes": {"WarpDrive": "Enabled"}}`),
			want: outcome{Status: 400, IDs: []string{"PropertyUnknown"}}},
		{name: "BIOS attribute of the wrong type",
			req:  onSys("PATCH", "/Bios/Settings", `{"Attributes": {"QuietBoot": "yes"}}`),
			want: outcome{Status: 400, IDs: []string{"PropertyValueTypeError"}}},
		{name: "BIOS attribute not in its list",
			req:  onSys("PATCH", "/Bios/Settings", `{"Attributes": {"ProcTurboMode": "Sometimes"}}`),
			want: outcome{Status: 400, IDs: []string{"PropertyValueNotInList"}}},
		{name: "BIOS attribute out of range",
			req:  onSys("PATCH", "/Bios/Settings", `{"Attributes": {"PxeRetryCount": 99}}`),
			want: outcome{Status: 400, IDs: []string{"PropertyValueOutOfRange"}}},
		{name: "read-only BIOS attribute",
			req:  onSys("PATCH", "/Bios/Settings", `{"Attributes": {"TpmSecurity": "Off"}}`),
			want: outcome{Status: 400, IDs: []string{"PropertyNotWritable"}}},
		{name: "BIOS secure boot on legacy firmware",
			req:  onSys("PATCH", "/Bios/Settings", `{"Attributes": {"BootMode": "Bios", "SecureBoot": "Enabled"}}`),
			want: outcome{Status: 400, IDs: []string{"PropertyValueConflict"}}},
		{name: "BIOS boot mode not in its list",
			req:  onSys("PATCH", "/Bios/Settings", `{"Attributes": {"BootMode": "UEFI"}}`),
			want: outcome{Status: 400, IDs: []string{"PropertyValueNotInList"}}},
		{name: "BIOS apply time other than OnReset",
			req:  onSys("PATCH", "/Bios/Settings", `{"Attributes": {"QuietBoot": true}, "@Redfish.SettingsApplyTime": {"ApplyTime": "Immediate"}}`),
			want: outcome{Status: 400, IDs: []string{"PropertyValueNotInList"}}},
		{name: "current BIOS attributes are not patched directly", header: "Allow",
			req:  onSys("PATCH", "/Bios", `{"Attributes": {"QuietBoot": true}}`),
			want: outcome{Status: 405, IDs: []string{"OperationNotAllowed"}, Header: "GET, HEAD"}},
		{name: "body too large",
			req: func(f *fixture) req {
				return req{method: "PATCH", path: f.sys(0), body: `{"IndicatorLED": "` + strings.Repeat("x", maxBody) + `"}`}
			},
			want: outcome{Status: 413, IDs: []string{"PayloadTooLarge"}}},
		{name: "login with a wrong password",
			req: func(f *fixture) req {
				return req{method: "POST", path: sessionsURI, noAuth: true, body: `{"UserName": "admin", "Password": "guess"}`}
			},
			want: outcome{Status: 401, IDs: []string{"NoValidSession"}}},
		{name: "login without a password",
			req: func(f *fixture) req {
				return req{method: "POST", path: sessionsURI, noAuth: true, body: `{"UserName": "admin"}`}
			},
			want: outcome{Status: 400, IDs: []string{"PropertyMissing"}}},
		{name: "another user's account",
			req:  func(f *fixture) req { return req{path: accountsURI + "/root"} },
			want: outcome{Status: 404, IDs: []string{"ResourceNotFound"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 2)
			if tc.setup != nil {
				tc.setup(f)
			}
			w := f.do(tc.req(f))
			got := outcome{Status: w.Code, IDs: messageIDs(t, w)}
			if tc.header != "" {
				got.Header = w.Header().Get(tc.header)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s\nbody: %.600s", diff, w.Body.String())
			}
			if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
}

func (f *fixture) sys(i int) string { return systemURI(f.ids[i]) }

func (f *fixture) etag(path string) string {
	f.t.Helper()
	w := f.do(req{path: path})
	if w.Code != http.StatusOK {
		f.t.Fatalf("GET %s: %d", path, w.Code)
	}
	return w.Header().Get("ETag")
}

func (f *fixture) patchOK(path, body string) {
	f.t.Helper()
	w := f.do(req{method: "PATCH", path: path, body: body})
	if w.Code != http.StatusOK {
		f.t.Fatalf("PATCH %s %s: %d %s", path, body, w.Code, w.Body.String())
	}
}

// Error bodies carry the registry's text with the arguments filled in.
func TestErrorBodyNamesTheValue(t *testing.T) {
	f := newFixture(t, 1)
	w := f.do(req{method: "POST", path: f.sys(0) + "/Actions/ComputerSystem.Reset", body: `{"ResetType": "Explode"}`})
	e := decode(t, w)["error"].(map[string]any)
	info := e["@Message.ExtendedInfo"].([]any)[0].(map[string]any)
	want := "The value 'Explode' for the parameter ResetType in the action ComputerSystem.Reset is not in the list of acceptable values."
	if info["Message"] != want {
		t.Errorf("Message %q, want %q", info["Message"], want)
	}
	if diff := cmp.Diff([]any{"Explode", "ResetType", "ComputerSystem.Reset"}, info["MessageArgs"]); diff != "" {
		t.Errorf("MessageArgs (-want +got):\n%s", diff)
	}
}
