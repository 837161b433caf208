package redfish

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/media"
	"github.com/bmlab/bmlab/internal/sim"
	"github.com/bmlab/bmlab/internal/testenv"
)

// isoBytes is a minimal image that passes the ISO check.
func isoBytes(n int) []byte {
	b := make([]byte, n)
	copy(b[32769:], "CD001")
	return b
}

// mediaFixture is a fixture whose service has an image cache, and an image
// server on loopback: /small.iso at once, /slow.iso held until release is
// closed.
type mediaFixture struct {
	*fixture
	images  *httptest.Server
	release chan struct{}
	once    sync.Once
}

func newMediaFixture(t *testing.T, opts ...Option) *mediaFixture {
	t.Helper()
	return newMediaFixtureN(t, 2, opts...)
}

// newMediaFixtureN is newMediaFixture with n machines.
func newMediaFixtureN(t *testing.T, n int, opts ...Option) *mediaFixture {
	t.Helper()
	cache, err := media.New(media.Config{Dir: t.TempDir(), Policy: media.Policy{AllowLoopback: true}}) // the image server is on loopback
	if err != nil {
		t.Fatal(err)
	}
	be := sim.New(n)
	svc := machine.NewService(be, nil, machine.WithImageFetcher(cache), machine.WithMediaWait(5*time.Second))
	opts = append([]Option{WithCredentials(testUser, testPass), WithServiceUUID(testService), WithInsertWait(200 * time.Millisecond)}, opts...)
	srv := New(svc, nil, opts...)
	f := &mediaFixture{fixture: &fixture{t: t, be: be, svc: svc, srv: srv, h: srv.Handler()}, release: make(chan struct{})}
	for _, m := range be.List() {
		f.ids = append(f.ids, m.ID)
	}
	small := isoBytes(64 << 10)
	f.images = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/small.iso":
			http.ServeContent(w, r, "small.iso", time.Now().Add(-time.Hour), bytes.NewReader(small))
		case "/slow.iso":
			w.Header().Set("Content-Length", "131072")
			w.Write(small[:32<<10])
			w.(http.Flusher).Flush()
			select {
			case <-f.release:
			case <-r.Context().Done():
				return
			}
			w.Write(isoBytes(128 << 10)[32<<10:])
		case "/not.iso":
			w.Write(make([]byte, 64<<10))
		case "/stick.img": // a disk image: a boot sector signature
			disk := make([]byte, 64<<10)
			disk[510], disk[511] = 0x55, 0xaa
			w.Write(disk)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(func() { f.finish(); f.images.Close() })
	return f
}

func (f *mediaFixture) finish() { f.once.Do(func() { close(f.release) }) }

func (f *mediaFixture) cd(i int) string { return managerURI(f.ids[i]) + "/VirtualMedia/Cd" }

func (f *mediaFixture) post(path, body string) *httptest.ResponseRecorder {
	return f.do(req{method: http.MethodPost, path: path, body: body})
}

func (f *mediaFixture) insert(i int, image string) *httptest.ResponseRecorder {
	return f.post(f.cd(i)+"/Actions/VirtualMedia.InsertMedia", `{"Image":"`+image+`"}`)
}

func wantCode(t *testing.T, w *httptest.ResponseRecorder, code int, what string) {
	t.Helper()
	if w.Code != code {
		t.Fatalf("%s: %d, want %d: %s", what, w.Code, code, w.Body.String())
	}
}

