package vbmcd

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

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
	cfg.StateDir = t.TempDir()
	cfg.MediaDir = t.TempDir()
	if edit != nil {
		edit(&cfg)
	}
	out := start(t, cfg)
	re := regexp.MustCompile(`Redfish at https?://([0-9.:]+)/redfish/v1`)
	var addr string
	if !testenv.WaitFor(10*time.Second, func() bool {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			addr = m[1]
		}
		return addr != ""
	}) {
		t.Fatalf("vbmcd did not start; output:\n%s", out.String())
	}
	return addr, out
}

// The Redfish listener bounds headers and holds no connection forever
// (issue 15: no ReadTimeout, IdleTimeout or MaxHeaderBytes).
func TestHTTPServerLimits(t *testing.T) {
	srv := newHTTPServer(http.NotFoundHandler(), testenv.Logger(t))
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
