package redfish

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/media"
	"github.com/bmlab/bmlab/internal/sim"
)

// unknownKeys is a body of n unknown keys, each with a short value: with
// n = 80,000 about 860 KiB, the body of issue 25's memory blow-up.
func unknownKeys(n int) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%05d":1`, i)
	}
	b.WriteByte('}')
	return b.String()
}

// Error bodies are bounded whatever the request holds (issue 25: a login
// of 80,000 unknown keys, without credentials, was answered 400 with a
// message per key, 29 MB; a 1 MiB value was echoed back in 3.1 MB). A login
// reads at most 4 KiB and looks at UserName and Password only; a PATCH
// lists a few messages, then one saying how many more; an echoed value is
// cut to 64 bytes. Fails before the fix: the login answers 400 with 80,000
// messages.
func TestErrorBodiesBounded(t *testing.T) {
	f := newFixture(t, 1)
	big := unknownKeys(80_000)
	if len(big) < 800<<10 || len(big) > maxBody {
		t.Fatalf("test body of %d bytes, want about 860 KiB", len(big))
	}
	const bound = 8 << 10

	w := f.do(req{method: "POST", path: sessionsURI, noAuth: true, body: big})
	if got := messageIDs(t, w); w.Code != http.StatusRequestEntityTooLarge || !cmp.Equal(got, []string{"PayloadTooLarge"}) || w.Body.Len() > bound {
		t.Errorf("an unauthenticated login of 80,000 unknown keys: %d %v, %d bytes; want 413 PayloadTooLarge, at most %d bytes", w.Code, got, w.Body.Len(), bound)
	}
	// Under the login bound: the unknown keys are not looked at.
	w = f.do(req{method: "POST", path: sessionsURI, noAuth: true, body: unknownKeys(300)})
	if got := messageIDs(t, w); w.Code != http.StatusBadRequest || !cmp.Equal(got, []string{"PropertyMissing"}) {
		t.Errorf("a login of 300 unknown keys: %d %v, want 400 [PropertyMissing] (UserName)", w.Code, got)
	}
	w = f.do(req{method: "POST", path: sessionsURI, noAuth: true, body: `{"UserName":"admin","Password":12345678}`})
	if w.Code != http.StatusBadRequest || strings.Contains(w.Body.String(), "12345678") {
		t.Errorf("a login with a number for Password: %d, want 400 that does not echo it: %s", w.Code, w.Body.String())
	}

	// An authenticated PATCH of the same body: more values than a body
	// may hold, refused before any is decoded.
	w = f.do(req{method: "PATCH", path: f.sys(0), body: big})
	if got := messageIDs(t, w); w.Code != http.StatusRequestEntityTooLarge || !cmp.Equal(got, []string{"PayloadTooLarge"}) || w.Body.Len() > bound {
		t.Errorf("PATCH of 80,000 unknown keys: %d %v, %d bytes; want 413 PayloadTooLarge (more than %d values)", w.Code, got, w.Body.Len(), maxJSONValues)
	}
	// Under that bound: a few messages, then how many more.
	w = f.do(req{method: "PATCH", path: f.sys(0), body: unknownKeys(5_000)})
	got := messageIDs(t, w)
	if w.Code != http.StatusBadRequest || len(got) != maxMessages+1 || got[maxMessages] != "MaximumErrorsExceeded" || w.Body.Len() > bound {
		t.Fatalf("PATCH of 5,000 unknown keys: %d, %d messages (last %v), %d bytes; want 400, %d PropertyUnknown and MaximumErrorsExceeded, at most %d bytes",
			w.Code, len(got), got[len(got)-1:], w.Body.Len(), maxMessages, bound)
	}
	if want := fmt.Sprintf("%d more errors", 5_000-maxMessages); !strings.Contains(w.Body.String(), want) {
		t.Errorf("the last message does not say %q: %s", want, w.Body.String())
	}

	// Long values are echoed cut short.
	long := strings.Repeat("x", 1<<19)
	for _, q := range []req{
		{method: "PATCH", path: f.sys(0), body: `{"IndicatorLED":"` + long + `"}`},
		{method: "PATCH", path: f.sys(0), body: `{"Boot":{"BootSourceOverrideTarget":"` + long + `"}}`},
		{method: "PATCH", path: f.sys(0), body: `{"` + long + `":1}`},
		{method: "POST", path: f.sys(0) + "/Actions/ComputerSystem.Reset", body: `{"ResetType":"` + long + `"}`},
		{method: "POST", path: f.sys(0) + "/Actions/ComputerSystem.Reset", body: `{"` + long + `":1}`},
		{method: "PATCH", path: f.sys(0), body: `{"IndicatorLED":["` + long + `"]}`},
	} {
		w := f.do(q)
		if w.Code != http.StatusBadRequest || w.Body.Len() > 4<<10 {
			t.Errorf("%s %s with a 512 KiB value or key: %d, %d bytes; want 400, at most 4 KiB", q.method, q.path, w.Code, w.Body.Len())
		}
		if strings.Contains(w.Body.String(), strings.Repeat("x", maxArg+1)) {
			t.Errorf("%s %s echoes more than %d bytes of the value", q.method, q.path, maxArg)
		}
	}
	w = f.do(req{method: "PATCH", path: f.sys(0), body: `{"IndicatorLED":"` + long + `"}`})
	if !strings.Contains(w.Body.String(), strings.Repeat("x", maxArgText)+"…") || strings.Contains(w.Body.String(), strings.Repeat("x", maxArgText+1)) {
		t.Errorf("a long value is not echoed as its first %d bytes and an ellipsis: %s", maxArgText, w.Body.String())
	}
}

