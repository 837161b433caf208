package vbmcd

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/bmlab/bmlab/internal/listen"
	"github.com/bmlab/bmlab/internal/testenv"
)

// simDaemon runs vbmcd in-process over the sim backend on loopback with
// plain HTTP and returns its address (host:port) and its output.
func simDaemon(t *testing.T, edit func(*Config)) (string, *testenv.Buffer) {
	t.Helper()
	var cfg Config
	cfg.bind(pflag.NewFlagSet("vbmcd", pflag.ContinueOnError)) // the defaults
	cfg.Backend, cfg.SimNodes = "sim", 2
	cfg.RedfishAddr = "127.0.0.1:0"
	cfg.Username, cfg.Password = "admin", "sim-pass-1"
	cfg.InsecureHTTP = true
	cfg.IPMI = false
	cfg.MetricsAddr = "" // the default port is fixed; a test that wants one asks for 127.0.0.1:0
	cfg.StateDir = t.TempDir()
	cfg.MediaDir = t.TempDir()
	if edit != nil {
		edit(&cfg)
	}
	out := start(t, cfg)
	return startedAt(t, out, regexp.MustCompile(`Redfish at https?://([0-9a-f.:\[\]]+)/redfish/v1`), 10*time.Second), out
}

// firstSimSystem is the ID of the first system the sim daemon at addr
// (simDaemon's answer) lists.
func firstSimSystem(t *testing.T, addr string) string {
	t.Helper()
	r, err := send("GET", "http://"+addr+"/redfish/v1/Systems?$top=1", "admin", "sim-pass-1", "")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`/redfish/v1/Systems/([0-9a-f-]{36})`).FindStringSubmatch(string(r.Body))
	if m == nil {
		t.Fatalf("no system in the sim daemon's list: %d %s", r.Code, r.Body)
	}
	return m[1]
}

// The Redfish listener bounds headers and holds no connection forever
// (issue 15: no ReadTimeout, IdleTimeout or MaxHeaderBytes).
func TestHTTPServerLimits(t *testing.T) {
	srv := listen.NewServer(http.NotFoundHandler(), testenv.Logger(t), listen.DefaultLimits)
	for name, d := range map[string]time.Duration{
		"ReadHeaderTimeout": srv.ReadHeaderTimeout, "ReadTimeout": srv.ReadTimeout,
		"WriteTimeout": srv.WriteTimeout, "IdleTimeout": srv.IdleTimeout,
	} {
		if d <= 0 || d > time.Minute {
			t.Errorf("%s %v, want a bound of at most a minute", name, d)
		}
	}
	addr, _ := simDaemon(t, nil)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	pad := strings.Repeat("x", 100<<10)
	fmt.Fprintf(conn, "GET /redfish/v1/Systems HTTP/1.1\r\nHost: %s\r\nX-Pad: %s\r\n\r\n", addr, pad)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a 100 KiB header: %s, want 431", resp.Status)
	}
}

// Clients that drip a request or sit on an idle connection are cut off by
// the server (issue 15: a slowly dripped session-login body or an idle
// keep-alive held a connection indefinitely). The limits are shortened so
// the test need not wait the defaults out; each connection is given ten
// times its limit before the test gives up.
func TestSlowClientsDisconnected(t *testing.T) {
	l := listen.Limits{ReadHeader: 300 * time.Millisecond, Read: 600 * time.Millisecond, Write: time.Second, Idle: 300 * time.Millisecond, MaxHeader: 4 << 10}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusRequestTimeout)
		}
	})
	srv := listen.NewServer(h, testenv.Logger(t), l)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	addr := ln.Addr().String()

	// closed waits for the server to end conn while drip keeps writing to
	// it; false when conn is still open after wait.
	closed := func(conn net.Conn, wait time.Duration, drip string) bool {
		if drip != "" {
			defer testenv.Every(50*time.Millisecond, func(i int) bool {
				_, err := conn.Write([]byte{drip[i%len(drip)]})
				return err == nil
			})()
		}
		conn.SetReadDeadline(time.Now().Add(wait))
		_, err := io.Copy(io.Discard, conn)
		var ne net.Error
		return !(errors.As(err, &ne) && ne.Timeout())
	}
	dial := func() net.Conn {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}

	conn := dial()
	fmt.Fprintf(conn, "POST /redfish/v1/SessionService/Sessions HTTP/1.1\r\nHost: %s\r\nX-Slow: ", addr)
	if !closed(conn, 10*l.ReadHeader, "x") {
		t.Errorf("a header dripped a byte per 50 ms: connection still open after %v (ReadHeaderTimeout %v)", 10*l.ReadHeader, l.ReadHeader)
	}

	conn = dial()
	fmt.Fprintf(conn, "POST /redfish/v1/SessionService/Sessions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n", addr)
	if !closed(conn, 10*l.Read, `{"UserName":"admin",`) {
		t.Errorf("a body dripped a byte per 50 ms: connection still open after %v (ReadTimeout %v)", 10*l.Read, l.Read)
	}

	conn = dial()
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !closed(conn, 10*l.Idle, "") {
		t.Errorf("an idle kept-alive connection still open after %v (IdleTimeout %v)", 10*l.Idle, l.Idle)
	}
}

