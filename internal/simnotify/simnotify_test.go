package simnotify

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// listener records what it is sent, as fake-ipa's root takes it.
type listener struct {
	mu     sync.Mutex
	bodies map[string][]string // by the announcement's machine, in order
	got    chan struct{}
	status atomic.Int32 // what it answers; 0: 204
}

func newListener() *listener {
	return &listener{bodies: map[string][]string{}, got: make(chan struct{}, 100000)}
}

func (l *listener) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	if r.Method != http.MethodPut || r.URL.Path != "/" || r.Header.Get("Content-Type") != "application/json" {
		http.Error(w, fmt.Sprintf("%s %s %s", r.Method, r.URL.Path, r.Header.Get("Content-Type")), http.StatusMethodNotAllowed)
		return
	}
	if s := l.status.Load(); s != 0 {
		w.WriteHeader(int(s))
		return
	}
	var m struct{ Name string }
	_ = json.Unmarshal(b, &m)
	l.mu.Lock()
	l.bodies[m.Name] = append(l.bodies[m.Name], string(b))
	l.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
	l.got <- struct{}{}
}

func (l *listener) wait(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-l.got:
		case <-time.After(10 * time.Second):
			t.Fatalf("the listener got fewer than %d announcements", n)
		}
	}
}

// settle waits until the notifier's counts say it is done with what it
// was given.
func settle(t *testing.T, n *Notifier, done func(Stats) bool) Stats {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := n.Stats()
		if done(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v", s)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func start(t *testing.T, cfg Config) *Notifier {
	t.Helper()
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { n.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return n
}

// Each machine's announcements arrive in order, as PUTs of the body given.
func TestAnnouncementsArriveInOrder(t *testing.T) {
	l := newListener()
	srv := httptest.NewServer(l)
	defer srv.Close()
	n := start(t, Config{URL: srv.URL, Senders: 3})
	for i := range 50 {
		for _, m := range []string{"a", "b", "c", "d"} {
			n.Notify(m, fmt.Appendf(nil, `{"name":%q,"seq":%d}`, m, i))
		}
	}
	l.wait(t, 200)
	for _, m := range []string{"a", "b", "c", "d"} {
		for i, b := range l.bodies[m] {
			if want := fmt.Sprintf(`{"name":%q,"seq":%d}`, m, i); b != want {
				t.Fatalf("%s's announcement %d: %s, want %s", m, i, b, want)
			}
		}
	}
	if s := settle(t, n, func(s Stats) bool { return s.Sent == 200 }); s.Failed+s.Dropped+s.Retries != 0 {
		t.Errorf("stats %+v", s)
	}
}

// A listener that is down costs the caller nothing: Notify returns at
// once, the queue stays bounded (the oldest go), each announcement is
// tried Attempts times, and the outage is logged once and counted. When
// the listener is back, that is logged too and announcements arrive again.
func TestListenerDown(t *testing.T) {
	l := newListener()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gate := &downListener{Listener: ln}
	gate.down.Store(true) // every connection is closed at once
	srv := &http.Server{Handler: l}
	go srv.Serve(gate)
	defer srv.Close()
	core, logs := observer.New(zap.InfoLevel)
	n := start(t, Config{URL: "http://" + ln.Addr().String(), Senders: 1, Queue: 8, Attempts: 3, Backoff: time.Millisecond, Log: zap.New(core)})
	for i := range 10000 {
		n.Notify("m", fmt.Appendf(nil, `{"name":"m","seq":%d}`, i))
	}
	// Every one is queued (at most 8), dropped, failed, or the one being
	// tried.
	if s := n.Stats(); s.Queued > 8 || s.Dropped+s.Failed+uint64(s.Queued) < 10000-1 {
		t.Errorf("after 10,000 announcements to a listener that is down: %+v (want at most 8 queued, the rest dropped or failed)", s)
	}
	s := settle(t, n, func(s Stats) bool { return s.Failed >= 2 })
	if s.Retries < 2*s.Failed || s.Sent != 0 {
		t.Fatalf("stats %+v: want each failure counted after 3 attempts", s)
	}
	if down := logs.FilterMessageSnippet("listener is down").Len(); down != 1 {
		t.Errorf("logged the outage %d times, want once", down)
	}

	gate.down.Store(false)
	n.Notify("m", []byte(`{"name":"m","seq":"after"}`))
	for {
		l.wait(t, 1)
		l.mu.Lock()
		last := l.bodies["m"][len(l.bodies["m"])-1]
		l.mu.Unlock()
		if last == `{"name":"m","seq":"after"}` {
			break
		}
	}
	if back := logs.FilterMessageSnippet("answers again").Len(); back != 1 {
		t.Errorf("logged the return %d times, want once", back)
	}
}

// downListener closes every connection it accepts while down.
type downListener struct {
	net.Listener
	down atomic.Bool
}

func (d *downListener) Accept() (net.Conn, error) {
	for {
		c, err := d.Listener.Accept()
		if err != nil || !d.down.Load() {
			return c, err
		}
		c.Close()
	}
}

// A 5xx is retried; a 4xx is the listener's answer and is not.
func TestRetriesAndRefusals(t *testing.T) {
	l := newListener()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		l.ServeHTTP(w, r)
	}))
	defer srv.Close()
	n := start(t, Config{URL: srv.URL, Backoff: time.Millisecond})
	n.Notify("m", []byte(`{"name":"m"}`))
	l.wait(t, 1)
	if s := settle(t, n, func(s Stats) bool { return s.Sent == 1 }); s.Retries != 2 || s.Failed != 0 {
		t.Errorf("after two 503s: %+v", s)
	}
	l.status.Store(http.StatusBadRequest)
	n.Notify("m", []byte(`{"name":"m"}`))
	if s := settle(t, n, func(s Stats) bool { return s.Failed == 1 }); s.Retries != 2 || s.Sent != 1 {
		t.Errorf("after a 400: %+v (want it failed, not retried)", s)
	}
}

// An https listener is verified against EXTERNAL_NOTIFICATION_CAFILE when
// one is given, and not verified without one, as the fake driver does.
func TestHTTPSListener(t *testing.T) {
	l := newListener()
	srv := httptest.NewTLSServer(l)
	defer srv.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []Config{{URL: srv.URL}, {URL: srv.URL, CAFile: ca}} {
		n := start(t, cfg)
		n.Notify("m", []byte(`{"name":"m"}`))
		l.wait(t, 1)
	}
	// A CA that did not sign the listener's certificate.
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "another CA"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	otherCA := filepath.Join(dir, "other.pem")
	if err := os.WriteFile(otherCA, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	n := start(t, Config{URL: srv.URL, CAFile: otherCA, Attempts: 1})
	n.Notify("m", []byte(`{"name":"m"}`))
	if s := settle(t, n, func(s Stats) bool { return s.Failed == 1 }); s.Sent != 0 {
		t.Errorf("a listener whose certificate the CA did not sign: %+v", s)
	}
	if _, err := New(Config{URL: srv.URL, CAFile: filepath.Join(dir, "none.pem")}); err == nil {
		t.Error("a missing CA file was accepted")
	}
}