// A key given twice in one object is refused, at any depth, with a message
// naming it (issue 25: the last one won, so {"ResetType":"Explode",
// "ResetType":"ForceOff"} answered 204 and powered the system off). Fails
// before the fix: that reset answers 204.
func TestDuplicateKeysRefused(t *testing.T) {
	f := newFixture(t, 1)
	reset := f.sys(0) + "/Actions/ComputerSystem.Reset"
	if w := f.do(req{method: "POST", path: reset, body: `{"ResetType":"On"}`}); w.Code/100 != 2 {
		t.Fatalf("power on: %d %s", w.Code, w.Body.String())
	}
	for _, tc := range []struct {
		q       req
		id, arg string
	}{
		{req{method: "POST", path: reset, body: `{"ResetType":"Explode","ResetType":"ForceOff"}`}, "ActionParameterDuplicate", "ResetType"},
		{req{method: "POST", path: reset, body: `{"ResetType":"ForceOff","ResetType":"ForceOff"}`}, "ActionParameterDuplicate", "ResetType"},
		{req{method: "POST", path: reset, body: `{"ResetType":"On", "Reset\u0054ype" : "ForceOff"}`}, "ActionParameterDuplicate", "ResetType"},
		{req{method: "PATCH", path: f.sys(0), body: `{"Boot":{"BootSourceOverrideTarget":"Pxe","BootSourceOverrideTarget":"Cd"}}`}, "PropertyDuplicate", "Boot/BootSourceOverrideTarget"},
		{req{method: "PATCH", path: f.sys(0), body: `{"Boot":{"BootSourceOverrideTarget":"Pxe"},"Boot":{}}`}, "PropertyDuplicate", "Boot"},
		{req{method: "PATCH", path: f.sys(0) + "/Bios/Settings", body: `{"Attributes":{"a":[{"x":1,"x":2}]}}`}, "PropertyDuplicate", "Attributes/a/x"},
		{req{method: "POST", path: sessionsURI, noAuth: true, body: `{"UserName":"nobody","UserName":"admin","Password":"s3cret"}`}, "PropertyDuplicate", "UserName"},
	} {
		w := f.do(tc.q)
		if w.Code != http.StatusBadRequest {
			t.Errorf("%s %s: %d, want 400 [%s]", tc.q.method, tc.q.body, w.Code, tc.id)
			continue
		}
		got := messageIDs(t, w)
		if !cmp.Equal(got, []string{tc.id}) {
			t.Errorf("%s %s: %d %v, want 400 [%s]", tc.q.method, tc.q.body, w.Code, got, tc.id)
			continue
		}
		args := decode(t, w)["error"].(map[string]any)["@Message.ExtendedInfo"].([]any)[0].(map[string]any)["MessageArgs"].([]any)
		if args[len(args)-1] != tc.arg {
			t.Errorf("%s: message names %v, want %q", tc.q.body, args, tc.arg)
		}
	}
	if p := decode(t, f.do(req{path: f.sys(0)}))["PowerState"]; p != "On" {
		t.Errorf("after the refused resets PowerState %v, want On", p)
	}
	// The same keys in different objects are not duplicates.
	if w := f.do(req{method: "PATCH", path: f.sys(0), body: `{"Boot":{"BootSourceOverrideTarget":"Pxe","BootSourceOverrideEnabled":"Once"},"IndicatorLED":"Off"}`}); w.Code != http.StatusOK {
		t.Errorf("a PATCH without duplicates: %d %s", w.Code, w.Body.String())
	}
	for _, body := range []string{`{"ResetType":"On"} {"ResetType":"ForceOff"}`, `{"ResetType":"On"`, strings.Repeat(`{"a":`, 100) + "1" + strings.Repeat("}", 100), `{"a":[` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `]}`} {
		if got := messageIDs(t, f.do(req{method: "POST", path: reset, body: body})); !cmp.Equal(got, []string{"MalformedJSON"}) {
			t.Errorf("reset with %.40q: %v, want [MalformedJSON]", body, got)
		}
	}
}

