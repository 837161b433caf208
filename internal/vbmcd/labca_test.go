package vbmcd

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/pki"
	"github.com/bmlab/bmlab/internal/testenv"
)

// TestSushyVerifiesLabCA: vbmcd serves a certificate issued by a lab CA
// (internal/pki) with the BMC address as SAN; python3-sushy with
// verify=<the CA> accepts it, and refuses vbmcd's own self-signed
// certificate. The TLS policy flags hold: with --tls-min-version 1.3 a
// TLS 1.2 client is refused, and --tls-cipher-suites limits TLS 1.2 to the
// suites named.
func TestSushyVerifiesLabCA(t *testing.T) {
	testenv.Integration(t)
	py := testenv.Python(t, "sushy")
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	ca, err := pki.EnsureCA(caFile, filepath.Join(dir, "ca.key"), "bmlab test lab CA", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, key := filepath.Join(dir, "vbmcd.crt"), filepath.Join(dir, "vbmcd.key")
	if err := ca.IssueServer(cert, key, []string{"127.0.0.1"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	run := func(addr string) (out struct {
		Systems int
		Error   string
	}) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, py, "testdata/sushy_tls.py", "https://"+addr, "admin", "sim-pass-1", "-", "systems")
		// Nothing but verify=<CA> decides what is trusted.
		cmd.Env = []string{"SUSHY_VERIFY=" + caFile}
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "REQUESTS_CA_BUNDLE=") && !strings.HasPrefix(kv, "CURL_CA_BUNDLE=") && !strings.HasPrefix(kv, "SSL_CERT_") && !strings.HasPrefix(kv, "SUSHY_VERIFY=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		b, err := cmd.CombinedOutput()
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if err != nil || json.Unmarshal([]byte(lines[len(lines)-1]), &out) != nil {
			t.Fatalf("sushy_tls.py against %s: %v\n%s", addr, err, b)
		}
		return out
	}

	labAddr, _ := simDaemon(t, func(c *Config) {
		c.InsecureHTTP, c.TLSCert, c.TLSKey = false, cert, key
		c.TLSCipherSuites = []string{"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}
	})
	if got := run(labAddr); got.Error != "" || got.Systems != 2 {
		t.Errorf("sushy verify=<lab CA> against a lab-CA certificate: %+v, want 2 systems", got)
	}
	selfAddr, _ := simDaemon(t, func(c *Config) { c.InsecureHTTP, c.TLSMinVersion = false, "1.3" })
	if got := run(selfAddr); got.Error == "" || !strings.Contains(got.Error, "CERTIFICATE_VERIFY_FAILED") {
		t.Errorf("sushy verify=<lab CA> against a self-signed certificate: %+v, want a verification failure", got)
	}

	// The policy: TLS 1.2 only with the named suite on the first; 1.3 only
	// on the second.
	try := func(addr string, tc *tls.Config) error {
		tc.InsecureSkipVerify = true //nolint:gosec // the handshake's parameters are tested, not the certificate
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
		resp, err := c.Get("https://" + addr + "/redfish/v1/")
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := try(labAddr, &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}}); err != nil {
		t.Errorf("TLS 1.2 with the named suite: %v", err)
	}
	if err := try(labAddr, &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384}}); err == nil {
		t.Errorf("TLS 1.2 with a suite not named was accepted")
	}
	if err := try(selfAddr, &tls.Config{MaxVersion: tls.VersionTLS12}); err == nil {
		t.Errorf("TLS 1.2 accepted with --tls-min-version 1.3")
	}
	if err := try(selfAddr, &tls.Config{MinVersion: tls.VersionTLS13}); err != nil {
		t.Errorf("TLS 1.3 with --tls-min-version 1.3: %v", err)
	}
}
