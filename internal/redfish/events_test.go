package redfish

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/accounts"
	"github.com/bmlab/bmlab/internal/netpolicy"
	"github.com/bmlab/bmlab/internal/testenv"
)

// listener is an event receiver on 127.0.0.1 that records what it gets.
type listener struct {
	*httptest.Server
	mu      sync.Mutex
	events  []map[string]any
	headers []http.Header
	paths   []string // the URL path each event was POSTed to
	got     chan struct{}
}

func newListener(t *testing.T) *listener { return newListenerAnswering(t, http.StatusOK) }

// newListenerAnswering is a listener that answers every delivery with
// status (a failure makes the service retry).
func newListenerAnswering(t *testing.T, status int) *listener {
	l := &listener{got: make(chan struct{}, 100)}
	l.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev map[string]any
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Errorf("event body is not JSON: %v\n%s", err, b)
		}
		l.mu.Lock()
		l.events = append(l.events, ev)
		l.headers = append(l.headers, r.Header.Clone())
		l.paths = append(l.paths, r.URL.Path)
		l.mu.Unlock()
		w.WriteHeader(status)
		// A wake-up for waitFor, which scans every event it wakes to: a
		// full buffer already holds one. Blocking here instead hung the
		// test's cleanup (Close waits for this handler) once a listener
		// got more than 100 events nobody waited for.
		select {
		case l.got <- struct{}{}:
		default:
		}
	}))
	t.Cleanup(l.Close)
	return l
}

// waitFor waits for an event record whose Message contains text (any
// record for "").
func (l *listener) waitFor(t *testing.T, text string, within time.Duration) map[string]any {
	t.Helper()
	deadline := time.After(within)
	for {
		l.mu.Lock()
		for _, ev := range l.events {
			for _, rec := range ev["Events"].([]any) {
				if m := rec.(map[string]any); strings.Contains(fmt.Sprint(m["Message"]), text) {
					l.mu.Unlock()
					return ev
				}
			}
		}
		l.mu.Unlock()
		select {
		case <-l.got:
		case <-deadline:
			t.Fatalf("no event with %q within %s; got %v", text, within, l.events)
			return nil
		}
	}
}

// eventFixture serves events with loopback destinations allowed (as vbmcd
// --events-allow-loopback does): the tests' listeners are on 127.0.0.1.
func eventFixture(t *testing.T, opts ...Option) *fixture {
	f := newFixture(t, 2, append([]Option{WithEventPolicy(netpolicy.Policy{AllowLoopback: true})}, opts...)...)
	ctx, cancel := context.WithCancel(context.Background())
	done := f.srv.WatchEvents(ctx) // subscribed when it returns
	t.Cleanup(func() { cancel(); <-done })
	return f
}

func (f *fixture) subscribe(t *testing.T, body string) string {
	t.Helper()
	w := f.do(req{method: "POST", path: "/redfish/v1/EventService/Subscriptions", body: body})
	if w.Code != http.StatusCreated {
		t.Fatalf("subscribe = %d %s", w.Code, w.Body)
	}
	return w.Header().Get("Location")
}

