package up_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/bmlab/bmlab/internal/ipi"
	"github.com/bmlab/bmlab/internal/netplumb"
)

// labUp runs `labctl up --until until` with the lab's flags (common), once
// `labctl down` with the same flags is set to run at the test's end, and
// returns up's output; a failed up fails the test with that output.
func labUp(t *testing.T, until string, common ...string) string {
	t.Helper()
	t.Cleanup(func() { _, _ = labctlRun(t, append([]string{"down"}, common...)...) })
	out, err := labctlRun(t, append([]string{"up", "--until", until}, common...)...)
	if err != nil {
		t.Fatalf("up --until %s: %v\n%s", until, err, out)
	}
	return out
}

// installConfig reads the install-config.yaml that `labctl up` wrote in
// the lab's directory (dir/install).
func installConfig(t *testing.T, dir string) ipi.InstallConfig {
	t.Helper()
	var ic ipi.InstallConfig
	path := filepath.Join(dir, "install", "install-config.yaml")
	if err := yaml.Unmarshal([]byte(readFile(t, path)), &ic); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return ic
}

// statusJSON runs `labctl status -o json` with the lab's flags and decodes
// the JSON it prints (after any status lines) into st.
func statusJSON(t *testing.T, st any, common ...string) {
	t.Helper()
	out, err := labctlRun(t, append([]string{"status", "-o", "json"}, common...)...)
	if err != nil {
		t.Fatalf("status -o json: %v\n%s", err, out)
	}
	i := strings.Index(out, "{")
	if i < 0 {
		t.Fatalf("status -o json printed no JSON:\n%s", out)
	}
	if err := json.Unmarshal([]byte(out[i:]), st); err != nil {
		t.Fatalf("status -o json: %v\n%s", err, out)
	}
}

// labClient is an HTTP client whose connections start inside the network
// namespace ns (labci: where the nodes reach their BMCs), with tlsc for
// HTTPS (nil: plain HTTP only).
func labClient(ns string, timeout time.Duration, tlsc *tls.Config) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DialContext: netplumb.DialContextIn(ns), TLSClientConfig: tlsc}}
}

// labCA is a pool that holds the lab's CA certificate (the plan's
// Paths.CACert).
func labCA(t *testing.T, path string) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(readFile(t, path))) {
		t.Fatalf("no certificate in the lab CA %s", path)
	}
	return pool
}

// redfishSend sends method to url with the BMC user's basic auth and, when
// body is not empty, that JSON body; it returns the answer's status code and
// body. A request that gets no answer fails the test.
func redfishSend(t *testing.T, hc *http.Client, method, url, user, pass, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	req.SetBasicAuth(user, pass)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read the answer: %v", method, url, err)
	}
	return resp.StatusCode, b
}

// getObject GETs a Redfish resource and decodes it; an answer other than
// 200 with a JSON object fails the test.
func getObject(t *testing.T, hc *http.Client, url, user, pass string) map[string]any {
	t.Helper()
	code, body := redfishSend(t, hc, http.MethodGet, url, user, pass, "")
	var o map[string]any
	if code != http.StatusOK || json.Unmarshal(body, &o) != nil {
		t.Fatalf("GET %s: %d %s", url, code, body)
	}
	return o
}
