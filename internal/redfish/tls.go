package redfish

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Names of the self-signed pair in the state directory.
const (
	selfSignedCert = "redfish-tls.crt"
	selfSignedKey  = "redfish-tls.key"
)

// TLSConfig returns the TLS configuration of the service: the user's
// certificate and key when both are given, else a self-signed ECDSA pair
// kept in stateDir, generated on the first call and reused afterwards (so
// clients that pinned it keep working across restarts). The self-signed
// certificate names 127.0.0.1, ::1, localhost and the host name.
func TLSConfig(stateDir, certFile, keyFile string) (*tls.Config, error) {
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
		if err := ensureSelfSigned(certFile, keyFile); err != nil {
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
	}, nil
}

// ensureSelfSigned writes a self-signed pair unless both files exist.
func ensureSelfSigned(certFile, keyFile string) error {
	_, errC := os.Stat(certFile)
	_, errK := os.Stat(keyFile)
	if errC == nil && errK == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(certFile), 0o700); err != nil {
		return fmt.Errorf("TLS: state directory: %w", err)
	}
	certPEM, keyPEM, err := selfSigned(time.Now())
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

func selfSigned(now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("TLS: generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, fmt.Errorf("TLS: serial: %w", err)
	}
	dns := []string{"localhost"}
	if h, err := os.Hostname(); err == nil && h != "" && h != "localhost" {
		dns = append(dns, h)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "bmlab vbmcd", Organization: []string{"bmlab"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              dns,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("TLS: create certificate: %w", err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("TLS: encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
}

func writeAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("TLS: write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("TLS: write %s: %w", path, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("TLS: write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("TLS: write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("TLS: write %s: %w", path, err)
	}
	return nil
}
