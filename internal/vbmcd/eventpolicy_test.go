package vbmcd

import (
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"

	"github.com/bmlab/bmlab/internal/testenv"
)

// TestEventDestinationsFollowMediaPolicy: vbmcd holds event destinations
// to the image fetcher's policy and flags, but for loopback, which only
// --events-allow-loopback opens: with the defaults, with
// --media-allow-loopback and with --media-allow-cidr 127.0.0.0/8, curl's
// subscription to a listener on 127.0.0.1 is a 400 naming
// --events-allow-loopback; with that flag it is created (issue 25: the
// default policy refused loopback images but not loopback listeners; issue
// 46: --media-allow-loopback, which sushy-emulator mode sets, opened them).
func TestEventDestinationsFollowMediaPolicy(t *testing.T) {
	testenv.Integration(t)
	curl := testenv.Command(t, "curl")
	ls := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer ls.Close()
	subscribe := func(addr string) (string, string) {
		out, err := exec.Command(curl, "-s", "-u", "admin:sim-pass-1", "-H", "Content-Type: application/json",
			"-w", "\n%{http_code}", "-d", `{"Destination":"`+ls.URL+`/events"}`,
			"http://"+addr+"/redfish/v1/EventService/Subscriptions").CombinedOutput()
		if err != nil {
			t.Fatalf("curl: %v\n%s", err, out)
		}
		var body, code string
		if i := strings.LastIndex(string(out), "\n"); i >= 0 {
			body, code = string(out[:i]), string(out[i+1:])
		}
		return code, body
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"default flags", nil, "400"},
		{"--media-allow-loopback", func(c *Config) { c.MediaAllowLoopback = true }, "400"},
		{"--media-allow-cidr 127.0.0.0/8", func(c *Config) { c.MediaAllowCIDRs = []string{"127.0.0.0/8"} }, "400"},
		{"--events-allow-loopback", func(c *Config) { c.EventsAllowLoopback = true }, "201"},
	} {
		addr, _ := simDaemon(t, tc.edit)
		code, body := subscribe(addr)
		if code != tc.want || code == "400" && !strings.Contains(body, "--events-allow-loopback") {
			t.Errorf("%s: %s %s, want %s (a 400 naming --events-allow-loopback)", tc.name, code, body, tc.want)
		}
	}
}
