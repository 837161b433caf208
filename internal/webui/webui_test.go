package webui

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/accounts"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/redfish"
	"github.com/bmlab/bmlab/internal/sim"
)

const user, pass = "admin", "unit-pass"

type fixture struct {
	svc   *machine.Service
	rf    *redfish.Server
	ui    *UI
	h     http.Handler
	store *accounts.Store
}

func newFixture(t testing.TB, n int) *fixture {
	t.Helper()
	svc := machine.NewService(sim.New(n), nil)
	store, err := accounts.Open(t.TempDir(), accounts.WithReserved(user))
	if err != nil {
		t.Fatal(err)
	}
	rf := redfish.New(svc, nil, redfish.WithCredentials(user, pass), redfish.WithAccounts(store))
	ui := New(rf, svc, nil)
	return &fixture{svc: svc, rf: rf, ui: ui, h: ui.Wrap(rf.Handler()), store: store}
}

// login opens a Redfish session and returns its token.
func (f *fixture) login(t testing.TB, u, p string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"UserName": u, "Password": p})
	r := httptest.NewRequest("POST", "/redfish/v1/SessionService/Sessions", strings.NewReader(string(body)))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	if w.Code != http.StatusCreated {
		t.Fatalf("login %s: %d %s", u, w.Code, w.Body)
	}
	return w.Header().Get("X-Auth-Token")
}

func (f *fixture) get(t testing.TB, tok, path string) (int, page) {
	t.Helper()
	r := httptest.NewRequest("GET", path, nil)
	if tok != "" {
		r.Header.Set("X-Auth-Token", tok)
	}
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	var p page
	_ = json.Unmarshal(w.Body.Bytes(), &p)
	return w.Code, p
}

func names(p page) []string {
	var out []string
	for _, r := range p.Rows {
		out = append(out, r.Name)
	}
	return out
}

// TestSystemsPages checks paging, the filter, the bounds, and that an
// account bound to one system sees that one only.
func TestSystemsPages(t *testing.T) {
	f := newFixture(t, 120)
	tok := f.login(t, user, pass)
	ms := f.svc.List()
	if _, err := f.store.Create(accounts.New{UserName: "bound", Password: "Bound-pass-1", Role: accounts.Operator, Enabled: true, System: ms[7].ID}); err != nil {
		t.Fatal(err)
	}
	bound := f.login(t, "bound", "Bound-pass-1")
	for _, tc := range []struct {
		name   string
		tok    string
		path   string
		status int
		total  int
		rows   []string
	}{
		{"first page", tok, "/ui/api/systems?top=3", 200, 120, []string{"sim-0001", "sim-0002", "sim-0003"}},
		{"last page", tok, "/ui/api/systems?skip=118&top=50", 200, 120, []string{"sim-0119", "sim-0120"}},
		{"past the end", tok, "/ui/api/systems?skip=500", 200, 120, nil},
		{"filter", tok, "/ui/api/systems?q=SIM-011&top=3", 200, 10, []string{"sim-0110", "sim-0111", "sim-0112"}},
		{"filter, second page", tok, "/ui/api/systems?q=sim-011&skip=9", 200, 10, []string{"sim-0119"}},
		{"bound account", bound, "/ui/api/systems", 200, 1, []string{"sim-0008"}},
		{"bound account, filtered out", bound, "/ui/api/systems?q=sim-0001", 200, 0, nil},
		{"top too large", tok, "/ui/api/systems?top=201", 400, 0, nil},
		{"negative skip", tok, "/ui/api/systems?skip=-1", 400, 0, nil},
		{"not a number", tok, "/ui/api/systems?top=x", 400, 0, nil},
		{"no token", "", "/ui/api/systems", 401, 0, nil},
		{"bad token", "nope", "/ui/api/systems", 401, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, p := f.get(t, tc.tok, tc.path)
			if st != tc.status {
				t.Fatalf("status %d, want %d", st, tc.status)
			}
			if st != 200 {
				return
			}
			if p.Total != tc.total {
				t.Errorf("Total %d, want %d", p.Total, tc.total)
			}
			if diff := cmp.Diff(tc.rows, names(p)); diff != "" {
				t.Errorf("rows (-want +got):\n%s", diff)
			}
		})
	}
	// The bound account cannot read another system's row or log.
	if st, _ := f.get(t, bound, "/ui/api/systems/"+ms[0].ID+"/events"); st != http.StatusNotFound {
		t.Errorf("bound account, another system's log: %d, want 404", st)
	}
	if st, _ := f.get(t, bound, "/ui/api/systems/"+ms[7].ID+"/events"); st != http.StatusOK {
		t.Errorf("bound account, its system's log: %d, want 200", st)
	}
}

