package redfish

import (
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/machine"
)

func TestPublicResourcesNeedNoCredentials(t *testing.T) {
	f := newFixture(t, 1)
	for _, p := range []string{"/redfish", "/redfish/v1", "/redfish/v1/", "/redfish/v1/odata", "/redfish/v1/$metadata"} {
		w := f.do(req{path: p, noAuth: true})
		if w.Code != http.StatusOK {
			t.Errorf("GET %s without credentials: %d", p, w.Code)
		}
		if w.Header().Get("OData-Version") != "4.0" {
			t.Errorf("GET %s: no OData-Version", p)
		}
	}
	if ct := f.do(req{path: "/redfish/v1/$metadata", noAuth: true}).Header().Get("Content-Type"); ct != "application/xml; charset=utf-8" {
		t.Errorf("$metadata Content-Type %q", ct)
	}
}

func members(t *testing.T, f *fixture, q req) []string {
	t.Helper()
	w := f.do(q)
	if w.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", q.path, w.Code, w.Body.String())
	}
	var out []string
	for _, m := range decode(t, w)["Members"].([]any) {
		out = append(out, m.(map[string]any)["@odata.id"].(string))
	}
	return out
}

func TestPerSystemCredentials(t *testing.T) {
	f := newFixture(t, 3)
	f.giveCredentials(f.ids[1], "alice", "wonder")
	alice := func(method, path, body string) req {
		return req{method: method, path: path, body: body, user: "alice", pass: "wonder"}
	}
	for _, coll := range []string{systemsURI, managersURI, chassisURI} {
		got := members(t, f, alice("GET", coll, ""))
		if diff := cmp.Diff([]string{coll + "/" + f.ids[1]}, got); diff != "" {
			t.Errorf("%s as alice (-want +got):\n%s", coll, diff)
		}
		if n := len(members(t, f, req{path: coll})); n != 3 {
			t.Errorf("%s as the service user: %d members, want 3", coll, n)
		}
	}
	for _, p := range []string{f.sys(1), f.sys(1) + "/Bios", f.sys(1) + "/Storage/1/Drives/vda", managerURI(f.ids[1]), chassisOf(f.ids[1])} {
		if w := f.do(alice("GET", p, "")); w.Code != http.StatusOK {
			t.Errorf("alice GET %s: %d", p, w.Code)
		}
	}
	if w := f.do(alice("PATCH", f.sys(1), `{"Boot": {"BootSourceOverrideTarget": "Pxe"}}`)); w.Code != http.StatusOK {
		t.Errorf("alice PATCH her system: %d %s", w.Code, w.Body.String())
	}
	for _, p := range []string{f.sys(0), f.sys(2) + "/Bios", managerURI(f.ids[0]), chassisOf(f.ids[2]), systemsURI + "/sim-0001"} {
		if w := f.do(alice("GET", p, "")); w.Code != http.StatusUnauthorized {
			t.Errorf("alice GET %s: %d, want 401", p, w.Code)
		}
	}
	// A session opened with her credentials is limited the same way.
	tok, _ := f.login(t, "alice", "wonder")
	for p, want := range map[string]int{f.sys(1): 200, f.sys(0): 401} {
		if w := f.do(req{path: p, noAuth: true, header: map[string]string{"X-Auth-Token": tok}}); w.Code != want {
			t.Errorf("alice's session GET %s: %d, want %d", p, w.Code, want)
		}
	}
	// Taking her credentials away takes her access away, cache or not.
	if _, err := f.svc.UpdateSettings(t.Context(), f.ids[1], func(s *machine.Settings) error { s.Credentials = nil; return nil }); err != nil {
		t.Fatal(err)
	}
	if w := f.do(alice("GET", f.sys(1), "")); w.Code != http.StatusUnauthorized {
		t.Errorf("alice after removal: %d, want 401", w.Code)
	}
}

func (f *fixture) login(t testing.TB, user, pass string) (token, location string) {
	t.Helper()
	w := f.do(req{method: "POST", path: sessionsURI, noAuth: true,
		body: `{"UserName": "` + user + `", "Password": "` + pass + `"}`})
	if w.Code != http.StatusCreated {
		t.Fatalf("login %s: %d %s", user, w.Code, w.Body.String())
	}
	token, location = w.Header().Get("X-Auth-Token"), w.Header().Get("Location")
	if token == "" || location == "" {
		t.Fatalf("login: token %q, location %q", token, location)
	}
	if got := decode(t, w)["@odata.id"]; got != location {
		t.Errorf("session @odata.id %v, Location %q", got, location)
	}
	return token, location
}

