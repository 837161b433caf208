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
