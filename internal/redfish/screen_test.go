package redfish

import (
	"bytes"
	"context"
	"encoding/base64"
	"image"
	"image/png"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/accounts"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/sim"
	"github.com/bmlab/bmlab/internal/testenv"
)

// simScreen is the simulated machine's screen as drawn now.
func simScreen(t *testing.T, f *fixture, id string) []byte {
	t.Helper()
	img, err := f.be.Screenshot(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return img.(*image.RGBA).Pix
}

// shot posts a screenshot action and decodes the PNG it answers.
func shot(t *testing.T, f *fixture, q req) (w int, width, height int) {
	t.Helper()
	rec := f.do(q)
	if rec.Code != http.StatusOK {
		return rec.Code, 0, 0
	}
	s, _ := decode(t, rec)["ServerScreenShotFile"].(string)
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("ServerScreenShotFile is not base64: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("ServerScreenShotFile is not a PNG: %v", err)
	}
	return rec.Code, img.Bounds().Dx(), img.Bounds().Dy()
}

func (f *fixture) powerOn(t *testing.T, id string) {
	t.Helper()
	if w := f.do(req{method: "POST", path: systemURI(id) + "/Actions/ComputerSystem.Reset", body: `{"ResetType":"On"}`}); w.Code != http.StatusNoContent {
		t.Fatalf("power on: %d %s", w.Code, w.Body.String())
	}
}

func (f *fixture) personality(t *testing.T, id, name string) {
	t.Helper()
	if _, err := f.svc.UpdateSettings(t.Context(), id, func(s *machine.Settings) error {
		s.Personality = name
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A Dell personality serves Dell's DellLCService and its screenshot at the
// path and in the shape Dell's ExportServerScreenShotREDFISH.py uses (and at
// the older /redfish/v1/Dell/Managers path); the others serve vbmcd's own
// action, named in the Manager's Actions.Oem. Each is where its Manager
// says, and nowhere else.
func TestScreenShotWherePersonalitySays(t *testing.T) {
	f := newFixture(t, 2)
	dell, generic := f.ids[0], f.ids[1]
	f.personality(t, dell, "idrac9")
	f.powerOn(t, dell)
	f.powerOn(t, generic)

	mgr := decode(t, f.do(req{path: managerURI(dell)}))
	link := mgr["Links"].(map[string]any)["Oem"].(map[string]any)["Dell"].(map[string]any)["DellLCService"].(map[string]any)["@odata.id"]
	if link != managerURI(dell)+"/Oem/Dell/DellLCService" {
		t.Fatalf("Dell Manager's Links.Oem.Dell.DellLCService = %v", link)
	}
	oem := mgr["Actions"].(map[string]any)["Oem"].(map[string]any)
	if _, ok := oem["#Bmlab.ExportScreenShot"]; ok {
		t.Error("a Dell Manager names vbmcd's screenshot too")
	}
	if _, ok := oem["#Bmlab.SendKeys"]; !ok {
		t.Error("a Dell Manager does not name Bmlab.SendKeys")
	}
	lc := decode(t, f.do(req{path: link.(string)}))
	act := lc["Actions"].(map[string]any)["#DellLCService.ExportServerScreenShot"].(map[string]any)
	target := act["target"].(string)
	if target != managerURI(dell)+"/Oem/Dell/DellLCService/Actions/DellLCService.ExportServerScreenShot" {
		t.Fatalf("target %s", target)
	}
	for _, ft := range []string{"ServerScreenShot", ""} {
		body := `{"FileType":"` + ft + `"}`
		if ft == "" {
			body = `{}`
		}
		if code, w, h := shot(t, f, req{method: "POST", path: target, body: body}); code != 200 || w != sim.ScreenWidth || h != sim.ScreenHeight {
			t.Errorf("%s: %d, %d×%d", body, code, w, h)
		}
	}
	if code, w, _ := shot(t, f, req{method: "POST", path: target, body: `{"FileType":"Preview"}`}); code != 200 || w != previewWidth {
		t.Errorf("Preview: %d, width %d", code, w)
	}
	old := "/redfish/v1/Dell/Managers/" + dell + "/DellLCService/Actions/DellLCService.ExportServerScreenShot"
	if code, w, _ := shot(t, f, req{method: "POST", path: old, body: `{"FileType":"ServerScreenShot"}`}); code != 200 || w != sim.ScreenWidth {
		t.Errorf("the older Dell path: %d", code)
	}
	if w := f.do(req{method: "POST", path: target, body: `{"FileType":"LastCrashScreenShot"}`}); w.Code != http.StatusNotFound {
		t.Errorf("LastCrashScreenShot: %d", w.Code)
	}
	if w := f.do(req{method: "POST", path: target, body: `{"FileType":"Movie"}`}); w.Code != 400 || messageIDs(t, w)[0] != "ActionParameterValueNotInList" {
		t.Errorf("FileType Movie: %d %s", w.Code, w.Body.String())
	}

	gm := decode(t, f.do(req{path: managerURI(generic)}))
	gt := gm["Actions"].(map[string]any)["Oem"].(map[string]any)["#Bmlab.ExportScreenShot"].(map[string]any)["target"].(string)
	if code, w, _ := shot(t, f, req{method: "POST", path: gt, body: `{"FileType":"ServerScreenShot"}`}); code != 200 || w != sim.ScreenWidth {
		t.Errorf("vbmcd's screenshot: %d", code)
	}
	// Each where its Manager says only.
	for _, p := range []string{
		managerURI(generic) + "/Oem/Dell/DellLCService",
		managerURI(generic) + "/Oem/Dell/DellLCService/Actions/DellLCService.ExportServerScreenShot",
		managerURI(dell) + "/Actions/Oem/Bmlab.ExportScreenShot",
	} {
		method := "POST"
		if strings.HasSuffix(p, "DellLCService") {
			method = "GET"
		}
		if w := f.do(req{method: method, path: p, body: `{}`}); w.Code != http.StatusNotFound {
			t.Errorf("%s %s: %d, want 404", method, p, w.Code)
		}
	}
}

// At a Dell machine's own BMC the paths name iDRAC.Embedded.1, the older
// /redfish/v1/Dell/Managers path too.
func TestScreenShotAtDellBMC(t *testing.T) {
	f := newFixture(t, 1)
	id := f.ids[0]
	f.personality(t, id, "idrac10")
	f.powerOn(t, id)
	lc := f.do(req{path: "/redfish/v1/Managers/iDRAC.Embedded.1/Oem/Dell/DellLCService", bmc: id})
	if lc.Code != 200 || strings.Contains(lc.Body.String(), id) {
		t.Fatalf("DellLCService at the BMC: %d %s", lc.Code, lc.Body.String())
	}
	for _, p := range []string{
		"/redfish/v1/Managers/iDRAC.Embedded.1/Oem/Dell/DellLCService/Actions/DellLCService.ExportServerScreenShot",
		"/redfish/v1/Dell/Managers/iDRAC.Embedded.1/DellLCService/Actions/DellLCService.ExportServerScreenShot",
	} {
		if code, _, _ := shot(t, f, req{method: "POST", path: p, body: `{"FileType":"ServerScreenShot"}`, bmc: id}); code != 200 {
			t.Errorf("%s: %d", p, code)
		}
	}
}

// The screen shows what was typed; keys are named or text; an unknown key
// name is a 400 with a Base message that names it and what is known.
func TestSendKeys(t *testing.T) {
	f := newFixture(t, 1)
	id := f.ids[0]
	keys := managerURI(id) + "/Actions/Oem/Bmlab.SendKeys"
	if w := f.do(req{method: "POST", path: keys, body: `{"Keys":[{"Text":"a"}]}`}); w.Code != http.StatusConflict {
		t.Errorf("typing on an off machine: %d %s", w.Code, w.Body.String())
	}
	f.powerOn(t, id)
	w := f.do(req{method: "POST", path: keys, body: `{"Keys":[{"Text":"Hello"},{"Key":"Enter"},{"Key":"f2"},{"Key":"Ctrl-Alt-Del"}]}`})
	if w.Code != 200 || decode(t, w)["KeysTyped"] != float64(8) {
		t.Fatalf("SendKeys: %d %s", w.Code, w.Body.String())
	}
	img, err := f.be.Screenshot(t.Context(), id)
	if err != nil || img == nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		body, msg, detail string
	}{
		{`{"Keys":[{"Key":"Hyper"}]}`, "ActionParameterValueNotInList", `unknown key \"Hyper\"`},
		{`{"Keys":[{"Text":"é"}]}`, "ActionParameterValueFormatError", "cannot be typed"},
		{`{"Keys":[{"Text":"a","Key":"Enter"}]}`, "ActionParameterValueFormatError", "Each item is"},
		{`{"Keys":"abc"}`, "ActionParameterValueTypeError", ""},
		{`{}`, "ActionParameterMissing", ""},
		{`{"Keys":[],"Speed":3}`, "ActionParameterUnknown", ""},
		{`{"Keys":[{"Text":"` + strings.Repeat("x", MaxKeys+1) + `"}]}`, "ActionParameterValueFormatError", "At most 1024"},
	} {
		w := f.do(req{method: "POST", path: keys, body: tc.body})
		if w.Code != 400 || messageIDs(t, w)[0] != tc.msg || !strings.Contains(w.Body.String(), tc.detail) {
			t.Errorf("%.40s: %d %s", tc.body, w.Code, w.Body.String())
		}
	}
}

// ReadOnly takes no screenshot, types nothing, reads no serial output;
// Operator does all three.
func TestScreenPrivileges(t *testing.T) {
	opt, st := withStore(t)
	f := newFixture(t, 1, opt)
	id := f.ids[0]
	f.powerOn(t, id)
	for _, n := range []accounts.New{
		{UserName: "ro", Password: "ro-password", Role: accounts.ReadOnly, Enabled: true},
		{UserName: "op", Password: "op-password", Role: accounts.Operator, Enabled: true},
	} {
		if _, err := st.Create(n); err != nil {
			t.Fatal(err)
		}
	}
	base := managerURI(id) + "/Actions/Oem/"
	for _, tc := range []struct {
		user string
		want int
	}{{"ro", 403}, {"op", 200}} {
		for _, a := range []struct{ action, body string }{
			{"Bmlab.ExportScreenShot", `{}`},
			{"Bmlab.SendKeys", `{"Keys":[{"Text":"x"}]}`},
		} {
			w := f.do(req{method: "POST", path: base + a.action, body: a.body, user: tc.user, pass: tc.user + "-password"})
			if w.Code != tc.want {
				t.Errorf("%s %s: %d, want %d", tc.user, a.action, w.Code, tc.want)
			}
		}
	}
	// The sim keeps no serial log: a clear 400, not a 404 or a 500.
	w := f.do(req{method: "POST", path: base + "Bmlab.ExportSerialData", body: `{}`, user: "op", pass: "op-password"})
	if w.Code != 400 || !strings.Contains(w.Body.String(), "keep no serial log") {
		t.Errorf("serial data of a sim machine: %d %s", w.Code, w.Body.String())
	}
}

// Typing stops at the next key when the session ends or the account is
// lowered, as the web console's consoles close at once.
func TestSendKeysRevoked(t *testing.T) {
	opt, st := withStore(t)
	f := newFixture(t, 1, opt)
	id := f.ids[0]
	f.powerOn(t, id)
	a, err := st.Create(accounts.New{UserName: "op", Password: "op-password", Role: accounts.Operator, Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	old := sim.KeyDelay
	sim.KeyDelay = 5 * time.Millisecond
	defer func() { sim.KeyDelay = old }()
	body := `{"Keys":[{"Text":"` + strings.Repeat("k", 400) + `"}]}`
	keys := managerURI(id) + "/Actions/Oem/Bmlab.SendKeys"
	for _, tc := range []struct {
		name   string
		revoke func(token, location string)
		status int
	}{
		{"logout", func(_, loc string) { f.do(req{method: "DELETE", path: loc, user: "op", pass: "op-password"}) }, 401},
		{"lowered", func(string, string) {
			ro := accounts.ReadOnly
			if _, err := st.Update(a.ID, accounts.Change{Role: &ro}); err != nil {
				t.Error(err)
			}
		}, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			token, loc := f.login(t, "op", "op-password")
			before := simScreen(t, f, id)
			done := make(chan *struct {
				code int
				body string
			})
			go func() {
				w := f.do(req{method: "POST", path: keys, body: body, noAuth: true, header: map[string]string{"X-Auth-Token": token}})
				done <- &struct {
					code int
					body string
				}{w.Code, w.Body.String()}
			}()
			// Typing is under way (400 keys take 2 s) once the screen
			// shows a key more.
			if !testenv.WaitFor(2*time.Second, func() bool { return !bytes.Equal(simScreen(t, f, id), before) }) {
				t.Fatal("no key typed on the screen in 2 s")
			}
			tc.revoke(token, loc)
			got := <-done
			if got.code != tc.status || !strings.Contains(got.body, "of 400 keys were typed") {
				t.Fatalf("%d %s", got.code, got.body)
			}
			if strings.Contains(got.body, "400 of 400") {
				t.Error("every key was typed")
			}
		})
	}
}

// Past the burst, screenshots of one machine are refused with 429 and
// Retry-After; another machine's are not.
func TestScreenShotRateLimited(t *testing.T) {
	f := newFixture(t, 2, WithScreenshotRate(1, 3))
	now := time.Unix(1e9, 0)
	f.srv.now = func() time.Time { return now }
	f.powerOn(t, f.ids[0])
	f.powerOn(t, f.ids[1])
	path := func(i int) string { return managerURI(f.ids[i]) + "/Actions/Oem/Bmlab.ExportScreenShot" }
	for i := range 3 {
		if w := f.do(req{method: "POST", path: path(0), body: `{}`}); w.Code != 200 {
			t.Fatalf("screenshot %d: %d", i, w.Code)
		}
	}
	w := f.do(req{method: "POST", path: path(0), body: `{}`})
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" {
		t.Errorf("past the burst: %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	if w := f.do(req{method: "POST", path: path(1), body: `{}`}); w.Code != 200 {
		t.Errorf("another machine: %d", w.Code)
	}
	now = now.Add(time.Second)
	if w := f.do(req{method: "POST", path: path(0), body: `{}`}); w.Code != 200 {
		t.Errorf("a second later: %d", w.Code)
	}
}

// A Dell Manager with a screen names Dell's OEM actions (the SCP import and
// export) beside vbmcd's own (keys, serial output), and its one
// DellLCService names both its status and its screenshot, at the current
// and at the older /redfish/v1/Dell/Managers path, each served there.
func TestDellOEMBesideScreen(t *testing.T) {
	f := newFixture(t, 1)
	id := f.ids[0]
	f.personality(t, id, "idrac9")
	mgr := decode(t, f.do(req{path: managerURI(id)}))
	oem := mgr["Actions"].(map[string]any)["Oem"].(map[string]any)
	for _, a := range []string{
		"OemManager.v1_4_0#OemManager.ImportSystemConfiguration",
		"OemManager.v1_4_0#OemManager.ExportSystemConfiguration",
		"#Bmlab.SendKeys", "#Bmlab.ExportSerialData",
	} {
		if _, ok := oem[a]; !ok {
			t.Errorf("the Dell Manager's Actions.Oem lacks %s: %v", a, oem)
		}
	}
	links := mgr["Links"].(map[string]any)["Oem"].(map[string]any)["Dell"].(map[string]any)
	for _, l := range []string{"DellJobService", "DellLCService", "DelliDRACCardService", "Jobs"} {
		if _, ok := links[l]; !ok {
			t.Errorf("the Dell Manager's Links.Oem.Dell lacks %s: %v", l, links)
		}
	}
	for _, base := range []string{managerURI(id) + "/Oem/Dell/DellLCService", "/redfish/v1/Dell/Managers/" + id + "/DellLCService"} {
		lc := decode(t, f.do(req{path: base}))
		acts := lc["Actions"].(map[string]any)
		for _, a := range []string{"DellLCService.GetRemoteServicesAPIStatus", "DellLCService.ExportServerScreenShot"} {
			act, _ := acts["#"+a].(map[string]any)
			if act["target"] != base+"/Actions/"+a {
				t.Errorf("%s: %s's target %v", base, a, act["target"])
			}
		}
		w := f.do(req{method: "POST", path: base + "/Actions/DellLCService.GetRemoteServicesAPIStatus", body: `{}`})
		if st := decode(t, w); w.Code != http.StatusOK || st["LCStatus"] != "Ready" {
			t.Errorf("%s: GetRemoteServicesAPIStatus %d %v", base, w.Code, st)
		}
	}
}