func TestSessionLifecycle(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	f := newFixture(t, 1, WithSessionTimeout(10*time.Minute), WithClock(func() time.Time { return now }))
	tok, loc := f.login(t, testUser, testPass)
	withTok := func(method, path string) req {
		return req{method: method, path: path, noAuth: true, header: map[string]string{"X-Auth-Token": tok}}
	}
	if w := f.do(withTok("GET", f.sys(0))); w.Code != http.StatusOK {
		t.Fatalf("GET with token: %d", w.Code)
	}
	if got := members(t, f, withTok("GET", sessionsURI)); !cmp.Equal(got, []string{loc}) {
		t.Errorf("sessions %v, want [%s]", got, loc)
	}
	// Use keeps it alive; idleness ends it.
	now = now.Add(9 * time.Minute)
	if w := f.do(withTok("GET", f.sys(0))); w.Code != http.StatusOK {
		t.Fatalf("after 9 idle minutes: %d", w.Code)
	}
	now = now.Add(9 * time.Minute)
	if w := f.do(withTok("GET", loc)); w.Code != http.StatusOK {
		t.Fatalf("9 minutes after last use: %d", w.Code)
	}
	now = now.Add(11 * time.Minute)
	if w := f.do(withTok("GET", f.sys(0))); w.Code != http.StatusUnauthorized {
		t.Fatalf("after 11 idle minutes: %d, want 401", w.Code)
	}
	// DELETE logs out.
	tok, loc = f.login(t, testUser, testPass)
	if w := f.do(withTok("DELETE", loc)); w.Code != http.StatusNoContent {
		t.Fatalf("DELETE session: %d %s", w.Code, w.Body.String())
	}
	if w := f.do(withTok("GET", f.sys(0))); w.Code != http.StatusUnauthorized {
		t.Errorf("after logout: %d, want 401", w.Code)
	}
}

func TestSessionLimit(t *testing.T) {
	f := newFixture(t, 1, WithMaxSessions(2))
	f.login(t, testUser, testPass)
	f.login(t, testUser, testPass)
	w := f.do(req{method: "POST", path: sessionsURI, noAuth: true, body: `{"UserName": "admin", "Password": "s3cret"}`})
	if got := messageIDs(t, w); w.Code != http.StatusServiceUnavailable || !cmp.Equal(got, []string{"SessionLimitExceeded"}) {
		t.Errorf("third session: %d %v", w.Code, got)
	}
}

func TestNamesRedirectToTheUUID(t *testing.T) {
	f := newFixture(t, 2)
	for _, tc := range []struct{ method, path, want string }{
		{"GET", systemsURI + "/sim-0002", f.sys(1)},
		{"GET", systemsURI + "/sim-0002/Bios/Settings", f.sys(1) + "/Bios/Settings"},
		{"GET", managersURI + "/sim-0001", managerURI(f.ids[0])},
		{"GET", chassisURI + "/sim-0002", chassisOf(f.ids[1])},
		{"GET", systemsURI + "/" + upper(f.ids[0]), f.sys(0)},
	} {
		w := f.do(req{method: tc.method, path: tc.path, body: map[bool]string{true: `{"IndicatorLED": "Lit"}`}[tc.method == "PATCH"]})
		if w.Code != http.StatusPermanentRedirect || w.Header().Get("Location") != tc.want {
			t.Errorf("%s %s: %d Location %q, want 308 %q", tc.method, tc.path, w.Code, w.Header().Get("Location"), tc.want)
		}
	}
}

