package admission

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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

// A mode is how a test's requests reach the gate: each with a ticket of
// its own (a server without the gate's ConnContext), or through the slot
// of a connection of its own (ConnContext, as vbmcd's listeners).
type mode struct {
	name string
	via  func(g *Gate, r *http.Request) *http.Request
}

var modes = []mode{
	{"ticket per request", func(_ *Gate, r *http.Request) *http.Request { return r }},
	{"connection slot", func(g *Gate, r *http.Request) *http.Request {
		c, _ := net.Pipe()
		return r.WithContext(g.ConnContext(r.Context(), c))
	}},
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
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { testBudgets(t, m) })
	}
}

func testBudgets(t *testing.T, m mode) {
	b := Budgets{PerSource: 4, Total: 6, AnonPerSource: 2, AnonTotal: 3, RetryAfter: 2 * time.Second}
	g := New(b, nil, nil)
	request := func(remote string, creds bool) *http.Request { return m.via(g, request(remote, creds)) }
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
	for src, u := range g.src {
		if *u != (usage{}) {
			t.Errorf("source %s still holds %+v", src, *u)
		}
	}
}

// A request whose credentials are verified leaves the unauthenticated
// budget, making room; one that carries credentials its handler does not
// check first (a login) joins it, or is refused when it is full.
func TestAuthenticatedAndAnonymous(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { testAuthenticatedAndAnonymous(t, m) })
	}
}

func testAuthenticatedAndAnonymous(t *testing.T, m mode) {
	g := New(Budgets{PerSource: 10, Total: 10, AnonPerSource: 1, AnonTotal: 10}, nil, nil)
	request := func(remote string, creds bool) *http.Request { return m.via(g, request(remote, creds)) }
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
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { testReserve(t, m) })
	}
}

func testReserve(t *testing.T, m mode) {
	g := New(Budgets{BodyPerSource: 1000, BodyTotal: 1500}, nil, nil)
	request := func(remote string, creds bool) *http.Request { return m.via(g, request(remote, creds)) }
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
	for _, tc := range []struct {
		proto string
		slot  bool // the server has the gate's ConnContext
	}{{"HTTP/1.1", false}, {"HTTP/2.0", false}, {"HTTP/1.1", true}, {"HTTP/2.0", true}} {
		proto := tc.proto
		t.Run(fmt.Sprintf("%s/slot=%v", proto, tc.slot), func(t *testing.T) {
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
			if tc.slot {
				srv.Config.ConnContext = g.ConnContext
			}
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

// On a server with the gate's ConnContext, the HTTP/1 requests of one
// kept-alive connection take turns in its slot: each starts with nothing
// held (the budgets its predecessor took are back), is counted while it
// runs, and gives everything back when it ends.
func TestConnectionSlotTakenInTurn(t *testing.T) {
	g := New(Budgets{PerSource: 4, Total: 4, AnonPerSource: 1, AnonTotal: 1, BodyPerSource: 1000, BodyTotal: 1000,
		AnonRead: 5 * time.Second, Read: 5 * time.Second, Write: 5 * time.Second}, nil, nil)
	type seen struct {
		remote           string
		reserved         bool
		reqs, anon, body int64
	}
	var got []seen
	srv := httptest.NewUnstartedServer(g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			Authenticated(r)
		}
		_, _ = io.Copy(io.Discard, r.Body)
		ok := Reserve(r, 900)
		reqs, anon, body := g.InFlight()
		got = append(got, seen{r.RemoteAddr, ok, int64(reqs), int64(anon), body})
	})))
	srv.Config.ConnContext = g.ConnContext
	srv.Start()
	defer srv.Close()
	c := srv.Client()
	c.Transport.(*http.Transport).MaxConnsPerHost = 1
	for _, creds := range []bool{false, true, false} {
		r, _ := http.NewRequest("POST", srv.URL, strings.NewReader("{}"))
		if creds {
			r.SetBasicAuth("x", "x")
		}
		resp, err := c.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	want := []seen{{reserved: true, reqs: 1, anon: 1, body: 900}, {reserved: true, reqs: 1, body: 900}, {reserved: true, reqs: 1, anon: 1, body: 900}}
	first := got[0].remote
	for i := range got {
		if got[i].remote != first {
			t.Fatalf("request %d came over %s, the first over %s: not one connection", i, got[i].remote, first)
		}
		got[i].remote = ""
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(seen{})); diff != "" {
		t.Errorf("what each request held while it ran (-want +got):\n%s", diff)
	}
	if reqs, anon, body := g.InFlight(); reqs != 0 || anon != 0 || body != 0 {
		t.Errorf("after the requests: %d in flight, %d unauthenticated, %d body bytes", reqs, anon, body)
	}
}

// wiring is how a test server gives the gate its connections: not at all
// (a ticket per request), ConnContext (a slot, the connection's own
// deadlines), or NewConn with the ConnState hook (a slot whose write
// deadlines the sweeper keeps), as vbmcd's listeners do.
type wiring string

const (
	perRequest wiring = "ticket per request"
	slotOwn    wiring = "slot, the connection's deadlines"
	slotSwept  wiring = "slot, swept write deadlines"
)

func (w wiring) wire(g *Gate, srv *http.Server) {
	switch w {
	case slotOwn:
		srv.ConnContext = g.ConnContext
	case slotSwept:
		var mu sync.Mutex
		conns := map[net.Conn]*Conn{}
		srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
			ctx, gc := g.NewConn(ctx, c)
			mu.Lock()
			conns[c] = gc
			mu.Unlock()
			return ctx
		}
		srv.ConnState = func(c net.Conn, st http.ConnState) {
			mu.Lock()
			gc := conns[c]
			mu.Unlock()
			if gc != nil {
				gc.State(st)
			}
		}
	}
}