// TestChanges checks the event log's words for what changed.
func TestChanges(t *testing.T) {
	off := &machine.Machine{ID: "a", Power: machine.PowerOff}
	on := &machine.Machine{ID: "a", Power: machine.PowerOn}
	once := &machine.Machine{ID: "a", Power: machine.PowerOff, Settings: machine.Settings{Boot: machine.Boot{Target: machine.BootCd, Enabled: machine.BootOnce, Mode: machine.BootModeUEFI}}}
	spent := &machine.Machine{ID: "a", Power: machine.PowerOn, Settings: machine.Settings{Boot: machine.Boot{Target: machine.BootCd, Enabled: machine.BootDisabled, Mode: machine.BootModeUEFI}}}
	inserted := &machine.Machine{ID: "a", Power: machine.PowerOff, Settings: machine.Settings{Media: []machine.MediaSettings{{Slot: machine.SlotCD, Path: "/x", Image: "http://h/x.iso"}}}}
	ejected := &machine.Machine{ID: "a", Power: machine.PowerOff, Settings: machine.Settings{Media: []machine.MediaSettings{{Slot: machine.SlotCD}}}}
	failed := &machine.Machine{ID: "a", Power: machine.PowerOff, PowerFault: "qemu died"}
	lost := &machine.Machine{ID: "a", Power: machine.PowerOff, Unavailable: "libvirtd down"}
	for _, tc := range []struct {
		name     string
		old, new *machine.Machine
		want     []string
	}{
		{"power", off, on, []string{"Power Off → On"}},
		{"nothing", off, off, nil},
		{"override set", off, once, []string{"Boot override set: Cd, Once, UEFI"}},
		{"once used at a start", once, spent, []string{"Power Off → On", "One-time boot override (Cd) used"}},
		{"media in", off, inserted, []string{"Virtual media Cd inserted: http://h/x.iso"}},
		{"media out", inserted, ejected, []string{"Virtual media Cd ejected"}},
		{"power fault", off, failed, []string{"Power action failed: qemu died"}},
		{"host lost", off, lost, []string{"Host unreachable: libvirtd down"}},
		{"host back", lost, off, []string{"Host reachable again"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, e := range changes(tc.old, tc.new) {
				got = append(got, e.Message)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestHeaders checks the page's security headers and that the console's
// paths take no method but GET.
func TestHeaders(t *testing.T) {
	f := newFixture(t, 1)
	r := httptest.NewRequest("GET", "/", nil)
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	if w.Code != 200 || !strings.Contains(w.Body.String(), `<script src="/ui/assets/app.js" defer></script>`) {
		t.Fatalf("GET /: %d", w.Code)
	}
	if strings.Contains(w.Body.String(), "<script>") {
		t.Errorf("the page has an inline script")
	}
	for h, want := range map[string]string{"Content-Security-Policy": csp, "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff"} {
		if got := w.Header().Get(h); got != want {
			t.Errorf("%s: %q, want %q", h, got, want)
		}
	}
	for _, m := range []string{"POST", "PUT", "DELETE"} {
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, httptest.NewRequest(m, "/ui/api/systems", nil))
		if w.Code != http.StatusMethodNotAllowed {
			t.Errorf("%s /ui/api/systems: %d, want 405", m, w.Code)
		}
	}
}

type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}

func benchGet(b *testing.B, wrap bool) {
	f := newFixture(b, 10)
	h := f.rf.Handler()
	if wrap {
		h = f.h
	}
	r := httptest.NewRequest("GET", "/redfish/v1/Systems/"+f.svc.List()[0].ID, nil)
	r.SetBasicAuth(user, pass)
	w := &discard{h: http.Header{}}
	h.ServeHTTP(w, r)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		clear(w.h)
		h.ServeHTTP(w, r)
	}
}

// BenchmarkGetSystemDirect and BenchmarkGetSystemWrapped compare a Redfish
// GET served by the Redfish handler alone and through Wrap: the console
// costs Redfish one prefix comparison.
func BenchmarkGetSystemDirect(b *testing.B)  { benchGet(b, false) }
func BenchmarkGetSystemWrapped(b *testing.B) { benchGet(b, true) }

// TestLiveOutlivesTimeouts checks a live stream keeps delivering past the
// listener's read and write timeouts, which bound ordinary requests (vbmcd
// sets 30 s and 60 s): without clearing them the stream ended when the
// first ran out, and the page missed what changed until it reconnected.
func TestLiveOutlivesTimeouts(t *testing.T) {
	f := newFixture(t, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.ui.Run(ctx)
	srv := httptest.NewUnstartedServer(f.h)
	srv.Config.ReadTimeout, srv.Config.WriteTimeout = 300*time.Millisecond, 300*time.Millisecond
	srv.Start()
	defer srv.Close()
	tok := f.login(t, user, pass)
	req, _ := http.NewRequest("GET", srv.URL+"/ui/api/live", nil)
	req.Header.Set("X-Auth-Token", tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("live: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	time.Sleep(time.Second) // past both timeouts
	id := f.svc.List()[1].ID
	if err := f.svc.Reset(ctx, id, machine.ResetOn); err != nil {
		t.Fatal(err)
	}
	waitRow(t, lines, "data: ", id, 20*time.Second, "the stream ended", "no row for the machine powered on")
}

// TestAssets checks the assets are served with their type and an ETag a
// browser revalidates with, and that directories are not listed.
func TestAssets(t *testing.T) {
	f := newFixture(t, 1)
	get := func(path, inm string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", path, nil)
		if inm != "" {
			r.Header.Set("If-None-Match", inm)
		}
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, r)
		return w
	}
	w := get("/ui/assets/vendor/xterm/xterm.js", "")
	if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/javascript") || w.Header().Get("ETag") == "" {
		t.Fatalf("xterm.js: %d %q %q", w.Code, w.Header().Get("Content-Type"), w.Header().Get("ETag"))
	}
	if w2 := get("/ui/assets/vendor/xterm/xterm.js", w.Header().Get("ETag")); w2.Code != http.StatusNotModified {
		t.Errorf("xterm.js with its ETag: %d, want 304", w2.Code)
	}
	for _, p := range []string{"/ui/assets/", "/ui/assets/vendor/", "/ui/assets/vendor/xterm", "/ui/assets/../webui.go"} {
		if w := get(p, ""); w.Code != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", p, w.Code)
		}
	}
}

// TestWrapSendsAPIPaths: the service's own paths (Redfish's, and an iLO's
// RIBCL at /ribcl) reach the Redfish handler through Wrap, with the answer
// it gives alone; the console keeps the rest.
func TestWrapSendsAPIPaths(t *testing.T) {
	f := newFixture(t, 1)
	type answer struct {
		Code        int
		ContentType string
		Body        string
	}
	do := func(h http.Handler, method, path string) answer {
		r := httptest.NewRequest(method, path, strings.NewReader("<RIBCL/>"))
		r.SetBasicAuth(user, pass)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return answer{w.Code, w.Header().Get("Content-Type"), w.Body.String()}
	}
	for _, tc := range []struct{ method, path string }{
		{"POST", "/ribcl"},
		{"POST", "/ribcl/"},
		{"GET", "/ribcl"},
		{"GET", "/redfish/v1/Systems"},
	} {
		if d := cmp.Diff(do(f.rf.Handler(), tc.method, tc.path), do(f.h, tc.method, tc.path)); d != "" {
			t.Errorf("%s %s through Wrap (-Redfish's +got):\n%s", tc.method, tc.path, d)
		}
	}
	if a := do(f.h, "GET", "/ribclx"); strings.Contains(a.Body, "@Message.ExtendedInfo") {
		t.Errorf("GET /ribclx reached the Redfish handler: %+v", a)
	}
}
