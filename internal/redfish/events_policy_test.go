package redfish

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/bmlab/bmlab/internal/netpolicy"
	"github.com/bmlab/bmlab/internal/testenv"
)

// policyFixture serves events under the default outbound policy, the one
// vbmcd has without --events-allow-loopback: loopback refused.
func policyFixture(t *testing.T, opts ...Option) *fixture {
	f := newFixture(t, 1, opts...)
	ctx, cancel := context.WithCancel(context.Background())
	done := f.srv.WatchEvents(ctx)
	t.Cleanup(func() { cancel(); <-done })
	return f
}

// counter is a listener on 127.0.0.1 that counts the requests it gets.
func counter(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	ls := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { n.Add(1) }))
	t.Cleanup(ls.Close)
	return ls, &n
}

func (f *fixture) waitState(t *testing.T, loc, state string) map[string]any {
	t.Helper()
	var v map[string]any
	if !testenv.WaitFor(10*time.Second, func() bool {
		w := f.do(req{path: loc})
		if w.Code != http.StatusOK {
			t.Fatalf("GET %s = %d: the subscription is gone", loc, w.Code)
		}
		v = decode(t, w)
		st, _ := v["Status"].(map[string]any)
		return st["State"] == state
	}) {
		t.Fatalf("%s: Status %v, want State %s", loc, v["Status"], state)
	}
	return v
}

// TestEventDestinationPolicy: under the default policy a Destination on
// loopback, the unspecified address or link-local is a 400 naming the rule
// and the flag; a name that resolves to loopback (localhost) is accepted
// but refused on every delivery, at dial time, so the listener gets
// nothing; the subscription is then kept, suspended (Status.State
// Disabled), not dropped, and resumes on EventDestination.ResumeSubscription.
// Issue 25: such subscriptions received events, and one to a closed port
// vanished after about 15 s, which scanned the BMC host's ports.
func TestEventDestinationPolicy(t *testing.T) {
	f := policyFixture(t, WithEventRetry(2, 10*time.Millisecond))
	ls, got := counter(t)
	_, port, _ := net.SplitHostPort(ls.Listener.Addr().String())
	path := "/redfish/v1/EventService/Subscriptions"
	for dest, why := range map[string]string{
		"http://127.0.0.1:" + port + "/":    "--events-allow-loopback",
		"http://[::1]:" + port + "/":        "--events-allow-loopback",
		"http://0.0.0.0:" + port + "/":      "unspecified",
		"http://169.254.169.254/latest/":    "link-local",
		"http://[::ffff:127.0.0.1]:" + port: "--events-allow-loopback",
	} {
		w := f.do(req{method: "POST", path: path, body: `{"Destination":"` + dest + `"}`})
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), why) || !strings.Contains(w.Body.String(), "policy") {
			t.Errorf("POST Destination %s = %d %s, want 400 naming %q", dest, w.Code, w.Body, why)
		}
	}
	// Names, and the spellings of 127.0.0.1 a resolver may take for one
	// (inet_aton's short and decimal forms, a trailing dot): accepted, and
	// refused on the address they resolve to, if they resolve at all.
	var others []string
	for _, host := range []string{"localhost.", "127.1", "2130706433"} {
		others = append(others, f.subscribe(t, `{"Destination":"http://`+host+`:`+port+`/events"}`))
	}
	loc := f.subscribe(t, `{"Destination":"http://localhost:`+port+`/events"}`)
	if v := decode(t, f.do(req{path: loc})); v["DeliveryRetryPolicy"] != "SuspendRetries" {
		t.Errorf("default DeliveryRetryPolicy %v, want SuspendRetries", v["DeliveryRetryPolicy"])
	}
	f.do(req{method: "POST", path: "/redfish/v1/EventService/Actions/EventService.SubmitTestEvent", body: `{"Message":"to localhost"}`})
	v := f.waitState(t, loc, "Disabled")
	for _, o := range others {
		f.waitState(t, o, "Disabled")
	}
	if n := got.Load(); n != 0 {
		t.Errorf("the listener on 127.0.0.1 got %d requests through a name", n)
	}
	if fails := v["Oem"].(map[string]any)["Bmlab"].(map[string]any)["Failed"]; fails != 1.0 {
		t.Errorf("Failed %v, want 1", fails)
	}
	// Suspended: nothing is even tried.
	f.do(req{method: "POST", path: "/redfish/v1/EventService/Actions/EventService.SubmitTestEvent", body: `{"Message":"while suspended"}`})
	if w := f.do(req{method: "POST", path: loc + "/Actions/EventDestination.ResumeSubscription", body: `{}`}); w.Code != http.StatusNoContent {
		t.Fatalf("ResumeSubscription = %d %s", w.Code, w.Body)
	}
	v = f.waitState(t, loc, "Enabled")
	if d := v["Oem"].(map[string]any)["Bmlab"].(map[string]any)["Dropped"]; d != 1.0 {
		t.Errorf("Dropped %v, want 1 (the event sent while suspended)", d)
	}
}