// TestEventsPowerBootMedia: a subscriber gets an event for a power change
// made through Redfish, with its Context and HttpHeaders, and the one-time
// boot override's use; a subscription filtered to Alert gets none of them.
func TestEventsPowerBootMedia(t *testing.T) {
	f := eventFixture(t)
	l, alerts := newListener(t), newListener(t)
	loc := f.subscribe(t, `{"Destination":"`+l.URL+`/events","Context":"metal3-host-0","Protocol":"Redfish","HttpHeaders":[{"X-Auth":"s3cret"}]}`)
	f.subscribe(t, `{"Destination":"`+alerts.URL+`","EventTypes":["Alert"]}`)
	sys := "/redfish/v1/Systems/" + f.ids[0]
	if w := f.do(req{method: "PATCH", path: sys, body: `{"Boot":{"BootSourceOverrideTarget":"Pxe","BootSourceOverrideEnabled":"Once"}}`}); w.Code/100 != 2 {
		t.Fatalf("PATCH boot = %d %s", w.Code, w.Body)
	}
	if w := f.do(req{method: "POST", path: sys + "/Actions/ComputerSystem.Reset", body: `{"ResetType":"On"}`}); w.Code/100 != 2 {
		t.Fatalf("reset = %d %s", w.Code, w.Body)
	}
	ev := l.waitFor(t, "changed from Off to On", 5*time.Second)
	rec := ev["Events"].([]any)[0].(map[string]any)
	if ev["Context"] != "metal3-host-0" || rec["MessageId"] != "ResourceEvent.1.0.ResourceChanged" || rec["EventType"] != "ResourceUpdated" ||
		rec["OriginOfCondition"].(map[string]any)["@odata.id"] != sys {
		t.Errorf("event %v", ev)
	}
	l.waitFor(t, "one-time boot override of system "+f.ids[0]+" (Pxe) was used", 5*time.Second)
	l.mu.Lock()
	if l.headers[0].Get("X-Auth") != "s3cret" {
		t.Errorf("HttpHeaders not sent: %v", l.headers[0])
	}
	l.mu.Unlock()
	// The subscription shows its counts but never its headers.
	w := f.do(req{method: "GET", path: loc})
	if strings.Contains(w.Body.String(), "s3cret") || !strings.Contains(w.Body.String(), `"Delivered":`) {
		t.Errorf("GET subscription: %s", w.Body)
	}
	time.Sleep(200 * time.Millisecond)
	alerts.mu.Lock()
	if len(alerts.events) != 0 {
		t.Errorf("an Alert-only subscription got %v", alerts.events)
	}
	alerts.mu.Unlock()
	// Deleted: no more events.
	if w := f.do(req{method: "DELETE", path: loc}); w.Code != 200 {
		t.Fatalf("DELETE = %d", w.Code)
	}
	if w := f.do(req{method: "GET", path: loc}); w.Code != 404 {
		t.Errorf("GET after DELETE = %d", w.Code)
	}
}

// TestEventsDeadListenerBlocksNothing: a listener that never answers has
// its own queue and retries; another subscriber gets its events at once,
// and the daemon's requests are not slowed.
func TestEventsDeadListenerBlocksNothing(t *testing.T) {
	f := eventFixture(t, WithEventRetry(2, 50*time.Millisecond))
	hang := make(chan struct{})
	dead := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hang }))
	t.Cleanup(func() { close(hang); dead.Close() })
	f.srv.events.client.Timeout = 2 * time.Second
	live := newListener(t)
	f.subscribe(t, `{"Destination":"`+dead.URL+`","DeliveryRetryPolicy":"RetryForever"}`)
	f.subscribe(t, `{"Destination":"`+live.URL+`"}`)
	for i := range 200 { // far more than the dead one's queue holds
		w := f.do(req{method: "POST", path: "/redfish/v1/EventService/Actions/EventService.SubmitTestEvent",
			body: fmt.Sprintf(`{"EventType":"Alert","Message":"test %d"}`, i)})
		if w.Code != http.StatusNoContent {
			t.Fatalf("SubmitTestEvent = %d %s", w.Code, w.Body)
		}
	}
	start := time.Now()
	live.waitFor(t, "test 0", 2*time.Second)
	t.Logf("the live listener got its first event %s after 200 were submitted", time.Since(start))
	f.srv.events.mu.Lock()
	var deadSub *subscription
	for _, s := range f.srv.events.subs {
		if s.Destination == dead.URL {
			deadSub = s
		}
	}
	f.srv.events.mu.Unlock()
	if deadSub == nil || deadSub.dropped.Load() == 0 {
		t.Errorf("the dead listener's queue did not bound it (dropped %d)", deadSub.dropped.Load())
	}
}

