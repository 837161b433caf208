package pki

import (
	"crypto"
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
	"slices"
	"time"
)

// Validity of what the package makes.
const (
	CAValidity     = 10 * 365 * 24 * time.Hour
	ServerValidity = 2 * 365 * 24 * time.Hour
	// renewBefore is how long before its end a CA or certificate is no
	// longer reused.
	renewBefore = 30 * 24 * time.Hour
)

// ErrKeyMode refuses a CA key that others may read.
var ErrKeyMode = errors.New("CA key is readable by others")

// CA is a certificate authority: its certificate and key.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	key     crypto.Signer
}

// EnsureCA loads the CA kept in certFile and keyFile, or makes one named
// name when either is missing or the CA ends within 30 days. The key is
// written 0600 (and its directory made 0700); an existing key that group
// or others may read is refused with ErrKeyMode.
func EnsureCA(certFile, keyFile, name string, now time.Time) (*CA, error) {
	ca, err := LoadCA(certFile, keyFile)
	switch {
	case err == nil && now.Add(renewBefore).Before(ca.Cert.NotAfter):
		return ca, nil
	case err == nil, errors.Is(err, os.ErrNotExist):
	default:
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"bmlab"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true, // it signs servers, never other CAs
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	if err := writeKey(keyFile, key); err != nil {
		return nil, err
	}
	if err := WriteFile(certFile, pemCert(der), 0o644); err != nil {
		return nil, err
	}
	return LoadCA(certFile, keyFile)
}

// LoadCA reads a CA's certificate and key (PEM; the key PKCS#8 or SEC 1).
func LoadCA(certFile, keyFile string) (*CA, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("read CA certificate: %w", err)
	}
	fi, err := os.Stat(keyFile)
	if err != nil {
		return nil, fmt.Errorf("read CA key: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %v; chmod 600 it", ErrKeyMode, keyFile, fi.Mode().Perm())
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("read CA key: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("CA %s: %w", certFile, err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("CA %s: %w", certFile, err)
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("%s is not a CA certificate", certFile)
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("CA key %s cannot sign", keyFile)
	}
	return &CA{Cert: cert, CertPEM: certPEM, key: signer}, nil
}

// Pool is a certificate pool holding the CA, for clients.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// IssueServer writes a server certificate for sans (IP addresses or DNS
// names; at least one) signed by the CA to certFile, and its key (0600) to
// keyFile. The certificate file holds the server's certificate then the
// CA's, the chain a TLS server sends.
func (ca *CA) IssueServer(certFile, keyFile string, sans []string, now time.Time) error {
	certPEM, keyPEM, err := ca.issue(sans, now)
	if err != nil {
		return err
	}
	if err := WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return err
	}
	return WriteFile(certFile, append(certPEM, ca.CertPEM...), 0o644)
}

// Issue makes a server certificate for sans signed by the CA, kept in
// memory only: the pair a TLS server serves, its chain the server's
// certificate then the CA's.
func (ca *CA) Issue(sans []string, now time.Time) (tls.Certificate, error) {
	certPEM, keyPEM, err := ca.issue(sans, now)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(append(certPEM, ca.CertPEM...), keyPEM)
}

// issue makes a server certificate for sans, valid for ServerValidity
// and never beyond the CA.
func (ca *CA) issue(sans []string, now time.Time) (certPEM, keyPEM []byte, err error) {
	notAfter := now.Add(ServerValidity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	return leaf(sans, now, notAfter, ca)
}

// SelfSigned makes a self-signed server certificate (a leaf: it signs
// nothing) for sans, valid for validity from now, and its key; PEM both.
func SelfSigned(sans []string, now time.Time, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	return leaf(sans, now, now.Add(validity), nil)
}

// leaf makes a server certificate for sans and its key, signed by ca, or
// by itself when ca is nil.
func leaf(sans []string, now, notAfter time.Time, ca *CA) (certPEM, keyPEM []byte, err error) {
	var ips []net.IP
	var dns []string
	for _, s := range sans {
		if ip := net.ParseIP(s); ip != nil {
			if !slices.ContainsFunc(ips, ip.Equal) {
				ips = append(ips, ip)
			}
		} else if s != "" && !slices.Contains(dns, s) {
			dns = append(dns, s)
		}
	}
	if len(ips)+len(dns) == 0 {
		return nil, nil, errors.New("server certificate: no address or name to issue it for")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("server key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "bmlab vbmcd", Organization: []string{"bmlab"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  false,
		DNSNames:              dns,
		IPAddresses:           ips,
	}
	parent, signer := tmpl, crypto.Signer(key)
	if ca != nil {
		parent, signer = ca.Cert, ca.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		return nil, nil, fmt.Errorf("server certificate: %w", err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encode key: %w", err)
	}
	return pemCert(der), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
}

func newSerial() (*big.Int, error) {
	s, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	return s, nil
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("encode key: %w", err)
	}
	return WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}

// WriteFile replaces path with data atomically, with mode from the start
// (a key is never readable by others, not even for a moment), making its
// directory (0700) when missing.
func WriteFile(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*") // made 0600
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(mode)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