// A PATCH that changes nothing, only annotations or empty objects, is
// refused with NoOperation (an empty body: EmptyJSON), as the Base registry
// words it: "no data to act upon" (issue 25: answered 200). Fails before
// the fix: {"Boot":{}} answers 200.
func TestPatchWithNothingToChange(t *testing.T) {
	opt, _ := withStore(t)
	f := newMediaFixture(t, opt)
	sys := f.sys(0)
	for _, tc := range []struct {
		path, body, want string
	}{
		{sys, `{}`, "EmptyJSON"},
		{sys, `{"@odata.id":"` + sys + `"}`, "NoOperation"},
		{sys, `{"Boot":{}}`, "NoOperation"},
		{sys, `{"Boot":{"@odata.type":"#ComputerSystem.v1_20_0.Boot"},"@odata.etag":"x"}`, "NoOperation"},
		{sys + "/SecureBoot", `{"@odata.id":"x"}`, "NoOperation"},
		{sys + "/Bios/Settings", `{"Attributes":{}}`, "NoOperation"},
		{sys + "/Bios/Settings", `{"@Redfish.SettingsApplyTime":{"ApplyTime":"OnReset"}}`, "NoOperation"},
		{"/redfish/v1/AccountService", `{"@odata.id":"/redfish/v1/AccountService"}`, "NoOperation"},
		{"/redfish/v1/EventService", `{"@odata.type":"#EventService.v1_10_0.EventService"}`, "NoOperation"},
		{"/redfish/v1/Managers/" + f.ids[0], `{"@odata.id":"x"}`, "NoOperation"},
		{f.cd(0), `{"@odata.id":"x"}`, "NoOperation"},
	} {
		w := f.do(req{method: "PATCH", path: tc.path, body: tc.body})
		if got := messageIDs(t, w); w.Code != http.StatusBadRequest || !cmp.Equal(got, []string{tc.want}) {
			t.Errorf("PATCH %s %s: %d %v, want 400 [%s]", tc.path, tc.body, w.Code, got, tc.want)
		}
	}
	for _, tc := range []struct{ path, body string }{
		{sys, `{"@odata.id":"` + sys + `","Boot":{"BootSourceOverrideTarget":"Pxe"}}`},
		{sys + "/Bios/Settings", `{"Attributes":{"BootMode":"Uefi"},"@Redfish.SettingsApplyTime":{"ApplyTime":"OnReset"}}`},
	} {
		if w := f.do(req{method: "PATCH", path: tc.path, body: tc.body}); w.Code != http.StatusOK {
			t.Errorf("PATCH %s %s: %d, want 200: %s", tc.path, tc.body, w.Code, w.Body.String())
		}
	}
}