func TestEventServiceBadInput(t *testing.T) {
	opt, st := withStore(t)
	f := eventFixture(t, opt)
	if _, err := st.Create(accounts.New{UserName: "op", Password: "op-password", Role: accounts.Operator, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	path := "/redfish/v1/EventService/Subscriptions"
	for _, tt := range []struct {
		body   string
		status int
		msg    string
	}{
		{`{}`, 400, "PropertyMissing"},
		{`{"Destination":"ftp://x/y"}`, 400, "PropertyValueFormatError"},
		{`{"Destination":"http://127.0.0.1:1/","Protocol":"SNMPv2c"}`, 400, "PropertyValueNotInList"},
		{`{"Destination":"http://127.0.0.1:1/","EventTypes":["Fire"]}`, 400, "PropertyValueNotInList"},
		{`{"Destination":"http://127.0.0.1:1/","EventTypes":"Alert"}`, 400, "PropertyValueTypeError"},
		{`{"Destination":"http://127.0.0.1:1/","HttpHeaders":[{"X":1}]}`, 400, "PropertyValueFormatError"},
		{`{"Destination":"http://127.0.0.1:1/","Color":"red"}`, 400, "PropertyUnknown"},
		{`[1]`, 400, "UnrecognizedRequestBody"},
	} {
		w := f.do(req{method: "POST", path: path, body: tt.body})
		if w.Code != tt.status || !strings.Contains(strings.Join(messageIDs(t, w), " "), tt.msg) {
			t.Errorf("POST %s = %d %v, want %d %s", tt.body, w.Code, messageIDs(t, w), tt.status, tt.msg)
		}
	}
	if w := f.do(req{method: "POST", path: path, body: `{"Destination":"http://127.0.0.1:1/"}`, user: "op", pass: "op-password"}); w.Code != 403 {
		t.Errorf("an Operator subscribed: %d", w.Code)
	}
	if w := f.do(req{method: "GET", path: "/redfish/v1/EventService", user: "op", pass: "op-password"}); w.Code != 200 {
		t.Errorf("an Operator cannot read the EventService: %d", w.Code)
	}
	if w := f.do(req{method: "POST", path: "/redfish/v1/EventService/Actions/EventService.SubmitTestEvent", body: `{"EventType":"Boom"}`}); w.Code != 400 {
		t.Errorf("SubmitTestEvent with a bad type = %d", w.Code)
	}
	if w := f.do(req{method: "DELETE", path: path + "/99"}); w.Code != 404 {
		t.Errorf("DELETE of no subscription = %d", w.Code)
	}
}

// BenchmarkEventFanOut: a power-change event published to 100
// subscribers whose listeners (on 127.0.0.1) answer at once; deliveries/s
// and the p99 of the time from publishing to a listener having the event.
func BenchmarkEventFanOut(b *testing.B) {
	const subscribers = 100
	f := newFixture(b, 1, WithEventPolicy(netpolicy.Policy{AllowLoopback: true}))
	var (
		got  sync.WaitGroup
		mu   sync.Mutex
		lat  []time.Duration
		sent time.Time
	)
	ls := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		lat = append(lat, time.Since(sent))
		mu.Unlock()
		got.Done()
	}))
	defer ls.Close()
	f.srv.events.client.Transport.(*http.Transport).MaxIdleConnsPerHost = subscribers
	for range subscribers {
		w := f.do(req{method: "POST", path: "/redfish/v1/EventService/Subscriptions", body: `{"Destination":"` + ls.URL + `"}`})
		if w.Code != 201 {
			b.Fatal(w.Code)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		got.Add(subscribers)
		mu.Lock()
		sent = time.Now()
		mu.Unlock()
		f.srv.events.publish(f.ids[0], "ResourceUpdated", "/redfish/v1/Systems/"+f.ids[0], "The power state changed from Off to On.")
		got.Wait()
	}
	b.StopTimer()
	b.ReportMetric(float64(subscribers*b.N)/b.Elapsed().Seconds(), "deliveries/s")
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	f.srv.events.stopAll()
}

