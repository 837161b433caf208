package vbmcd

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/bmlab/bmlab/internal/testenv"
)

// firstSystem is the path of the first system a sim daemon at base lists.
func firstSystem(t *testing.T, base string) string {
	t.Helper()
	r, _ := http.NewRequest("GET", base+"/redfish/v1/Systems", nil)
	r.SetBasicAuth("admin", "sim-pass-1")
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the daemon's self-signed certificate, on loopback
	resp, err := c.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var col struct {
		Members []struct {
			ID string `json:"@odata.id"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&col); err != nil || len(col.Members) == 0 {
		t.Fatalf("Systems: %v %+v", err, col)
	}
	return col.Members[0].ID
}

// A body over the limit is answered 413 PayloadTooLarge, and ordinary
// clients see that answer: python3-requests sends its whole body before it
// reads, so the refused body is read and thrown away (up to 32 MiB); curl
// asks "Expect: 100-continue" for a big body and is answered before it sends
// it. Issue 25: vbmcd answered 413 from Content-Length and closed the
// connection unread, and python3-requests got a connection reset (over
// HTTPS, vbmcd's default; over plain HTTP on loopback the kernel's buffers
// hid it). Fails before the fix: requests raises SSLError (EOF).
func TestBigBodyAnswered413(t *testing.T) {
	py := testenv.Python(t, "requests")
	curl := testenv.Command(t, "curl")
	addr, _ := simDaemon(t, func(c *Config) { c.InsecureHTTP = false })
	base := "https://" + addr
	reset := base + firstSystem(t, base) + "/Actions/ComputerSystem.Reset"
	const script = `
import sys, requests, urllib3
urllib3.disable_warnings()
body = b'{"ResetType": "' + b'x' * (12 * 1000 * 1000) + b'"}'
s = requests.Session()
for path in (sys.argv[1], sys.argv[2]):
    r = s.post(path, data=body, auth=("admin", "sim-pass-1"), headers={"Content-Type": "application/json"}, timeout=60, verify=False)
    print(r.status_code, r.json()["error"]["@Message.ExtendedInfo"][0]["MessageId"])
`
	login := base + "/redfish/v1/SessionService/Sessions"
	out, err := exec.Command(py, "-c", script, reset, login).CombinedOutput()
	if err != nil {
		t.Fatalf("python3-requests: %v\n%s", err, out)
	}
	want := "413 Base.1.16.0.PayloadTooLarge\n413 Base.1.16.0.PayloadTooLarge\n"
	if string(out) != want {
		t.Errorf("python3-requests POST of 12 MB to a Reset and a login: %q, want %q", out, want)
	}

	// curl sends "Expect: 100-continue" with a big body: the 413 comes
	// before the body, which is never sent; over HTTP/2 (what curl picks
	// over TLS) the answer ends the stream.
	body := `{"ResetType": "` + strings.Repeat("x", 12_000_000) + `"}`
	for _, proto := range []string{"--http1.1", "--http2"} {
		cmd := exec.Command(curl, "-sSk", proto, "-u", "admin:sim-pass-1", "-H", "Content-Type: application/json",
			"--data-binary", "@-", "-o", "/dev/null", "-w", "%{http_code} %{size_upload}", reset)
		cmd.Stdin = strings.NewReader(body)
		out, err = cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("curl %s: %v\n%s", proto, err, out)
		}
		var code, sent int
		if _, err := fmt.Sscan(string(out), &code, &sent); err != nil || code != 413 || sent >= len(body)/2 {
			t.Errorf("curl %s POST of 12 MB: %q (status, bytes sent), want 413 before most of the body was sent", proto, out)
		}
	}
}
