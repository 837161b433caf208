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
	"time"
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

// The self-signed certificate is a leaf for the names asked for, not a
// 10-year CA (issue 15), and is renewed when it no longer fits.
func TestTLSSelfSignedIsALeafForItsAddress(t *testing.T) {
	dir := t.TempDir()
	cfg, err := TLSConfig(dir, "", "", "10.11.12.13", "bmc.lab.example")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cfg.Certificates[0].Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if leaf.IsCA || leaf.KeyUsage&x509.KeyUsageCertSign != 0 {
		t.Errorf("IsCA %v, key usage %b: want a leaf that signs no certificate", leaf.IsCA, leaf.KeyUsage)
	}
	if d := leaf.NotAfter.Sub(leaf.NotBefore); d > 400*24*time.Hour {
		t.Errorf("valid for %v, want about a year", d)
	}
	for _, name := range []string{"10.11.12.13", "bmc.lab.example", "127.0.0.1", "localhost"} {
		if err := leaf.VerifyHostname(name); err != nil {
			t.Errorf("SAN %s: %v", name, err)
		}
	}
	// Asked for another address, it is made again; asked for the same, kept.
	again, _ := TLSConfig(dir, "", "", "10.11.12.13")
	if !slices.Equal(again.Certificates[0].Certificate[0], leaf.Raw) {
		t.Errorf("a certificate that names the address was made again")
	}
	other, _ := TLSConfig(dir, "", "", "10.11.12.14")
	if slices.Equal(other.Certificates[0].Certificate[0], leaf.Raw) {
		t.Errorf("a certificate that does not name 10.11.12.14 was kept")
	}
}

// Only AEAD suites are offered for TLS 1.2 (issue 15: CBC-SHA1 was).
func TestTLSOffersNoCBC(t *testing.T) {
	cfg, err := TLSConfig(t.TempDir(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(http.NotFoundHandler())
	ts.TLS = cfg
	ts.StartTLS()
	defer ts.Close()
	for _, suite := range []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA} {
		c, err := tls.Dial("tcp", ts.Listener.Addr().String(), &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{suite}})
		if err == nil {
			c.Close()
			t.Errorf("%s accepted", tls.CipherSuiteName(suite))
		}
	}
	c, err := tls.Dial("tcp", ts.Listener.Addr().String(), &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("TLS 1.2 with the default suites: %v", err)
	}
	c.Close()
}