func TestVirtualMediaInsertEject(t *testing.T) {
	f := newMediaFixture(t)
	img := f.images.URL + "/small.iso"

	// Eject of empty media succeeds, with no body or with {}.
	wantCode(t, f.do(req{method: http.MethodPost, path: f.cd(0) + "/Actions/VirtualMedia.EjectMedia"}), http.StatusNoContent, "eject empty")
	wantCode(t, f.post(f.cd(0)+"/Actions/VirtualMedia.EjectMedia", "{}"), http.StatusNoContent, "eject empty {}")

	wantCode(t, f.insert(0, img), http.StatusNoContent, "insert a small image")
	for _, p := range []string{f.cd(0), systemURI(f.ids[0]) + "/VirtualMedia/Cd"} {
		v := decode(t, f.do(req{path: p}))
		if v["Inserted"] != true || v["Image"] != img || v["ImageName"] != "small.iso" || v["ConnectedVia"] != "URI" || v["TransferProtocolType"] != "HTTP" {
			t.Fatalf("%s after insert: %v", p, v)
		}
	}
	m, _ := f.svc.Get(f.ids[0])
	if d := machine.MediaOf(m, machine.SlotCD); d.Drive == nil || d.Drive.Source == "" {
		t.Fatalf("the CD drive holds nothing: %+v", d)
	}

	// Inserting again is a conflict, as on real BMCs.
	w := f.insert(0, img)
	wantCode(t, w, http.StatusConflict, "second insert")
	if ids := messageIDs(t, w); len(ids) != 1 || ids[0] != string(MsgResourceInUse) {
		t.Fatalf("second insert messages %v", ids)
	}

	// PATCH ejects for older clients.
	wantCode(t, f.do(req{method: http.MethodPatch, path: f.cd(0), body: `{"Image":null,"Inserted":false}`}), http.StatusOK, "PATCH eject")
	if v := decode(t, f.do(req{path: f.cd(0)})); v["Inserted"] != false || v["Image"] != nil {
		t.Fatalf("after PATCH eject: %v", v)
	}
	// ... and inserts.
	wantCode(t, f.do(req{method: http.MethodPatch, path: f.cd(0), body: `{"Image":"` + img + `","Inserted":true,"WriteProtected":true}`}), http.StatusNoContent, "PATCH insert")
	wantCode(t, f.post(f.cd(0)+"/Actions/VirtualMedia.EjectMedia", ""), http.StatusNoContent, "eject")
	m, _ = f.svc.Get(f.ids[0])
	if d := machine.MediaOf(m, machine.SlotCD); d.Inserted || d.Drive == nil {
		t.Fatalf("after eject the drive must stay, empty: %+v", d)
	}

	// The removable member is a USB stick that comes and goes.
	usb := managerURI(f.ids[0]) + "/VirtualMedia/Removable"
	wantCode(t, f.post(usb+"/Actions/VirtualMedia.InsertMedia", `{"Image":"`+f.images.URL+`/not.iso"}`), http.StatusBadRequest, "insert a removable image that is no disk image")
	wantCode(t, f.post(usb+"/Actions/VirtualMedia.InsertMedia", `{"Image":"`+f.images.URL+`/stick.img"}`), http.StatusNoContent, "insert removable")
	m, _ = f.svc.Get(f.ids[0])
	if d := machine.MediaOf(m, machine.SlotRemovable); !d.Inserted || d.Drive.Bus != "usb" {
		t.Fatalf("removable: %+v", d)
	}
	wantCode(t, f.post(usb+"/Actions/VirtualMedia.EjectMedia", ""), http.StatusNoContent, "eject removable")
	if len(f.be.List()[0].Disks) != 2 {
		t.Fatalf("the USB stick stayed after eject")
	}
}

func TestVirtualMediaErrorsSayWhich(t *testing.T) {
	f := newMediaFixture(t)
	for _, tc := range []struct {
		body string
		code int
		id   MessageID
	}{
		{`{"Image":"` + f.images.URL + `/missing.iso"}`, http.StatusBadRequest, MsgResourceMissingAtURI},
		{`{"Image":"` + f.images.URL + `/not.iso"}`, http.StatusBadRequest, MsgActionParameterValueFormatError},
		{`{"Image":"http://127.0.0.1:1/x.iso"}`, http.StatusBadRequest, MsgCouldNotEstablishConnection},
		{`{}`, http.StatusBadRequest, MsgActionParameterMissing},
		{`{"Image":"x","Bogus":1}`, http.StatusBadRequest, MsgActionParameterUnknown},
		{`{"Image":"` + f.images.URL + `/small.iso","TransferProtocolType":"HTTPS"}`, http.StatusBadRequest, MsgGeneralError},
		{`{"Image":"` + f.images.URL + `/small.iso","TransferMethod":"Carrier"}`, http.StatusBadRequest, MsgActionParameterValueNotInList},
	} {
		w := f.post(f.cd(0)+"/Actions/VirtualMedia.InsertMedia", tc.body)
		if w.Code != tc.code {
			t.Errorf("%s: %d, want %d: %s", tc.body, w.Code, tc.code, w.Body.String())
			continue
		}
		if ids := messageIDs(t, w); len(ids) == 0 || ids[0] != string(tc.id) {
			t.Errorf("%s: messages %v, want %s", tc.body, ids, tc.id)
		}
		if v := decode(t, f.do(req{path: f.cd(0)})); v["Inserted"] != false {
			t.Fatalf("%s left media half-attached: %v", tc.body, v)
		}
	}
}

