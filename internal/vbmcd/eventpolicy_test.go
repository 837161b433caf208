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
// to the image fetcher's policy and flags: with the defaults, curl's
// subscription to a listener on 127.0.0.1 is a 400 naming
// --media-allow-loopback; with that flag it is created (issue 25: the
// default policy refused loopback images but not loopback listeners).
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
	addr, _ := simDaemon(t, nil)
	if code, body := subscribe(addr); code != "400" || !strings.Contains(body, "--media-allow-loopback") {
		t.Errorf("default flags: %s %s, want 400 naming --media-allow-loopback", code, body)
	}
	addr, _ = simDaemon(t, func(c *Config) { c.MediaAllowLoopback = true })
	if code, body := subscribe(addr); code != "201" {
		t.Errorf("--media-allow-loopback: %s %s, want 201", code, body)
	}
}