// TestEventsClosedPortKept: with loopback allowed, a subscription whose
// listener is gone is kept and suspended, not deleted (the default,
// SuspendRetries); a listener that comes back gets events once resumed.
func TestEventsClosedPortKept(t *testing.T) {
	f := eventFixture(t, WithEventRetry(2, 10*time.Millisecond))
	var up atomic.Bool
	var n atomic.Int64
	ls := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		n.Add(1)
	}))
	t.Cleanup(ls.Close)
	loc := f.subscribe(t, `{"Destination":"`+ls.URL+`"}`)
	f.do(req{method: "POST", path: "/redfish/v1/EventService/Actions/EventService.SubmitTestEvent", body: `{}`})
	f.waitState(t, loc, "Disabled")
	up.Store(true)
	if w := f.do(req{method: "POST", path: loc + "/Actions/EventDestination.ResumeSubscription"}); w.Code != http.StatusNoContent {
		t.Fatalf("ResumeSubscription = %d %s", w.Code, w.Body)
	}
	f.do(req{method: "POST", path: "/redfish/v1/EventService/Actions/EventService.SubmitTestEvent", body: `{}`})
	if !testenv.WaitFor(10*time.Second, func() bool { return n.Load() == 1 }) {
		t.Fatalf("the resumed subscription's listener got %d events, want 1", n.Load())
	}
}

// TestEventHeadersRefused: headers that cloud metadata services take as
// credentials are refused at create and at PATCH with a 400 naming the
// header, whatever their case; others are taken.
func TestEventHeadersRefused(t *testing.T) {
	f := eventFixture(t)
	ls, _ := counter(t)
	path := "/redfish/v1/EventService/Subscriptions"
	for _, h := range []string{
		`{"Metadata-Flavor":"Google"}`, `{"metadata-flavor":"ibm"}`, `{"X-aws-ec2-metadata-token":"t"}`,
		`{"X-aws-ec2-metadata-token-ttl-seconds":"21600"}`, `{"Metadata":"true"}`, `{"X-Google-Metadata-Request":"True"}`,
		`{"X-aliyun-ecs-metadata-token":"t"}`, `{"Authorization":"Bearer Oracle"}`,
	} {
		name := strings.Split(strings.Trim(h, "{"), `"`)[1]
		w := f.do(req{method: "POST", path: path, body: `{"Destination":"` + ls.URL + `","HttpHeaders":[` + h + `]}`})
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), name) {
			t.Errorf("HttpHeaders %s: %d %s, want 400 naming %s", h, w.Code, w.Body, name)
		}
	}
	loc := f.subscribe(t, `{"Destination":"`+ls.URL+`","HttpHeaders":[{"Authorization":"Bearer listener-token"}]}`)
	w := f.do(req{method: "PATCH", path: loc, body: `{"HttpHeaders":[{"X-aws-ec2-metadata-token":"AQAE"}]}`})
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "X-aws-ec2-metadata-token") {
		t.Errorf("PATCH with a metadata header: %d %s, want 400 naming it", w.Code, w.Body)
	}
	if w := f.do(req{method: "PATCH", path: loc, body: `{"HttpHeaders":[{"X-Token":"new"}]}`}); w.Code != http.StatusOK {
		t.Errorf("PATCH HttpHeaders: %d %s", w.Code, w.Body)
	}
}