// TestSlowInsertIsATaskAndPowerOnWaits: a download longer than the insert
// wait answers 202 with a task monitor; power-on waits until the image is
// attached, so the machine never boots without it.
func TestSlowInsertIsATaskAndPowerOnWaits(t *testing.T) {
	f := newMediaFixture(t)
	start := time.Now()
	w := f.insert(0, f.images.URL+"/slow.iso")
	wantCode(t, w, http.StatusAccepted, "slow insert")
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("insert blocked %s", took)
	}
	mon := w.Header().Get("Location")
	tv := decode(t, w)
	if !strings.HasPrefix(mon, monitorsURI+"/") || tv["TaskState"] != "Running" {
		t.Fatalf("202 without a running task: Location %q body %v", mon, tv)
	}
	taskURI := tasksURI + "/" + tv["Id"].(string)
	wantCode(t, f.do(req{path: mon}), http.StatusAccepted, "monitor while loading")
	if v := decode(t, f.do(req{path: taskURI})); v["PercentComplete"].(float64) < 20 {
		t.Fatalf("task progress %v, want about 25%%", v["PercentComplete"])
	}
	if v := decode(t, f.do(req{path: f.cd(0)})); v["Inserted"] != true || v["Status"].(map[string]any)["State"] != "Starting" {
		t.Fatalf("loading member: %v", v)
	}
	if got := members(t, f.fixture, req{path: tasksURI}); len(got) != 1 || got[0] != taskURI {
		t.Fatalf("tasks %v", got)
	}

	// The power-on is answered at once; the machine reads PoweringOn and
	// boots only once the media is ready.
	start = time.Now()
	wantCode(t, f.post(resetURI(f.ids[0]), `{"ResetType":"On"}`), http.StatusNoContent, "power on")
	if took := time.Since(start); took > 250*time.Millisecond {
		t.Errorf("power-on answered after %v, want at once", took)
	}
	time.Sleep(300 * time.Millisecond) // the media is still loading: nothing may start
	if got := decode(t, f.do(req{path: f.sys(0)}))["PowerState"]; got != "PoweringOn" {
		t.Fatalf("while the media loads, PowerState %v, want PoweringOn", got)
	}
	f.finish()
	if !testenv.WaitFor(5*time.Second, func() bool {
		m, _ := f.svc.Get(f.ids[0])
		return m.Power == machine.PowerOn
	}) {
		t.Fatalf("the machine did not start once the media was ready")
	}
	m, _ := f.svc.Get(f.ids[0])
	if md := machine.MediaOf(m, machine.SlotCD); !md.Inserted {
		t.Fatalf("after power-on: media %+v", md)
	}
	wantCode(t, f.do(req{path: mon}), http.StatusNoContent, "monitor when done")
	if v := decode(t, f.do(req{path: taskURI})); v["TaskState"] != "Completed" || v["PercentComplete"].(float64) != 100 {
		t.Fatalf("task %v", v)
	}
}

