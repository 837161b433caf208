package redfish

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/admission"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/netpolicy"
	"github.com/bmlab/bmlab/internal/personality"
)

// countingBody is a request body of n bytes (a JSON object's opening, then
// spaces) that counts what the server has read of it.
type countingBody struct {
	n, read atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	left := b.n.Load() - b.read.Load()
	if left <= 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), left)]
	for i := range p {
		p[i] = ' '
	}
	if b.read.Load() == 0 && len(p) > 0 {
		p[0] = '{'
	}
	b.read.Add(int64(len(p)))
	return len(p), nil
}

func (b *countingBody) Close() error { return nil }

// answerWatch notes how much of the body was read when the answer's
// status was written: what the server held before it answered.
type answerWatch struct {
	http.ResponseWriter
	body   *countingBody
	atCode int64
	code   int
}

func (w *answerWatch) WriteHeader(code int) {
	if w.code == 0 {
		w.code, w.atCode = code, w.body.read.Load()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *answerWatch) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// TestVendorBMCReadsBodiesWithinBudget: at a machine's own BMC of a vendor
// personality (iLO 6, iDRAC 9), a request body is read no further than its
// limit or its memory budget before the answer, as at the service's
// listener: a login of 1 MiB is refused (413) after its 4 KiB limit, and an
// authenticated PATCH of 512 KiB past a 64 KiB body budget is refused
// (503) once the budget is spent. Before the fix, the vendor-id mapper
// read each body whole (up to 1 MiB) before anything charged it (issue 46:
// 16 sources × 16 such logins took a vbmcd from 26 to 667 MB).
func TestVendorBMCReadsBodiesWithinBudget(t *testing.T) {
	for _, persona := range []string{"ilo6", "idrac9", "generic"} {
		t.Run(persona, func(t *testing.T) {
			f := newMediaFixtureN(t, 1)
			id := f.ids[0]
			if _, err := f.svc.UpdateSettings(context.Background(), id, func(s *machine.Settings) error {
				s.Personality = persona
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			const budget = 64 << 10
			g := admission.New(admission.Budgets{BodyPerSource: budget, BodyTotal: budget, RetryAfter: time.Second}, nil, Busy)
			h := g.Wrap(f.h)
			for _, tc := range []struct {
				name, method, path string
				auth               bool
				size               int64
				code               int
				most               int64 // bytes read before the answer, at most
			}{
				{"login", http.MethodPost, "/redfish/v1/SessionService/Sessions", false, 1 << 20, http.StatusRequestEntityTooLarge, maxLoginBody + 1},
				{"patch", http.MethodPatch, "/redfish/v1/Systems/" + id, true, 512 << 10, http.StatusServiceUnavailable, budget},
			} {
				body := &countingBody{}
				body.n.Store(tc.size)
				r := httptest.NewRequest(tc.method, tc.path, nil)
				r.Body, r.ContentLength = body, -1
				// As HTTP/2: an HTTP/1 body refused is read on and
				// discarded before the answer (discardBody), which holds
				// nothing but would count here.
				r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/2.0", 2, 0
				r.Header.Set("Content-Type", "application/json")
				if tc.auth {
					r.SetBasicAuth(testUser, testPass)
				}
				r = r.WithContext(AtBMC(r.Context(), id))
				w := &answerWatch{ResponseWriter: httptest.NewRecorder(), body: body}
				h.ServeHTTP(w, r)
				if w.code != tc.code || w.atCode > tc.most {
					t.Errorf("%s of %d KiB: %d with %d bytes read before the answer; want %d, at most %d read",
						tc.name, tc.size>>10, w.code, w.atCode, tc.code, tc.most)
				}
			}
			if _, _, held := g.InFlight(); held != 0 {
				t.Errorf("%d body bytes still charged after the requests", held)
			}
		})
	}
}

// TestVendorBMCLeavesUserDataAlone: at an iLO 6's own BMC, what a client
// writes is kept as written even when it holds a path like the BMC's own
// (issue 46: the mapper rewrote /redfish/v1/Systems/1/ in an event
// Destination and in an image URL to the machine's UUID, and the event was
// delivered there); only references (@odata.id, Targets) are mapped. The
// subscription is stored and shown with its Destination as given, a test
// event is POSTed to that path, and an inserted image keeps its URL.
func TestVendorBMCLeavesUserDataAlone(t *testing.T) {
	f := newMediaFixtureN(t, 1, WithEventPolicy(netpolicy.Policy{AllowLoopback: true}))
	id := f.ids[0]
	if _, err := f.svc.UpdateSettings(context.Background(), id, func(s *machine.Settings) error {
		s.Personality, s.Quirks = "ilo6", allQuirksOff
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	hook := newListenerAnswering(t, http.StatusNoContent)

	// An event Destination.
	dest := hook.URL + "/hook/redfish/v1/Systems/1/"
	w := f.do(req{method: http.MethodPost, path: "/redfish/v1/EventService/Subscriptions", bmc: id,
		body: `{"Destination":"` + dest + `","Protocol":"Redfish","Context":"/redfish/v1/Systems/1"}`})
	if w.Code != http.StatusCreated {
		t.Fatalf("subscribe at the iLO: %d %s", w.Code, w.Body)
	}
	sub := decode(t, f.do(req{path: w.Header().Get("Location"), bmc: id}))
	if sub["Destination"] != dest || sub["Context"] != "/redfish/v1/Systems/1" {
		t.Errorf("the subscription shows Destination %v, Context %v; want %s and /redfish/v1/Systems/1 as given", sub["Destination"], sub["Context"], dest)
	}
	if w := f.do(req{method: http.MethodPost, path: "/redfish/v1/EventService/Actions/EventService.SubmitTestEvent", bmc: id, body: `{}`}); w.Code >= 300 {
		t.Fatalf("SubmitTestEvent: %d %s", w.Code, w.Body)
	}
	hook.waitFor(t, "", 5*time.Second)
	hook.mu.Lock()
	if p := hook.paths[0]; p != "/hook/redfish/v1/Systems/1/" {
		t.Errorf("the event was POSTed to %s, want /hook/redfish/v1/Systems/1/", p)
	}
	hook.mu.Unlock()

	// An image URL, and a reference in the same body.
	iso := isoBytes(64 << 10)
	images := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "small.iso", time.Now(), strings.NewReader(string(iso)))
	}))
	defer images.Close()
	img := images.URL + "/redfish/v1/Systems/1/small.iso"
	cd := "/redfish/v1/Managers/1/VirtualMedia/2"
	if w := f.do(req{method: http.MethodPost, path: cd + "/Actions/VirtualMedia.InsertMedia", bmc: id,
		body: `{"Image":"` + img + `"}`}); w.Code != http.StatusNoContent {
		t.Fatalf("insert at the iLO: %d %s", w.Code, w.Body)
	}
	if v := decode(t, f.do(req{path: cd, bmc: id})); v["Image"] != img {
		t.Errorf("the iLO shows Image %v, want %s as given", v["Image"], img)
	}
	m, err := f.svc.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	var held []string
	for _, md := range m.Settings.Media {
		held = append(held, md.Image)
	}
	if !strings.Contains(strings.Join(held, " "), img) {
		t.Errorf("the machine holds %v, want %s", held, img)
	}
}

// TestVendorBMCMapsReferences: what the mapper still maps at an iLO 6's
// BMC, in a decoded body: @odata.id at any depth and the strings of
// Targets; a string under another name, or a URL, is left alone.
func TestVendorBMCMapsReferences(t *testing.T) {
	ilo, err := personality.Lookup("ilo6")
	if err != nil {
		t.Fatal(err)
	}
	v := newIDView("M", ilo)
	var body map[string]any
	if err := json.Unmarshal([]byte(`{
		"Targets": ["/redfish/v1/Systems/1", "/redfish/v1/UpdateService/FirmwareInventory/BIOS", "https://h/redfish/v1/Systems/1"],
		"Links": {"Drives": [{"@odata.id": "/redfish/v1/Systems/1/Storage/1/Drives/1"}]},
		"Destination": "https://h/hook/redfish/v1/Systems/1/",
		"Context": "/redfish/v1/Systems/1",
		"Image": "http://h/redfish/v1/Managers/1/x.iso"}`), &body); err != nil {
		t.Fatal(err)
	}
	v.mapRefs(body)
	got, _ := json.Marshal(body)
	want := `{"Context":"/redfish/v1/Systems/1","Destination":"https://h/hook/redfish/v1/Systems/1/","Image":"http://h/redfish/v1/Managers/1/x.iso",` +
		`"Links":{"Drives":[{"@odata.id":"/redfish/v1/Systems/M/Storage/1/Drives/1"}]},` +
		`"Targets":["/redfish/v1/Systems/M","/redfish/v1/UpdateService/FirmwareInventory/BIOS-M","https://h/redfish/v1/Systems/1"]}`
	if string(got) != want {
		t.Errorf("mapped:\n%s\nwant:\n%s", got, want)
	}
	// Out: a URL's path is left alone; a reference and a message's are
	// mapped.
	out := string(v.mapOut(&call{}, []byte(`{"@odata.id":"/redfish/v1/Systems/M","Destination":"https://h/redfish/v1/Systems/M/","Message":"The resource at '/redfish/v1/Managers/M' or /redfish/v1/Chassis/M"}`)))
	wantOut := `{"@odata.id":"/redfish/v1/Systems/1","Destination":"https://h/redfish/v1/Systems/M/","Message":"The resource at '/redfish/v1/Managers/1' or /redfish/v1/Chassis/1"}`
	if out != wantOut {
		t.Errorf("mapped out:\n%s\nwant:\n%s", out, wantOut)
	}
}

// TestVendorBMCNamesTheUUIDOnce: at each vendor personality's own BMC,
// every resource reachable from the service root by its links names the
// machine's UUID only as the System's UUID property (docs/personalities.md);
// the FirmwareInventory members are the components' names (issue 46: they
// were BIOS-<uuid>, BMC-<uuid>, NIC-<uuid>), and each is reached, and
// updated, by that name.
func TestVendorBMCNamesTheUUIDOnce(t *testing.T) {
	f, views := personalityFixture(t, allQuirksOff)
	for _, v := range views {
		if v.Personality == "generic" {
			continue
		}
		t.Run(v.Personality, func(t *testing.T) {
			seen := map[string]bool{}
			queue := []string{"/redfish/v1/"}
			for len(queue) > 0 {
				p := queue[0]
				queue = queue[1:]
				if seen[p] {
					continue
				}
				seen[p] = true
				w := f.do(req{path: p, bmc: v.UUID})
				if w.Code != http.StatusOK {
					continue
				}
				body := w.Body.String()
				if n := strings.Count(body, v.UUID) - strings.Count(body, `"UUID":"`+v.UUID+`"`); n > 0 {
					t.Errorf("%s names the machine's UUID %d times besides its UUID property:\n%s", p, n, body)
				}
				var doc any
				_ = json.Unmarshal(w.Body.Bytes(), &doc)
				for _, l := range links(doc) {
					if strings.HasPrefix(l, "/redfish/v1/") && !strings.Contains(l, "#") {
						queue = append(queue, l)
					}
				}
			}
			if len(seen) < 40 {
				t.Errorf("crawled only %d resources", len(seen))
			}
			for _, item := range []string{"BIOS", "BMC", "NIC"} {
				if !seen["/redfish/v1/UpdateService/FirmwareInventory/"+item] {
					t.Errorf("FirmwareInventory/%s not linked", item)
				}
				if w := f.do(req{path: "/redfish/v1/UpdateService/FirmwareInventory/" + item, bmc: v.UUID}); w.Code != http.StatusOK || decode(t, w)["Id"] != item {
					t.Errorf("FirmwareInventory/%s: %d %s", item, w.Code, w.Body)
				}
			}
		})
	}
}