// TestEventRetryPolicies: a listener that fails every retry ends a
// TerminateAfterRetries subscription and not a RetryForever one, which
// counts the failure and goes on.
func TestEventRetryPolicies(t *testing.T) {
	f := eventFixture(t, WithEventRetry(2, 10*time.Millisecond))
	broken := newListenerAnswering(t, http.StatusInternalServerError)
	term := f.subscribe(t, `{"Destination":"`+broken.URL+`","DeliveryRetryPolicy":"TerminateAfterRetries"}`)
	forever := f.subscribe(t, `{"Destination":"`+broken.URL+`","DeliveryRetryPolicy":"RetryForever"}`)
	if v := decode(t, f.do(req{path: term})); v["DeliveryRetryPolicy"] != "TerminateAfterRetries" {
		t.Errorf("policy: %v", v["DeliveryRetryPolicy"])
	}
	f.do(req{method: "POST", path: "/redfish/v1/EventService/Actions/EventService.SubmitTestEvent", body: `{}`})
	if !testenv.WaitFor(5*time.Second, func() bool { return f.do(req{path: term}).Code == http.StatusNotFound }) {
		t.Fatal("the TerminateAfterRetries subscription outlived its retries")
	}
	// The two subscriptions' senders retry on the same schedule but each on
	// its own: the other may count its failure a moment later.
	var failed any
	if !testenv.WaitFor(5*time.Second, func() bool {
		v := decode(t, f.do(req{path: forever}))
		failed = v["Oem"].(map[string]any)["Bmlab"].(map[string]any)["Failed"]
		return failed == 1.0
	}) {
		t.Errorf("RetryForever subscription: failed %v, want 1 (and still there)", failed)
	}
	// PATCH of the writable properties; the others are refused.
	if w := f.do(req{method: "PATCH", path: forever, body: `{"Context":"new","DeliveryRetryPolicy":"TerminateAfterRetries"}`}); w.Code != 200 {
		t.Fatalf("PATCH subscription: %d %s", w.Code, w.Body)
	}
	if v := decode(t, f.do(req{path: forever})); v["Context"] != "new" || v["DeliveryRetryPolicy"] != "TerminateAfterRetries" {
		t.Errorf("after PATCH: %v", v)
	}
	for body, id := range map[string]string{
		`{"Destination":"http://127.0.0.1:2/"}`: "PropertyNotWritable",
		`{"DeliveryRetryPolicy":"Sometimes"}`:   "PropertyValueNotInList",
	} {
		if w := f.do(req{method: "PATCH", path: forever, body: body}); w.Code != 400 || !slices.Contains(messageIDs(t, w), id) {
			t.Errorf("PATCH %s: %d %v, want 400 %s", body, w.Code, messageIDs(t, w), id)
		}
	}
}

// TestEventServicePatch: the retry settings are writable within bounds.
func TestEventServicePatch(t *testing.T) {
	f := eventFixture(t)
	if w := f.do(req{method: "PATCH", path: "/redfish/v1/EventService", body: `{"DeliveryRetryAttempts":5,"DeliveryRetryIntervalSeconds":30}`}); w.Code != 200 {
		t.Fatalf("PATCH: %d %s", w.Code, w.Body)
	}
	v := decode(t, f.do(req{path: "/redfish/v1/EventService"}))
	if v["DeliveryRetryAttempts"] != 5.0 || v["DeliveryRetryIntervalSeconds"] != 30.0 {
		t.Errorf("after PATCH: %v", v)
	}
	for body, id := range map[string]string{
		`{"DeliveryRetryAttempts":0}`:          "PropertyValueOutOfRange",
		`{"DeliveryRetryIntervalSeconds":1e6}`: "PropertyValueOutOfRange",
		`{"DeliveryRetryAttempts":"3"}`:        "PropertyValueTypeError",
		`{"ServiceEnabled":false}`:             "PropertyNotWritable",
	} {
		if w := f.do(req{method: "PATCH", path: "/redfish/v1/EventService", body: body}); w.Code != 400 || !slices.Contains(messageIDs(t, w), id) {
			t.Errorf("PATCH %s: %d %v, want 400 %s", body, w.Code, messageIDs(t, w), id)
		}
	}
}