func TestPowerOnWaitIsBounded(t *testing.T) {
	f := newMediaFixture(t)
	f.svc = machine.NewService(f.be, nil, machine.WithImageFetcher(mustCache(t)), machine.WithMediaWait(300*time.Millisecond))
	f.srv = New(f.svc, nil, WithCredentials(testUser, testPass), WithInsertWait(0))
	f.h = f.srv.Handler()
	wantCode(t, f.insert(0, f.images.URL+"/slow.iso"), http.StatusAccepted, "slow insert")
	// Accepted at once; when the media is still loading after the bound,
	// the start fails, and the system says so until an action succeeds.
	wantCode(t, f.post(resetURI(f.ids[0]), `{"ResetType":"On"}`), http.StatusNoContent, "power-on while loading")
	var st map[string]any
	if !testenv.WaitFor(5*time.Second, func() bool {
		v := decode(t, f.do(req{path: f.sys(0)}))
		st = v["Status"].(map[string]any)
		return v["PowerState"] == "Off" && st["Health"] == "Critical"
	}) {
		t.Fatalf("after the media wait's bound: Status %v, want Off and Critical", st)
	}
	if c, _ := json.Marshal(st["Conditions"]); !strings.Contains(string(c), "still loading") {
		t.Fatalf("the fault does not say why: %s", c)
	}
	// Eject cancels the insert; power-on then proceeds with an empty drive.
	wantCode(t, f.post(f.cd(0)+"/Actions/VirtualMedia.EjectMedia", ""), http.StatusNoContent, "eject while loading")
	wantCode(t, f.post(resetURI(f.ids[0]), `{"ResetType":"On"}`), http.StatusNoContent, "power-on after eject")
	if v := decode(t, f.do(req{path: f.sys(0)})); v["PowerState"] != "On" || v["Status"].(map[string]any)["Health"] != "OK" {
		t.Fatalf("after a power-on that worked: %v %v, want On and OK", v["PowerState"], v["Status"])
	}
	if ts := f.svc.Tasks(); len(ts) != 1 || ts[0].Status().State != machine.TaskCancelled {
		t.Fatalf("the ejected insert's task is not cancelled")
	}
}

func mustCache(t *testing.T) *media.Cache {
	c, err := media.New(media.Config{Dir: t.TempDir(), Policy: media.Policy{AllowLoopback: true}}) // the image server is on loopback
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestVirtualMediaCertificates(t *testing.T) {
	f := newMediaFixture(t)
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(isoBytes(64 << 10)) }))
	defer tlsSrv.Close()
	wantCode(t, f.do(req{method: http.MethodPatch, path: f.cd(0), body: `{"VerifyCertificate":true}`}), http.StatusOK, "VerifyCertificate")
	w := f.insert(0, tlsSrv.URL+"/a.iso")
	wantCode(t, w, http.StatusBadRequest, "untrusted https")
	if !strings.Contains(w.Body.String(), "TLS") {
		t.Fatalf("the TLS error does not say TLS: %s", w.Body.String())
	}
	cert := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw}))
	body := `{"CertificateString":` + jsonString(cert) + `,"CertificateType":"PEM"}`
	w = f.post(f.cd(0)+"/Certificates", body)
	wantCode(t, w, http.StatusCreated, "add certificate")
	loc := w.Header().Get("Location")
	if got := members(t, f.fixture, req{path: f.cd(0) + "/Certificates"}); len(got) != 1 || got[0] != loc {
		t.Fatalf("certificates %v, Location %s", got, loc)
	}
	wantCode(t, f.insert(0, tlsSrv.URL+"/a.iso"), http.StatusNoContent, "trusted https")
	wantCode(t, f.do(req{method: http.MethodDelete, path: loc}), http.StatusNoContent, "delete certificate")
}

func jsonString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

// TestSushyVirtualMedia runs Ironic's flow through python3-sushy.
func TestSushyVirtualMedia(t *testing.T) {
	testenv.Integration(t)
	py := testenv.Python(t, "sushy")
	f := newMediaFixture(t)
	img := f.images.URL + "/small.iso"
	runToDone(t, "sushy", exec.Command(py, "testdata/sushy_vmedia.py", f.listen(t), testUser, testPass, f.ids[0], img))
	m, _ := f.svc.Get(f.ids[0])
	if m.Power != machine.PowerOn || !machine.MediaOf(m, machine.SlotCD).Inserted {
		t.Fatalf("after sushy: power %s media %+v", m.Power, machine.MediaOf(m, machine.SlotCD))
	}
}

