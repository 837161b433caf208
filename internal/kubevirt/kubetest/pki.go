package kubetest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"testing"
	"time"
)

// CA is a certificate authority of a test: the API server's, the
// aggregation layer's front proxy's, KubeVirt's.
type CA struct {
	// PEM is the CA's certificate.
	PEM  []byte
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// NewCA makes a CA named cn, valid for a day.
func NewCA(t testing.TB, cn string) *CA {
	t.Helper()
	der, key := certify(t, &x509.Certificate{
		Subject: pkix.Name{CommonName: cn},
		IsCA:    true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}, nil)
	cert, _ := x509.ParseCertificate(der)
	return &CA{PEM: pemBlock("CERTIFICATE", der), cert: cert, key: key}
}

// certify makes a P-256 key and a certificate for it from tmpl, valid
// for a day (from an hour ago), signed by ca (by itself when ca is nil).
func certify(t testing.TB, tmpl *x509.Certificate, ca *CA) ([]byte, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl.SerialNumber, tmpl.NotBefore, tmpl.NotAfter = serial(), now.Add(-time.Hour), now.Add(24*time.Hour)
	parent, signer := tmpl, key
	if ca != nil {
		parent, signer = ca.cert, ca.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	return der, key
}

// Leaf says what a certificate is for.
type Leaf struct {
	CN     string
	Groups []string // the subject's organizations (Kubernetes groups)
	IPs    []net.IP
	DNS    []string
	Server bool // server authentication
	Client bool // client authentication
}

// Issue makes a key and a certificate for l signed by ca, as PEM.
func (ca *CA) Issue(t testing.TB, l Leaf) (certPEM, keyPEM []byte) {
	t.Helper()
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: l.CN, Organization: l.Groups},
		IPAddresses: l.IPs, DNSNames: l.DNS, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	if l.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if l.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, key := certify(t, tmpl, ca)
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pemBlock("CERTIFICATE", der), pemBlock("EC PRIVATE KEY", keyDER)
}

// IssueFiles issues a certificate for l and writes it and its key to
// certFile and keyFile.
func (ca *CA) IssueFiles(t testing.TB, l Leaf, certFile, keyFile string) {
	t.Helper()
	c, k := ca.Issue(t, l)
	if err := os.WriteFile(certFile, c, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, k, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TLSCert issues a certificate for l as a tls.Certificate.
func (ca *CA) TLSCert(t testing.TB, l Leaf) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(ca.Issue(t, l))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Pool is a pool holding only the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}

func pemBlock(typ string, der []byte) []byte {
	var b bytes.Buffer
	_ = pem.Encode(&b, &pem.Block{Type: typ, Bytes: der})
	return b.Bytes()
}
