package kubetest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/bmlab/bmlab/internal/testenv"
)

// Server is a running kube-apiserver with its etcd.
type Server struct {
	// URL is the API server's https address on 127.0.0.1.
	URL string
	// Token authenticates as a member of system:masters.
	Token string
	// CA is the PEM certificate that signed the server's certificate.
	CA []byte
	// Kubeconfig is a file that reaches the server as that user.
	Kubeconfig string

	dir        string
	caKey      *ecdsa.PrivateKey
	caCert     *x509.Certificate
	etcdURL    string
	apiPort    int
	log        *testenv.Buffer
	etcd, kube *exec.Cmd
	t          testing.TB
}

// Binaries returns the paths of kube-apiserver and etcd, requiring them.
func Binaries(t testing.TB) (apiserver, etcd string) {
	t.Helper()
	testenv.Integration(t)
	dir := filepath.Join(testenv.RepoRoot(), "_out", "tools")
	apiserver, etcd = filepath.Join(dir, "kube-apiserver"), filepath.Join(dir, "etcd")
	for _, p := range []string{apiserver, etcd} {
		_, err := os.Stat(p)
		testenv.Require(t, err == nil, p+" (hack/build-kube.sh builds it)")
	}
	return apiserver, etcd
}

// Start starts etcd and kube-apiserver and waits until the API server is
// ready. Both stop when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	kubeBin, etcdBin := Binaries(t)
	dir := t.TempDir()
	s := &Server{dir: dir, log: &testenv.Buffer{}, t: t}
	tok := make([]byte, 16)
	rand.Read(tok)
	s.Token = hex.EncodeToString(tok)
	if err := s.writeFiles(); err != nil {
		t.Fatal(err)
	}
	etcdPort, peerPort := testenv.Port(t, "127.0.0.1"), testenv.Port(t, "127.0.0.1")
	s.etcdURL = "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	s.etcd = exec.Command(etcdBin,
		"--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", s.etcdURL, "--advertise-client-urls", s.etcdURL,
		"--listen-peer-urls", "http://127.0.0.1:"+strconv.Itoa(peerPort),
		"--initial-advertise-peer-urls", "http://127.0.0.1:"+strconv.Itoa(peerPort),
		"--initial-cluster", "default=http://127.0.0.1:"+strconv.Itoa(peerPort),
		"--unsafe-no-fsync", "--log-level", "warn")
	s.etcd.Stdout, s.etcd.Stderr = s.log, s.log
	if err := s.etcd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(s.etcd) })
	s.apiPort = testenv.Port(t, "127.0.0.1")
	s.URL = "https://127.0.0.1:" + strconv.Itoa(s.apiPort)
	s.kube = s.apiserverCmd(kubeBin)
	if err := s.kube.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(s.kube) })
	s.WaitReady(t, 90*time.Second)
	return s
}

func (s *Server) apiserverCmd(bin string) *exec.Cmd {
	d := s.dir
	c := exec.Command(bin,
		"--etcd-servers", s.etcdURL,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(s.apiPort),
		"--tls-cert-file", filepath.Join(d, "apiserver.crt"),
		"--tls-private-key-file", filepath.Join(d, "apiserver.key"),
		"--client-ca-file", filepath.Join(d, "ca.crt"),
		"--token-auth-file", filepath.Join(d, "tokens.csv"),
		"--authorization-mode", "RBAC",
		"--service-account-issuer", "https://127.0.0.1",
		"--service-account-key-file", filepath.Join(d, "sa.pub"),
		"--service-account-signing-key-file", filepath.Join(d, "sa.key"),
		"--service-cluster-ip-range", "10.0.0.0/24",
		"--allow-privileged",
		"--enable-priority-and-fairness=false",
		"--endpoint-reconciler-type", "none",
		"--v", "0")
	c.Stdout, c.Stderr = s.log, s.log
	return c
}

// Log returns what etcd and kube-apiserver printed so far.
func (s *Server) Log() string { return s.log.String() }

// RestConfig returns a client configuration for the server.
func (s *Server) RestConfig() *rest.Config {
	return &rest.Config{
		Host:            s.URL,
		BearerToken:     s.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: s.CA},
		QPS:             -1, // no client-side throttling in tests
	}
}

