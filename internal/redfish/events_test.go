package redfish

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/accounts"
)

// listener is an event receiver on 127.0.0.1 that records what it gets.
type listener struct {
	*httptest.Server
	mu      sync.Mutex
	events  []map[string]any
	headers []http.Header
	got     chan struct{}
}

func newListener(t *testing.T) *listener {
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
		l.mu.Unlock()
		l.got <- struct{}{}
	}))
	t.Cleanup(l.Close)
	return l
}

// waitFor waits for an event record whose Message contains text.
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

func eventFixture(t *testing.T, opts ...Option) *fixture {
	f := newFixture(t, 2, opts...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.srv.RunEvents(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	// RunEvents subscribes before it reads the machines: give it the moment.
	time.Sleep(50 * time.Millisecond)
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
	f.subscribe(t, `{"Destination":"`+dead.URL+`"}`)
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

// BenchmarkEventFanOut: events queued per second to 16 subscribers whose
// listeners answer at once (delivery included: the benchmark waits until
// every subscriber got every event).
func BenchmarkEventFanOut(b *testing.B) {
	f := newFixture(b, 1)
	var got sync.WaitGroup
	ls := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body); got.Done() }))
	defer ls.Close()
	for range 16 {
		w := f.do(req{method: "POST", path: "/redfish/v1/EventService/Subscriptions", body: `{"Destination":"` + ls.URL + `"}`})
		if w.Code != 201 {
			b.Fatal(w.Code)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		got.Add(16)
		f.srv.events.publish("ResourceUpdated", "/redfish/v1/Systems/x", "bench")
		got.Wait()
	}
	b.ReportMetric(float64(16*b.N)/b.Elapsed().Seconds(), "deliveries/s")
	f.srv.events.stopAll()
}
