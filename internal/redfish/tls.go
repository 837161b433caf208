package redfish

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/bmlab/bmlab/internal/pki"
)

// Names of the self-signed pair in the state directory.
const (
	selfSignedCert = "redfish-tls.crt"
	selfSignedKey  = "redfish-tls.key"
)

// TLSConfig returns the TLS configuration of the service: TLS 1.2 or later
// with AEAD cipher suites only, and the user's certificate and key when both
// are given, else a self-signed ECDSA pair kept in stateDir, generated on the
// first call and reused afterwards (so clients that pinned it keep working
// across restarts) while it is valid for another 30 days and names every
// SAN asked for. The self-signed certificate is a leaf (not a CA: it signs
// nothing), valid for selfSignedDays, and names 127.0.0.1, ::1, localhost,
// the host name and sans (host names or IP addresses, such as the listen
// address and vbmcd's --tls-san).
func TLSConfig(stateDir, certFile, keyFile string, sans ...string) (*tls.Config, error) {
	switch {
	case certFile != "" && keyFile != "":
	case certFile != "" || keyFile != "":
		return nil, errors.New("TLS: give both a certificate and a key, or neither")
	default:
		if stateDir == "" {
			return nil, errors.New("TLS: no certificate given and no state directory to keep a self-signed one")
		}
		certFile = filepath.Join(stateDir, selfSignedCert)
		keyFile = filepath.Join(stateDir, selfSignedKey)
		if err := ensureSelfSigned(certFile, keyFile, sans, time.Now()); err != nil {
			return nil, err
		}
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS: load %s: %w", certFile, err)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{pair},
		MinVersion:   tls.VersionTLS12,
		CipherSuites: aeadSuites, // TLS 1.3's are all AEAD and not configurable
	}, nil
}

// aeadSuites are the TLS 1.2 suites offered: forward secret and AEAD only
// (no CBC, no SHA-1 MAC, no RSA key exchange).
var aeadSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// selfSignedDays is the self-signed certificate's validity; it is renewed
// when fewer than 30 days are left.
const selfSignedDays = 365

// ensureSelfSigned writes a self-signed pair unless both files exist and
// the certificate is still good: a leaf, valid for 30 more days, naming
// every SAN in sans.
func ensureSelfSigned(certFile, keyFile string, sans []string, now time.Time) error {
	_, errK := os.Stat(keyFile)
	if b, err := os.ReadFile(certFile); err == nil && errK == nil && stillGood(b, sans, now) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(certFile), 0o700); err != nil {
		return fmt.Errorf("TLS: state directory: %w", err)
	}
	certPEM, keyPEM, err := selfSigned(now, sans...)
	if err != nil {
		return err
	}
	// The key first, private; then the certificate, which marks the pair
	// complete.
	if err := writeAtomic(keyFile, keyPEM, 0o600); err != nil {
		return err
	}
	return writeAtomic(certFile, certPEM, 0o644)
}

// stillGood reports whether a kept self-signed certificate may be reused.
func stillGood(certPEM []byte, sans []string, now time.Time) bool {
	b, _ := pem.Decode(certPEM)
	if b == nil {
		return false
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil || c.IsCA || now.Add(30*24*time.Hour).After(c.NotAfter) {
		return false // an older version's CA, or about to expire
	}
	for _, san := range sans {
		if ip := net.ParseIP(san); ip != nil {
			if !slices.ContainsFunc(c.IPAddresses, ip.Equal) {
				return false
			}
		} else if !slices.Contains(c.DNSNames, san) {
			return false
		}
	}
	return true
}

func selfSigned(now time.Time, sans ...string) (certPEM, keyPEM []byte, err error) {
	all := []string{"localhost", "127.0.0.1", "::1"}
	if h, err := os.Hostname(); err == nil && h != "" {
		all = append(all, h)
	}
	certPEM, keyPEM, err = pki.SelfSigned(append(all, sans...), now, selfSignedDays*24*time.Hour)
	if err != nil {
		return nil, nil, fmt.Errorf("TLS: %w", err)
	}
	return certPEM, keyPEM, nil
}

func writeAtomic(path string, data []byte, mode os.FileMode) error {
	if err := pki.WriteFile(path, data, mode); err != nil {
		return fmt.Errorf("TLS: %w", err)
	}
	return nil
}