// WaitReady waits until /readyz answers 200.
func (s *Server) WaitReady(t testing.TB, timeout time.Duration) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.CA)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	deadline := time.Now().Add(timeout)
	for {
		req, _ := http.NewRequest("GET", s.URL+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+s.Token)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("kube-apiserver not ready after %s (last: %v)\n%s", timeout, err, s.Log())
		}
		if s.kube.ProcessState != nil {
			t.Fatalf("kube-apiserver exited\n%s", s.Log())
		}
		time.Sleep(100 * time.Millisecond) // polling a readiness endpoint
	}
}

// KillAPIServer kills kube-apiserver with SIGKILL, as a crash, and waits
// until it is gone (etcd keeps running). A SIGINT would not do for an
// outage: kube-apiserver's graceful shutdown keeps serving for seconds.
func (s *Server) KillAPIServer() {
	if s.kube.Process == nil || s.kube.ProcessState != nil {
		return
	}
	s.kube.Process.Kill()
	s.kube.Wait()
}

// StartAPIServer starts kube-apiserver again on the same port and waits
// until it is ready.
func (s *Server) StartAPIServer(t testing.TB) {
	t.Helper()
	kubeBin, _ := Binaries(t)
	s.kube = s.apiserverCmd(kubeBin)
	if err := s.kube.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(s.kube) })
	s.WaitReady(t, 90*time.Second)
}

func stop(c *exec.Cmd) {
	if c.Process == nil || c.ProcessState != nil {
		return
	}
	c.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { c.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		c.Process.Kill()
		<-done
	}
}

// writeFiles writes the CA, the serving certificate, the service account
// key pair, the token file and a kubeconfig into s.dir.
func (s *Server) writeFiles() error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubetest-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	ca, _ := x509.ParseCertificate(caDER)
	s.caKey, s.caCert = caKey, ca
	srvDER, srvKeyDER, err := s.issue(srvTmpl)
	if err != nil {
		return err
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	saPub, _ := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	s.CA = pemBlock("CERTIFICATE", caDER)
	files := map[string][]byte{
		"ca.crt":        s.CA,
		"apiserver.crt": pemBlock("CERTIFICATE", srvDER),
		"apiserver.key": pemBlock("EC PRIVATE KEY", srvKeyDER),
		"sa.key":        pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey)),
		"sa.pub":        pemBlock("PUBLIC KEY", saPub),
		"tokens.csv":    fmt.Appendf(nil, "%s,admin,admin-uid,system:masters\n", s.Token),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(s.dir, name), b, 0o600); err != nil {
			return err
		}
	}
	s.Kubeconfig = filepath.Join(s.dir, "kubeconfig")
	return s.WriteKubeconfig(s.Kubeconfig, s.URL, s.CA)
}

// WriteKubeconfig writes a kubeconfig for the admin token that reaches
// server (whose certificate ca signed) to path.
func (s *Server) WriteKubeconfig(path, server string, ca []byte) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: s.Token}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin"}
	cfg.CurrentContext = "test"
	return clientcmd.WriteToFile(*cfg, path)
}

// issue makes a key and a certificate of tmpl signed by the CA.
func (s *Server) issue(tmpl *x509.Certificate) (der, keyDER []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err = x509.CreateCertificate(rand.Reader, tmpl, s.caCert, &key.PublicKey, s.caKey)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err = x509.MarshalECPrivateKey(key)
	return der, keyDER, err
}

// ServingCert returns a certificate for 127.0.0.1 signed by the server's
// CA, for a server the test puts in front of or beside kube-apiserver.
func (s *Server) ServingCert(t testing.TB) tls.Certificate {
	t.Helper()
	now := time.Now()
	der, keyDER, err := s.issue(&x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: "kubetest-serving"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := tls.X509KeyPair(pemBlock("CERTIFICATE", der), pemBlock("EC PRIVATE KEY", keyDER))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func pemBlock(typ string, der []byte) []byte {
	var b bytes.Buffer
	pem.Encode(&b, &pem.Block{Type: typ, Bytes: der})
	return b.Bytes()
}