// pausingBackend stops after each step of a media attach (the drive's new
// source, the record of where it came from) until the test lets it go on.
type pausingBackend struct {
	*sim.Backend
	armed  atomic.Bool
	paused chan string
	resume chan struct{}
}

func (p *pausingBackend) SetMedia(ctx context.Context, id string, slot machine.MediaSlot, src string) error {
	err := p.Backend.SetMedia(ctx, id, slot, src)
	if src != "" && p.armed.Load() {
		p.paused <- "drive"
		<-p.resume
	}
	return err
}

func (p *pausingBackend) Save(ctx context.Context, id string, s machine.Settings) error {
	err := p.Backend.Save(ctx, id, s)
	if p.armed.Load() && slices.ContainsFunc(s.Media, func(ms machine.MediaSettings) bool { return ms.Path != "" }) {
		p.paused <- "record"
		<-p.resume
	}
	return err
}

// TestInsertedImageIsTheURLThroughout: between the steps of an attach, and
// after it, the member shows the URL the client inserted, never the cache's
// file (seen 5 times in 6 cold inserts of a big image: the drive had its
// new source before the record of where it came from).
func TestInsertedImageIsTheURLThroughout(t *testing.T) {
	f := newMediaFixture(t)
	be := &pausingBackend{Backend: f.be, paused: make(chan string), resume: make(chan struct{})}
	f.svc = machine.NewService(be, nil, machine.WithImageFetcher(mustCache(t)), machine.WithMediaWait(5*time.Second))
	f.srv = New(f.svc, nil, WithCredentials(testUser, testPass), WithInsertWait(0))
	f.h = f.srv.Handler()
	be.armed.Store(true)
	url := f.images.URL + "/small.iso"
	wantCode(t, f.insert(0, url), http.StatusAccepted, "insert")
	for range 2 {
		step := <-be.paused
		if v := decode(t, f.do(req{path: f.cd(0)})); v["Image"] != url || v["Inserted"] != true {
			t.Errorf("after the attach's %s step: Image %v, Inserted %v; want %s, true", step, v["Image"], v["Inserted"], url)
		}
		be.resume <- struct{}{}
	}
	be.armed.Store(false)
	if v := decode(t, f.do(req{path: f.cd(0)})); v["Image"] != url || v["Inserted"] != true {
		t.Errorf("after the attach: Image %v, Inserted %v; want %s, true", v["Image"], v["Inserted"], url)
	}
}

// TestFailedInsertIsTheMembersCondition: after an insert whose image the
// BMC could not fetch, the member's Status says so until the next insert
// or eject: Health Warning and a Condition (Resource.v1_11_0) with the
// insert's message, worded as its answer was.
func TestFailedInsertIsTheMembersCondition(t *testing.T) {
	f := newMediaFixture(t)
	wantCode(t, f.insert(0, "http://127.0.0.1:1/x.iso"), http.StatusBadRequest, "insert of an image nothing serves")
	v := decode(t, f.do(req{path: f.cd(0)}))
	st, _ := v["Status"].(map[string]any)
	conds, _ := st["Conditions"].([]any)
	if st["Health"] != "Warning" || len(conds) != 1 {
		t.Fatalf("Status after a failed insert: %v", st)
	}
	c := conds[0].(map[string]any)
	if id, _ := c["MessageId"].(string); !strings.HasSuffix(id, string(MsgCouldNotEstablishConnection)) ||
		!strings.Contains(c["Message"].(string), "cannot connect to the image server") || c["Severity"] != "Warning" || c["Timestamp"] == "" {
		t.Errorf("the condition: %v", c)
	}
	wantCode(t, f.insert(0, f.images.URL+"/small.iso"), http.StatusNoContent, "insert")
	if st := decode(t, f.do(req{path: f.cd(0)}))["Status"].(map[string]any); st["Conditions"] != nil || st["Health"] != "OK" {
		t.Errorf("Status after a good insert: %v", st)
	}
}
