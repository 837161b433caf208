package admission

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// held serves requests that wait until release is closed, telling started
// of each; what it does with each request before waiting is do.
type held struct {
	started chan struct{}
	release chan struct{}
	do      func(w http.ResponseWriter, r *http.Request)
}

func (h *held) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.do != nil {
		h.do(w, r)
	}
	h.started <- struct{}{}
	<-h.release
	w.WriteHeader(http.StatusNoContent)
}

func newHeld() *held { return &held{started: make(chan struct{}, 100), release: make(chan struct{})} }

func request(remote string, creds bool) *http.Request {
	r := httptest.NewRequest("POST", "/redfish/v1/SessionService/Sessions", strings.NewReader("{}"))
	r.RemoteAddr = remote
	if creds {
		r.Header.Set("X-Auth-Token", "t")
	}
	return r
}

// start serves r through h in the background and returns its recorder and
// a channel closed when it is answered.
func start(h http.Handler, r *http.Request) (*httptest.ResponseRecorder, <-chan struct{}) {
	w := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(w, r)
	}()
	return w, done
}

// The budgets hold per source and in total, for requests in flight and
// for those without credentials; a request past one is answered at once
// with 503 and Retry-After, counted by why, while other sources go on.
func TestBudgets(t *testing.T) {
	b := Budgets{PerSource: 4, Total: 6, AnonPerSource: 2, AnonTotal: 3, RetryAfter: 2 * time.Second}
	g := New(b, nil, nil)
	h := newHeld()
	gh := g.Wrap(h)
	var waits []<-chan struct{}
	admit := func(remote string, creds bool) {
		t.Helper()
		_, done := start(gh, request(remote, creds))
		select {
		case <-h.started:
		case <-done:
			t.Fatalf("a request from %s (credentials %v) was refused", remote, creds)
		}
		waits = append(waits, done)
	}
	refused := func(remote string, creds bool, why string) {
		t.Helper()
		w := httptest.NewRecorder()
		gh.ServeHTTP(w, request(remote, creds))
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "2" {
			t.Errorf("from %s (credentials %v): %d Retry-After %q, want 503 with Retry-After 2", remote, creds, w.Code, w.Header().Get("Retry-After"))
		}
		if n := g.Refused(why); n == 0 {
			t.Errorf("from %s: not counted as %s", remote, why)
		}
	}
	admit("192.0.2.1:1", false)
	admit("192.0.2.1:2", false)
	refused("192.0.2.1:3", false, WhyAnonSource) // its source's unauthenticated budget
	admit("192.0.2.1:4", true)
	admit("192.0.2.1:5", true)
	refused("192.0.2.1:6", true, WhySource) // its source's budget
	admit("192.0.2.2:1", false)
	refused("192.0.2.3:1", false, WhyAnonTotal) // all unauthenticated
	admit("192.0.2.3:2", true)
	refused("192.0.2.4:1", true, WhyTotal) // all requests
	if reqs, anon, _ := g.InFlight(); reqs != 6 || anon != 3 {
		t.Errorf("in flight %d, of which %d unauthenticated; want 6 and 3", reqs, anon)
	}
	close(h.release)
	for _, d := range waits {
		<-d
	}
	if reqs, anon, body := g.InFlight(); reqs != 0 || anon != 0 || body != 0 {
		t.Errorf("after every request ended: %d in flight, %d unauthenticated, %d body bytes", reqs, anon, body)
	}
	if len(g.src) != 0 {
		t.Errorf("%d sources still kept", len(g.src))
	}
}

// A request whose credentials are verified leaves the unauthenticated
// budget, making room; one that carries credentials its handler does not
// check first (a login) joins it, or is refused when it is full.
func TestAuthenticatedAndAnonymous(t *testing.T) {
	g := New(Budgets{PerSource: 10, Total: 10, AnonPerSource: 1, AnonTotal: 10}, nil, nil)
	h := newHeld()
	promote := make(chan bool, 1)
	h.do = func(w http.ResponseWriter, r *http.Request) {
		if <-promote {
			Authenticated(r)
		} else if !Anonymous(w, r) {
			panic("refused") // not reached: the test checks it below
		}
	}
	gh := g.Wrap(h)
	promote <- true
	_, d1 := start(gh, request("192.0.2.1:1", false))
	<-h.started
	if _, anon, _ := g.InFlight(); anon != 0 {
		t.Fatalf("an authenticated request still counted unauthenticated")
	}
	promote <- false
	_, d2 := start(gh, request("192.0.2.1:2", true)) // a login with a stray header
	<-h.started
	if _, anon, _ := g.InFlight(); anon != 1 {
		t.Fatalf("a login with credentials it does not use: %d unauthenticated, want 1", anon)
	}
	// The source's unauthenticated budget (1) is full now.
	r := request("192.0.2.1:3", true)
	w := httptest.NewRecorder()
	g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if Anonymous(w, r) {
			t.Error("Anonymous with the budget full: true")
		}
	})).ServeHTTP(w, r)
	if w.Code != http.StatusServiceUnavailable {
		t.Errorf("Anonymous with the budget full answered %d, want 503", w.Code)
	}
	close(h.release)
	<-d1
	<-d2
}

