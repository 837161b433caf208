package main

import (
	"crypto/x509"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// On a host without CA certificates (as in vbmcd's image), vbmcd checks
// TLS certificates against the roots it carries: the system pool is
// Mozilla's (Let's Encrypt's ISRG Root X1 among them), not empty. The
// test runs itself again with the host's roots out of reach.
func TestRootsWithoutTheHostsCertificates(t *testing.T) {
	if os.Getenv("VBMCD_ROOTS_CHILD") != "" {
		pool, err := x509.SystemCertPool()
		if err != nil {
			t.Fatal(err)
		}
		//lint:ignore SA1019 the pool is the fallback's, not the platform's: Subjects lists it
		subjects := pool.Subjects()
		if !slices.ContainsFunc(subjects, func(s []byte) bool { return strings.Contains(string(s), "ISRG Root X1") }) || len(subjects) < 100 {
			t.Fatalf("the system pool on a host without certificates holds %d roots, without ISRG Root X1", len(subjects))
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRootsWithoutTheHostsCertificates$", "-test.count=1")
	cmd.Env = append(os.Environ(), "VBMCD_ROOTS_CHILD=1", "SSL_CERT_FILE=/nonexistent/ca.crt", "SSL_CERT_DIR=/nonexistent")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "PASS") {
		t.Fatalf("%v\n%s", err, out)
	}
}
