package redfish

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestTLSSelfSignedIsGeneratedOnceAndKept(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	c1, err := TLSConfig(dir, "", "")
	if err != nil {
		t.Fatal(err)
	}
	c2, err := TLSConfig(dir, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c1.Certificates[0].Certificate[0], c2.Certificates[0].Certificate[0]) {
		t.Errorf("a second call made a new certificate")
	}
	leaf, err := x509.ParseCertificate(c1.Certificates[0].Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	for _, name := range []string{"localhost", host} {
		if err := leaf.VerifyHostname(name); err != nil {
			t.Errorf("SAN %s: %v", name, err)
		}
	}
	for _, ip := range []string{"127.0.0.1", "::1"} {
		if !slices.ContainsFunc(leaf.IPAddresses, func(a net.IP) bool { return a.Equal(net.ParseIP(ip)) }) {
			t.Errorf("no IP SAN %s in %v", ip, leaf.IPAddresses)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, selfSignedKey)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v %v", fi.Mode(), err)
	}

	// The user's own pair is used as given.
	c3, err := TLSConfig("", filepath.Join(dir, selfSignedCert), filepath.Join(dir, selfSignedKey))
	if err != nil || !slices.Equal(c3.Certificates[0].Certificate[0], leaf.Raw) {
		t.Errorf("user pair: %v", err)
	}
	if _, err := TLSConfig(dir, "only.crt", ""); err == nil {
		t.Errorf("a certificate without a key was accepted")
	}

	// A client that trusts the certificate reaches the service over HTTPS.
	f := newFixture(t, 1)
	ts := httptest.NewUnstartedServer(f.h)
	ts.TLS = c1
	ts.StartTLS()
	defer ts.Close()
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	cl := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := cl.Get(ts.URL + "/redfish/v1/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("HTTPS GET: %d", resp.StatusCode)
	}
}