// A request without a body gets no read deadline (there is nothing left
// to read), but its write deadline still holds: a handler past it cannot
// write its answer, whichever way the server gives the gate its
// connections (the sweeper enforces a swept one up to sweepEvery late).
func TestWriteDeadlineWithoutBody(t *testing.T) {
	for _, w := range []wiring{perRequest, slotOwn, slotSwept} {
		t.Run(string(w), func(t *testing.T) {
			const write = 400 * time.Millisecond
			g := New(Budgets{Read: 200 * time.Millisecond, Write: write}, nil, nil)
			errs := make(chan error, 1)
			srv := httptest.NewUnstartedServer(g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				time.Sleep(300 * time.Millisecond) // past Read: no deadline to hit, the context lives
				if err := r.Context().Err(); err != nil {
					errs <- fmt.Errorf("a bodiless request's context ended after 300 ms: %w", err)
					return
				}
				time.Sleep(200 * time.Millisecond) // past Write
				// Written until a write fails, for at most 5 s: the
				// client reads nothing, so without a deadline the
				// writes would block once the socket's buffers are full.
				var err error
				for began := time.Now(); err == nil && time.Since(began) < 5*time.Second; {
					_, err = w.Write(make([]byte, 64<<10))
				}
				errs <- err
			})))
			w.wire(g, srv.Config)
			srv.Start()
			defer srv.Close()
			conn, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			began := time.Now()
			fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: x\r\nAuthorization: Basic eDp4\r\n\r\n") // and reads nothing
			err = <-errs
			if took := time.Since(began); err == nil || strings.Contains(err.Error(), "context ended") || took > write+2*sweepEvery+time.Second {
				t.Errorf("writing past the write deadline (%v): %v after %v, want a timeout within %v", write, err, took, write+2*sweepEvery)
			}
		})
	}
}

// On a swept connection, the write deadline of an answer ends when the
// connection is idle again: a kept-alive connection idle past it still
// answers its next request.
func TestSweptConnectionIdlePastWrite(t *testing.T) {
	g := New(Budgets{Write: 300 * time.Millisecond}, nil, nil)
	srv := httptest.NewUnstartedServer(g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok"))
	})))
	slotSwept.wire(g, srv.Config)
	var opened atomic.Int32
	hook := srv.Config.ConnState
	srv.Config.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateNew {
			opened.Add(1)
		}
		hook(c, st)
	}
	srv.Start()
	defer srv.Close()
	c := srv.Client()
	c.Transport.(*http.Transport).MaxConnsPerHost = 1
	for i := range 3 {
		if i > 0 {
			time.Sleep(300*time.Millisecond + 2*sweepEvery) // idle past the deadline and a sweep
		}
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "ok" {
			t.Fatalf("request %d: %q", i, b)
		}
	}
	if n := opened.Load(); n != 1 {
		t.Errorf("3 requests over %d connections, want 1: the idle connection's writes failed", n)
	}
}

// A source that holds nothing keeps its entry (its next request allocates
// none), but no more than keptIdle of them are kept: the table does not
// grow with every source ever seen.
func TestIdleSourcesBounded(t *testing.T) {
	g := New(Budgets{PerSource: 4, Total: 8}, nil, nil)
	h := g.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for i := range 3 * keptIdle {
		h.ServeHTTP(httptest.NewRecorder(), request(fmt.Sprintf("10.0.%d.%d:1", i/250, i%250), true))
		if n := len(g.src); n > keptIdle+1 {
			t.Fatalf("after %d sources, %d kept, want at most %d", i+1, n, keptIdle+1)
		}
	}
	if reqs, anon, body := g.InFlight(); reqs != 0 || anon != 0 || body != 0 {
		t.Errorf("after every request ended: %d in flight, %d unauthenticated, %d body bytes", reqs, anon, body)
	}
}