// TestEventsPerSystemAccount: an account bound to one system subscribes to
// that system's events only, and sees only its own subscriptions; the
// administrator's subscription gets every system's events.
func TestEventsPerSystemAccount(t *testing.T) {
	opt, st := withStore(t)
	f := eventFixture(t, opt)
	if _, err := st.Create(accounts.New{UserName: "tenant", Password: "tenant-pass", Role: accounts.Administrator, Enabled: true, System: f.ids[0]}); err != nil {
		t.Fatal(err)
	}
	mine, all := newListener(t), newListener(t)
	w := f.do(req{method: "POST", path: "/redfish/v1/EventService/Subscriptions", user: "tenant", pass: "tenant-pass", body: `{"Destination":"` + mine.URL + `"}`})
	if w.Code != 201 {
		t.Fatalf("tenant subscribes: %d %s", w.Code, w.Body)
	}
	adminSub := f.subscribe(t, `{"Destination":"`+all.URL+`"}`)
	for _, id := range []string{f.ids[1], f.ids[0]} {
		if w := f.do(req{method: "POST", path: "/redfish/v1/Systems/" + id + "/Actions/ComputerSystem.Reset", body: `{"ResetType":"On"}`}); w.Code/100 != 2 {
			t.Fatalf("reset %s: %d", id, w.Code)
		}
		all.waitFor(t, "system "+id+" changed from Off to On", 5*time.Second)
	}
	mine.waitFor(t, "system "+f.ids[0]+" changed from Off to On", 5*time.Second)
	mine.mu.Lock()
	for _, ev := range mine.events {
		if strings.Contains(fmt.Sprint(ev), f.ids[1]) {
			t.Errorf("the tenant got another system's event: %v", ev)
		}
	}
	mine.mu.Unlock()
	if w := f.do(req{path: adminSub, user: "tenant", pass: "tenant-pass"}); w.Code != 404 {
		t.Errorf("the tenant reads the administrator's subscription: %d", w.Code)
	}
	if v := decode(t, f.do(req{path: "/redfish/v1/EventService/Subscriptions", user: "tenant", pass: "tenant-pass"})); v["Members@odata.count"] != 1.0 {
		t.Errorf("the tenant lists %v subscriptions, want its 1", v["Members@odata.count"])
	}
}

// TestEventSubscriptionsSurviveRestart: subscriptions and retry settings
// are kept (0600) and a new server delivers to them, headers included.
func TestEventSubscriptionsSurviveRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "subscriptions.json")
	l := newListener(t)
	f := eventFixture(t, WithEventStore(path))
	loc := f.subscribe(t, `{"Destination":"`+l.URL+`","Context":"ctx-1","HttpHeaders":{"X-Token":"t0k"},"DeliveryRetryPolicy":"RetryForever"}`)
	if w := f.do(req{method: "PATCH", path: "/redfish/v1/EventService", body: `{"DeliveryRetryAttempts":4}`}); w.Code != 200 {
		t.Fatalf("PATCH: %d", w.Code)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("subscriptions file: %v %v, want mode 0600", fi, err)
	}

	g := eventFixture(t, WithEventStore(path))
	v := decode(t, g.do(req{path: loc}))
	if v["Context"] != "ctx-1" || v["DeliveryRetryPolicy"] != "RetryForever" || v["Destination"] != l.URL {
		t.Fatalf("after restart: %v", v)
	}
	if v := decode(t, g.do(req{path: "/redfish/v1/EventService"})); v["DeliveryRetryAttempts"] != 4.0 {
		t.Errorf("retry attempts after restart: %v", v["DeliveryRetryAttempts"])
	}
	g.do(req{method: "POST", path: "/redfish/v1/EventService/Actions/EventService.SubmitTestEvent", body: `{"Message":"after restart"}`})
	l.waitFor(t, "after restart", 5*time.Second)
	l.mu.Lock()
	if h := l.headers[len(l.headers)-1].Get("X-Token"); h != "t0k" {
		t.Errorf("HttpHeaders after restart: %q", h)
	}
	l.mu.Unlock()
	// A new subscription does not reuse a kept ID.
	if loc2 := g.subscribe(t, `{"Destination":"`+l.URL+`"}`); loc2 == loc {
		t.Errorf("new subscription reuses %s", loc)
	}
	// A file that is not JSON leaves the service up with none.
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := eventFixture(t, WithEventStore(path))
	if v := decode(t, h.do(req{path: "/redfish/v1/EventService/Subscriptions"})); v["Members@odata.count"] != 0.0 {
		t.Errorf("with a broken file: %v", v)
	}
}