// errorMessage is the first @Message.ExtendedInfo entry of an error response.
func errorMessage(t *testing.T, w *httptest.ResponseRecorder) (msg messageObject, top string) {
	t.Helper()
	var body struct {
		Error struct {
			Message string          `json:"message"`
			Info    []messageObject `json:"@Message.ExtendedInfo"`
		} `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || len(body.Error.Info) == 0 {
		t.Fatalf("not an error body (%v): %s", err, w.Body.String())
	}
	return body.Error.Info[0], body.Error.Message
}

// A string over its limit is refused with StringValueTooLong, which gives
// the limit, echoing only its start (issue 25: a 9 KB image URI was a 400
// GeneralError that did not say why). Fails before the fix: GeneralError.
func TestTooLongStringsSayTheLimit(t *testing.T) {
	f := newMediaFixture(t)
	insert := f.cd(0) + "/Actions/VirtualMedia.InsertMedia"
	long := f.images.URL + "/" + strings.Repeat("a", 9000) + ".iso"
	secret := strings.Repeat("p", 300)
	for _, tc := range []struct {
		method, path, body, limit, name string
	}{
		{"POST", insert, `{"Image":"` + long + `"}`, "2048", "Image"},
		{"PATCH", f.cd(0), `{"Image":"` + long + `","Inserted":true}`, "2048", "Image"},
		{"POST", insert, `{"Image":"` + f.images.URL + `/small.iso","UserName":"` + strings.Repeat("u", 300) + `","Password":"p"}`, "256", "UserName"},
		{"POST", insert, `{"Image":"` + f.images.URL + `/small.iso","UserName":"u","Password":"` + secret + `"}`, "256", "Password"},
		{"POST", "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate", `{"ImageURI":"` + long + `","Targets":["` + f.sys(0) + `"]}`, "2048", "ImageURI"},
	} {
		w := f.do(req{method: tc.method, path: tc.path, body: tc.body})
		if got := messageIDs(t, w); w.Code != http.StatusBadRequest || !cmp.Equal(got, []string{"StringValueTooLong"}) {
			t.Errorf("%s %s with a long %s: %d %v, want 400 [StringValueTooLong]", tc.method, tc.path, tc.name, w.Code, got)
			continue
		}
		m, top := errorMessage(t, w)
		if !strings.HasSuffix(m.Message, "exceeds the length limit "+tc.limit+".") || !strings.Contains(top, tc.name+" is ") {
			t.Errorf("%s: message %q, detail %q; want the limit %s and the length of %s", tc.name, m.Message, top, tc.limit, tc.name)
		}
		if len(m.MessageArgs[0]) > maxArgText+len("…") || strings.Contains(w.Body.String(), secret) {
			t.Errorf("%s: echoes %d bytes of the value (or the password): %q", tc.name, len(m.MessageArgs[0]), m.MessageArgs[0])
		}
	}
}

// An image server's address refused by the media policy is answered
// AccessDenied ("the service denied access"), saying it is the BMC's policy
// and which vbmcd flag allows the address (issue 25: it said
// ActionParameterValueFormatError, "of a different format"). Fails before
// the fix: ActionParameterValueFormatError.
func TestPolicyRefusalSaysWhichFlag(t *testing.T) {
	images := newMediaFixture(t).images                     // on loopback
	cache, err := media.New(media.Config{Dir: t.TempDir()}) // the default policy: loopback refused
	if err != nil {
		t.Fatal(err)
	}
	be := sim.New(1)
	svc := machine.NewService(be, nil, machine.WithImageFetcher(cache), machine.WithMediaWait(5*time.Second))
	srv := New(svc, nil, WithCredentials(testUser, testPass), WithInsertWait(5*time.Second))
	f := &fixture{t: t, be: be, svc: svc, srv: srv, h: srv.Handler()}
	id := be.List()[0].ID
	insert := managerURI(id) + "/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia"
	for _, q := range []req{
		{method: "POST", path: insert, body: `{"Image":"` + images.URL + `/small.iso"}`},
		{method: "PATCH", path: managerURI(id) + "/VirtualMedia/Cd", body: `{"Image":"` + images.URL + `/small.iso","Inserted":true}`},
	} {
		w := f.do(q)
		if got := messageIDs(t, w); w.Code != http.StatusBadRequest || !cmp.Equal(got, []string{"AccessDenied"}) {
			t.Errorf("%s of a loopback image: %d %v, want 400 [AccessDenied]: %s", q.method, w.Code, got, w.Body.String())
			continue
		}
		m, _ := errorMessage(t, w)
		if !strings.Contains(m.Resolution, "policy") || !strings.Contains(m.Resolution, "--media-allow-loopback") {
			t.Errorf("%s: Resolution %q does not say it is the BMC's policy and which flag allows the address", q.method, m.Resolution)
		}
	}
}