// Body bytes are charged as the face asks, per source and in total, and
// given back when the request ends; without a gate, Reserve always works.
func TestReserve(t *testing.T) {
	g := New(Budgets{BodyPerSource: 1000, BodyTotal: 1500}, nil, nil)
	var mu sync.Mutex
	got := map[string]bool{}
	h := newHeld()
	h.do = func(w http.ResponseWriter, r *http.Request) {
		ok := Reserve(r, 600) && Reserve(r, 300)
		mu.Lock()
		got[r.RemoteAddr] = ok
		mu.Unlock()
	}
	gh := g.Wrap(h)
	_, d1 := start(gh, request("192.0.2.1:1", true))
	<-h.started
	_, d2 := start(gh, request("192.0.2.1:2", true)) // the same source: 900 + 600 > 1000
	<-h.started
	_, d3 := start(gh, request("192.0.2.2:1", true)) // another source: its 600 fit the total (1500), its 300 do not
	<-h.started
	mu.Lock()
	if !got["192.0.2.1:1"] || got["192.0.2.1:2"] || got["192.0.2.2:1"] {
		t.Errorf("reservations %v: want only the first to fit", got)
	}
	mu.Unlock()
	if _, _, body := g.InFlight(); body != 900+600 {
		t.Errorf("%d body bytes held, want 1500", body)
	}
	if g.Refused(WhyBody) != 2 {
		t.Errorf("%d refusals for body bytes, want 2", g.Refused(WhyBody))
	}
	close(h.release)
	<-d1
	<-d2
	<-d3
	if _, _, body := g.InFlight(); body != 0 {
		t.Errorf("%d body bytes held after the requests ended", body)
	}
	if !Reserve(httptest.NewRequest("GET", "/", nil), 1<<40) {
		t.Error("Reserve without a gate refused")
	}
}

// A request without credentials gets AnonRead to send its body, an
// authenticated one Read, on a real listener, over HTTP/1 (the
// connection's deadline) and HTTP/2 (the gate's sweeper: no timer per
// stream).
func TestAnonymousBodyDeadline(t *testing.T) {
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		t.Run(proto, func(t *testing.T) {
			g := New(Budgets{AnonRead: 300 * time.Millisecond, Read: 10 * time.Second, Write: 10 * time.Second}, nil, nil)
			type result struct {
				proto string
				err   error
				took  time.Duration
			}
			results := make(chan result, 1)
			srv := httptest.NewUnstartedServer(g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "" {
					Authenticated(r)
				}
				start := time.Now()
				_, err := io.ReadAll(r.Body)
				results <- result{r.Proto, err, time.Since(start)}
			})))
			srv.EnableHTTP2 = proto == "HTTP/2.0"
			srv.StartTLS()
			defer srv.Close()
			c := srv.Client()
			for _, creds := range []bool{false, true} {
				pr, pw := io.Pipe()
				r, _ := http.NewRequest("POST", srv.URL, pr)
				r.ContentLength = 1
				if creds {
					r.Header.Set("Authorization", "Basic eDp4")
				}
				go func() {
					resp, err := c.Do(r)
					if err == nil {
						resp.Body.Close()
					}
				}()
				go func() {
					time.Sleep(time.Second) // the body comes after a second
					pw.Write([]byte("x"))
					pw.Close()
				}()
				res := <-results
				if res.proto != proto {
					t.Fatalf("served over %s, want %s", res.proto, proto)
				}
				if !creds && (res.err == nil || res.took > 900*time.Millisecond) {
					t.Errorf("without credentials, a body a second late: %v after %v, want a timeout after %v", res.err, res.took, g.b.AnonRead)
				}
				if creds && res.err != nil {
					t.Errorf("authenticated, a body a second late: %v after %v, want it read", res.err, res.took)
				}
			}
		})
	}
}

func TestSourceOf(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.1:80":             "192.0.2.1",
		"[2001:db8:1:2:3:4:5:6]:1": "2001:db8:1:2::",
		"[::ffff:192.0.2.7]:1":     "192.0.2.7",
		"192.0.2.9":                "192.0.2.9",
		"garbage":                  "invalid IP",
	} {
		if got := SourceOf(in).String(); got != want {
			t.Errorf("SourceOf(%q) = %s, want %s", in, got, want)
		}
	}
}