// A body over the service's limit is answered with the Redfish error, not
// read to its end.
func TestOversizedBodyRefused(t *testing.T) {
	addr, _ := simDaemon(t, nil)
	url := "http://" + addr + "/redfish/v1/SessionService/Sessions"
	for _, chunked := range []bool{false, true} {
		var body io.Reader = bytes.NewReader([]byte(`{"UserName": "` + strings.Repeat("x", 2<<20) + `"}`))
		if chunked {
			body = io.MultiReader(body) // no length: sent chunked
		}
		req, err := http.NewRequest(http.MethodPost, url, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("chunked %v: %v", chunked, err)
		}
		var v struct {
			Error struct {
				Info []struct{ MessageId string } `json:"@Message.ExtendedInfo"`
			} `json:"error"`
		}
		err = json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || err != nil || len(v.Error.Info) == 0 ||
			!strings.HasSuffix(v.Error.Info[0].MessageId, ".PayloadTooLarge") {
			t.Errorf("a 2 MiB body (chunked %v): %s %+v (%v), want 413 with Base PayloadTooLarge", chunked, resp.Status, v, err)
		}
	}
}

// An empty password is refused everywhere, the built-in one on a listener
// any network reaches; a lab's private address gets a warning instead.
func TestPasswordRules(t *testing.T) {
	for _, tc := range []struct {
		redfish, ipmi, pass string
		ok                  bool
	}{
		{"127.0.0.1:8000", "", "", false},
		{"127.0.0.1:8000", "", DefaultPassword, true},
		{"localhost:8000", "", DefaultPassword, true},
		{":8000", "", DefaultPassword, false},
		{"0.0.0.0:8000", "", DefaultPassword, false},
		{"[::]:8000", "", DefaultPassword, false},
		{"203.0.113.9:8000", "", DefaultPassword, false},
		{"127.0.0.1:8000", "0.0.0.0", DefaultPassword, false},
		{"192.168.111.1:8000", "", DefaultPassword, true},
		{":8000", "", "a-real-secret", true},
	} {
		c := Config{RedfishAddr: tc.redfish, IPMIAddr: tc.ipmi, IPMI: true}
		if err := c.checkPassword(tc.pass); (err == nil) != tc.ok {
			t.Errorf("redfish %q ipmi %q password %q: %v, want ok %v", tc.redfish, tc.ipmi, tc.pass, err, tc.ok)
		}
	}
	c := Config{RedfishAddr: "192.168.111.1:8000", IPMI: true}
	if w := c.warnings(false, true); len(w) != 2 {
		t.Errorf("built-in password on a private address: warnings %q, want one per listener", w)
	}
}

// Listeners default to loopback; IPMI binds where Redfish binds unless told.
func TestListenDefaults(t *testing.T) {
	var c Config
	c.bind(pflag.NewFlagSet("vbmcd", pflag.ContinueOnError))
	if reach(c.RedfishAddr) != reachLocal || c.ipmiAddr() != "127.0.0.1" {
		t.Errorf("defaults: redfish %q, ipmi %q; want loopback", c.RedfishAddr, c.ipmiAddr())
	}
	c.RedfishAddr = "192.168.111.1:8000"
	if got := c.ipmiAddr(); got != "192.168.111.1" {
		t.Errorf("IPMI binds %q, want the Redfish host", got)
	}
	c.IPMIAddr = "10.0.0.1"
	if got := c.ipmiAddr(); got != "10.0.0.1" {
		t.Errorf("IPMI binds %q, want --ipmi-addr", got)
	}
}

// Unsafe settings are said out loud.
func TestUnsafeSettingsWarn(t *testing.T) {
	c := Config{RedfishAddr: "127.0.0.1:0", IPMI: true, IPMICipher0: true, InsecureHTTP: true}
	got := strings.Join(c.warnings(true, false), "\n")
	for _, want := range []string{"--ipmi-cipher0", "--insecure-http", "--password on the command line"} {
		if !strings.Contains(got, want) {
			t.Errorf("no warning about %s in:\n%s", want, got)
		}
	}
	if w := (&Config{RedfishAddr: "127.0.0.1:0", IPMI: true}).warnings(false, true); len(w) != 0 {
		t.Errorf("safe settings warn: %q", w)
	}
}

// The daemon refuses an empty password before it listens.
func TestDaemonRefusesEmptyPassword(t *testing.T) {
	var cfg Config
	cfg.bind(pflag.NewFlagSet("vbmcd", pflag.ContinueOnError))
	cfg.Backend, cfg.Password = "sim", ""
	cfg.StateDir, cfg.MediaDir = t.TempDir(), t.TempDir()
	err := serve(t.Context(), cfg, testenv.Logger(t), &testenv.Buffer{}, false)
	if err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty password: %v, want a refusal", err)
	}
}
