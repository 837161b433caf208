package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestCAIssuesServerCertificates: the CA's key is 0600 and the CA is
// reused; a server certificate it issues (to files or in memory) verifies
// for its SANs with the CA as the only root, and not for another name; a
// CA key others may read is refused.
func TestCAIssuesServerCertificates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "lab")
	now := time.Now()
	caCert, caKey := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	ca, err := EnsureCA(caCert, caKey, "bmlab lab CA", now)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(caKey); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("CA key mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	again, err := EnsureCA(caCert, caKey, "bmlab lab CA", now.Add(time.Hour))
	if err != nil || !again.Cert.Equal(ca.Cert) {
		t.Errorf("a second EnsureCA made a new CA (%v)", err)
	}
	srvCert, srvKey := filepath.Join(dir, "vbmcd.crt"), filepath.Join(dir, "vbmcd.key")
	if err := ca.IssueServer(srvCert, srvKey, []string{"192.0.2.10", "bmc.lab.example", "::1"}, now); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(srvKey); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("server key mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	pair, err := tls.LoadX509KeyPair(srvCert, srvKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for name, ok := range map[string]bool{"192.0.2.10": true, "bmc.lab.example": true, "::1": true, "192.0.2.11": false, "other.example": false} {
		_, err := leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: name})
		if (err == nil) != ok {
			t.Errorf("verify for %s: %v, want ok=%v", name, err, ok)
		}
	}
	other, err := EnsureCA(filepath.Join(dir, "o.crt"), filepath.Join(dir, "o.key"), "another CA", now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: other.Pool(), DNSName: "bmc.lab.example"}); err == nil {
		t.Errorf("another CA verifies the certificate")
	}
	// Issue: the same, kept in memory, with the chain a server sends.
	mem, err := ca.Issue([]string{"fd00::12"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(mem.Certificate) != 2 {
		t.Errorf("Issue's chain has %d certificates, want the server's and the CA's", len(mem.Certificate))
	}
	if _, err := mem.Leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "fd00::12"}); err != nil {
		t.Errorf("an issued in-memory certificate does not verify for its address: %v", err)
	}
	if err := os.Chmod(caKey, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureCA(caCert, caKey, "bmlab lab CA", now); !errors.Is(err, ErrKeyMode) {
		t.Errorf("a CA key readable by others: %v, want ErrKeyMode", err)
	}
}