// TestChangesByNameActInPlace: a PATCH or an action addressed by name acts
// on that system with no redirect a client (or a browser) would replay.
func TestChangesByNameActInPlace(t *testing.T) {
	f := newFixture(t, 2)
	w := f.do(req{method: "PATCH", path: systemsURI + "/sim-0002", body: `{"IndicatorLED": "Lit"}`})
	if w.Code/100 != 2 || w.Header().Get("Location") != "" {
		t.Fatalf("PATCH by name: %d Location %q, want 2xx in place", w.Code, w.Header().Get("Location"))
	}
	if got := decode(t, f.do(req{path: f.sys(1)}))["IndicatorLED"]; got != "Lit" {
		t.Errorf("after PATCH by name, IndicatorLED = %v, want Lit", got)
	}
	if got := decode(t, f.do(req{path: f.sys(0)}))["IndicatorLED"]; got == "Lit" {
		t.Errorf("PATCH by name sim-0002 changed sim-0001 too")
	}
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'f' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

func TestETags(t *testing.T) {
	f := newFixture(t, 1)
	e1 := f.etag(f.sys(0))
	if e1 == "" || e1 != f.etag(f.sys(0)) {
		t.Fatalf("ETag %q not stable", e1)
	}
	if w := f.do(req{path: f.sys(0), header: map[string]string{"If-None-Match": e1}}); w.Code != http.StatusNotModified {
		t.Errorf("If-None-Match current: %d, want 304", w.Code)
	}
	w := f.do(req{method: "PATCH", path: f.sys(0), body: `{"IndicatorLED": "Lit"}`, header: map[string]string{"If-Match": e1}})
	if w.Code != http.StatusOK {
		t.Fatalf("PATCH with the current ETag: %d %s", w.Code, w.Body.String())
	}
	e2 := w.Header().Get("ETag")
	if e2 == e1 || e2 != f.etag(f.sys(0)) {
		t.Errorf("ETag after change %q (before %q, GET %q)", e2, e1, f.etag(f.sys(0)))
	}
	if got := decode(t, w)["IndicatorLED"]; got != "Lit" {
		t.Errorf("PATCH response IndicatorLED %v", got)
	}
	// Every GET has one, collections and static resources too.
	for _, p := range []string{systemsURI, rootURI + "/", sessionServiceURI, f.sys(0) + "/Processors", registryURI} {
		if f.etag(p) == "" {
			t.Errorf("GET %s: no ETag", p)
		}
	}
}

type boot struct{ Target, Enabled, Mode string }

func (f *fixture) boot(t *testing.T) boot {
	t.Helper()
	b := decode(t, f.do(req{path: f.sys(0)}))["Boot"].(map[string]any)
	return boot{b["BootSourceOverrideTarget"].(string), b["BootSourceOverrideEnabled"].(string), b["BootSourceOverrideMode"].(string)}
}

func (f *fixture) reset(t *testing.T, rt string) {
	t.Helper()
	w := f.do(req{method: "POST", path: f.sys(0) + "/Actions/ComputerSystem.Reset", body: `{"ResetType": "` + rt + `"}`})
	if w.Code != http.StatusNoContent {
		t.Fatalf("reset %s: %d %s", rt, w.Code, w.Body.String())
	}
}

func TestBootOverrideOverHTTP(t *testing.T) {
	f := newFixture(t, 1)
	f.patchOK(f.sys(0), `{"Boot": {"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"}}`)
	if got := f.boot(t); got != (boot{"Pxe", "Once", "UEFI"}) {
		t.Fatalf("after PATCH: %+v", got)
	}
	f.reset(t, "On")
	if got := f.boot(t); got != (boot{"None", "Disabled", "UEFI"}) {
		t.Errorf("Once after a boot: %+v, want spent", got)
	}
	f.patchOK(f.sys(0), `{"Boot": {"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Continuous", "BootSourceOverrideMode": "Legacy"}}`)
	f.reset(t, "ForceRestart")
	f.reset(t, "PowerCycle")
	if got := f.boot(t); got != (boot{"Cd", "Continuous", "Legacy"}) {
		t.Errorf("Continuous after restarts: %+v", got)
	}
	if p := decode(t, f.do(req{path: f.sys(0)}))["PowerState"]; p != "On" {
		t.Errorf("PowerState %v", p)
	}
	for _, rt := range []string{"GracefulShutdown", "ForceOff", "ForceOn", "Nmi", "PushPowerButton", "GracefulRestart"} {
		f.reset(t, rt)
	}
}

func TestSecureBootTakesEffectAtNextStart(t *testing.T) {
	f := newFixture(t, 1)
	sb := func() (bool, string) {
		v := decode(t, f.do(req{path: f.sys(0) + "/SecureBoot"}))
		return v["SecureBootEnable"].(bool), v["SecureBootCurrentBoot"].(string)
	}
	f.reset(t, "On")
	f.patchOK(f.sys(0)+"/SecureBoot", `{"SecureBootEnable": true}`)
	if en, cur := sb(); !en || cur != "Disabled" {
		t.Errorf("before the restart: enable %v current %s", en, cur)
	}
	f.reset(t, "ForceRestart")
	if en, cur := sb(); !en || cur != "Enabled" {
		t.Errorf("after the restart: enable %v current %s", en, cur)
	}
}

func TestBIOSSettingsArePendingUntilReset(t *testing.T) {
	f := newFixture(t, 1)
	attrs := func(p string) map[string]any {
		return decode(t, f.do(req{path: f.sys(0) + p}))["Attributes"].(map[string]any)
	}
	f.reset(t, "On")
	f.patchOK(f.sys(0)+"/Bios/Settings", `{"Attributes": {"ProcTurboMode": "Disabled", "PxeRetryCount": 7}, "@Redfish.SettingsApplyTime": {"ApplyTime": "OnReset"}}`)
	if got := attrs("/Bios")["ProcTurboMode"]; got != "Enabled" {
		t.Errorf("current before reset: %v", got)
	}
	if diff := cmp.Diff(map[string]any{"ProcTurboMode": "Disabled", "PxeRetryCount": 7.0}, attrs("/Bios/Settings")); diff != "" {
		t.Errorf("pending (-want +got):\n%s", diff)
	}
	// @Redfish.Settings names the settings object's ETag, so a client sees
	// whether what it staged is still pending.
	settingsETag := func() (inBios, ofSettings string) {
		b := decode(t, f.do(req{path: f.sys(0) + "/Bios"}))
		inBios, _ = b["@Redfish.Settings"].(map[string]any)["ETag"].(string)
		return inBios, f.do(req{path: f.sys(0) + "/Bios/Settings"}).Header().Get("ETag")
	}
	staged, hdr := settingsETag()
	if staged == "" || staged != hdr {
		t.Errorf("@Redfish.Settings ETag %q, the settings object's %q", staged, hdr)
	}
	f.reset(t, "ForceRestart")
	if now, hdr := settingsETag(); now == staged || now != hdr {
		t.Errorf("after the reset @Redfish.Settings ETag %q (staged %q), the settings object's %q", now, staged, hdr)
	}
	cur := attrs("/Bios")
	if cur["ProcTurboMode"] != "Disabled" || cur["PxeRetryCount"] != 7.0 {
		t.Errorf("current after reset: %v", cur)
	}
	if p := attrs("/Bios/Settings"); len(p) != 0 {
		t.Errorf("pending after reset: %v", p)
	}
	w := f.do(req{method: "POST", path: f.sys(0) + "/Bios/Actions/Bios.ResetBios"})
	if w.Code != http.StatusNoContent {
		t.Fatalf("ResetBios: %d %s", w.Code, w.Body.String())
	}
	if p := attrs("/Bios/Settings"); p["ProcTurboMode"] != "Enabled" {
		t.Errorf("pending after ResetBios: %v", p)
	}
}

func TestEveryLinkResolves(t *testing.T) {
	f := newFixture(t, 2)
	f.giveCredentials(f.ids[0], "alice", "wonder")
	f.login(t, testUser, testPass)
	seen := map[string]bool{}
	types := map[string]string{} // schema namespace → a path that serves it
	queue := []string{rootURI + "/"}
	for len(queue) > 0 {
		p, _, _ := strings.Cut(queue[0], "#") // a fragment names a part of a resource (JSON pointer)
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		w := f.do(req{path: p})
		if w.Code != http.StatusOK {
			t.Errorf("GET %s: %d", p, w.Code)
			continue
		}
		if p == metadataURI {
			continue
		}
		v := decode(t, w)
		if id, _ := v["@odata.id"].(string); id != p && !(p == rootURI+"/" && id == p) {
			t.Errorf("GET %s: @odata.id %q", p, id)
		}
		queue = append(queue, links(v)...)
		for _, ns := range namespaces(v) {
			types[ns] = p
		}
	}
	// Every schema namespace served is referenced by $metadata (the
	// Service-Validator resolves types through it).
	meta := f.do(req{path: metadataURI}).Body.String()
	for ns, p := range types {
		if !strings.Contains(meta, `Namespace="`+ns+`"`) {
			t.Errorf("$metadata does not include %s (served at %s)", ns, p)
		}
	}
	got := make([]string, 0, len(seen))
	for p := range seen {
		got = append(got, p)
	}
	sort.Strings(got)
	if len(got) < 50 {
		t.Errorf("only %d resources reachable: %v", len(got), got)
	}
}

// namespaces lists the schema namespaces of every @odata.type in v
// ("#Role.v1_3_1.Role" → Role, Role.v1_3_1).
func namespaces(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		if t, ok := v["@odata.type"].(string); ok {
			parts := strings.Split(strings.TrimPrefix(t, "#"), ".")
			out = append(out, parts[0])
			if len(parts) == 3 {
				out = append(out, parts[0]+"."+parts[1])
			}
		}
		for _, x := range v {
			out = append(out, namespaces(x)...)
		}
	case []any:
		for _, x := range v {
			out = append(out, namespaces(x)...)
		}
	}
	return out
}

// links collects every @odata.id and action target below v.
func links(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && (k == "@odata.id" || k == "Uri") {
				out = append(out, s)
			}
			out = append(out, links(x)...)
		}
	case []any:
		for _, x := range v {
			out = append(out, links(x)...)
		}
	}
	return out
}