// TestEventDestinationCredentialsRedacted: a Destination's user:password
// is sent to the listener (Basic) but never shown: GET bodies, the
// collection's members and the log carry it redacted (issue 25: shown in
// GET and logged at INFO).
func TestEventDestinationCredentialsRedacted(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	f := newFixture(t, 1)
	f.srv = New(f.svc, zap.New(core), WithCredentials(testUser, testPass), WithEventPolicy(netpolicyLoopback), WithEventRetry(2, 10*time.Millisecond))
	f.h = f.srv.Handler()
	ctx, cancel := context.WithCancel(context.Background())
	done := f.srv.WatchEvents(ctx)
	t.Cleanup(func() { cancel(); <-done })
	ls := newListenerAnswering(t, http.StatusInternalServerError) // a failure, to be logged
	dest := strings.Replace(ls.URL, "http://", "http://ironic:hunter2-secret@", 1) + "/events"
	loc := f.subscribe(t, `{"Destination":"`+dest+`","DeliveryRetryPolicy":"TerminateAfterRetries"}`)
	body := f.do(req{path: loc}).Body.String()
	if strings.Contains(body, "hunter2") || !strings.Contains(body, "ironic:xxxxx@") {
		t.Errorf("GET shows the destination's password: %s", body)
	}
	f.do(req{method: "POST", path: "/redfish/v1/EventService/Actions/EventService.SubmitTestEvent", body: `{}`})
	ls.waitFor(t, "", 10*time.Second)
	ls.mu.Lock()
	if a := ls.headers[0].Get("Authorization"); a != "Basic aXJvbmljOmh1bnRlcjItc2VjcmV0" {
		t.Errorf("the listener got Authorization %q, want the destination's credentials", a)
	}
	ls.mu.Unlock()
	if !testenv.WaitFor(10*time.Second, func() bool { return f.do(req{path: loc}).Code == http.StatusNotFound }) {
		t.Fatal("the TerminateAfterRetries subscription outlived its retries")
	}
	for _, e := range logs.All() {
		line := e.Message + " " + strings.Join(fieldsOf(e), " ")
		if strings.Contains(line, "hunter2") {
			t.Errorf("log line carries the password: %s", line)
		}
	}
	if n := logs.FilterMessage("event subscription created").Len(); n != 1 {
		t.Errorf("%d 'subscription created' lines, want 1", n)
	}
}

func fieldsOf(e observer.LoggedEntry) []string {
	var out []string
	for k, v := range e.ContextMap() {
		out = append(out, fmt.Sprintf("%s=%v", k, v))
	}
	return out
}

// TestSushyEventPolicy: python3-sushy, as Ironic uses it, against the
// default policy: a loopback Destination and a metadata header are
// refused with 400s sushy reports, a name resolving to loopback is never
// delivered to and ends suspended, and the credentials in a Destination
// are not shown.
func TestSushyEventPolicy(t *testing.T) {
	testenv.Integration(t)
	py := testenv.Python(t, "sushy")
	f := policyFixture(t, WithEventRetry(1, 10*time.Millisecond))
	out, err := exec.Command(py, "testdata/sushy_event_policy.py", f.listen(t), testUser, testPass).CombinedOutput()
	t.Logf("sushy:\n%s", out)
	if err != nil {
		t.Fatalf("sushy event policy client failed: %v", err)
	}
}

// netpolicyLoopback is the event policy of vbmcd --events-allow-loopback.
var netpolicyLoopback = netpolicy.Policy{AllowLoopback: true}

// TestEventDeliveryNotRedirected: a listener's redirect is not followed
// (it counts as a failed delivery), and a Host in HttpHeaders does not
// change the Host a delivery carries.
func TestEventDeliveryNotRedirected(t *testing.T) {
	f := eventFixture(t, WithEventRetry(1, 10*time.Millisecond))
	target, hits := counter(t)
	hosts := make(chan string, 10)
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hosts <- r.Host
		http.Redirect(w, r, target.URL+"/elsewhere", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirector.Close)
	loc := f.subscribe(t, `{"Destination":"`+redirector.URL+`","HttpHeaders":[{"Host":"metadata.google.internal"}]}`)
	f.do(req{method: "POST", path: "/redfish/v1/EventService/Actions/EventService.SubmitTestEvent", body: `{}`})
	f.waitState(t, loc, "Disabled")
	if n := hits.Load(); n != 0 {
		t.Errorf("the redirect was followed: its target got %d requests", n)
	}
	if h := <-hosts; h != strings.TrimPrefix(redirector.URL, "http://") {
		t.Errorf("the delivery carried Host %q, want the listener's own", h)
	}
}
