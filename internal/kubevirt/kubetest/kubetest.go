package kubetest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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
	// Dir is the test's directory of the server's files.
	Dir string

	ca         *CA
	frontProxy *CA
	etcdURL    string
	apiPort    int
	log        *testenv.Buffer
	etcd, kube *exec.Cmd
	t          testing.TB
}

// ToolsDir is where hack/build-kube.sh links the binaries the KubeVirt
// tests run (from the tool cache).
func ToolsDir() string { return filepath.Join(testenv.RepoRoot(), "_out", "tools") }

// Tool requires a binary hack/build-kube.sh builds and returns its path.
func Tool(t testing.TB, name string) string {
	t.Helper()
	testenv.Integration(t)
	p := filepath.Join(ToolsDir(), name)
	_, err := os.Stat(p)
	testenv.Require(t, err == nil, p+" (hack/build-kube.sh builds it)")
	return p
}

// Start starts etcd and kube-apiserver and waits until the API server is
// ready. Both stop when the test ends. The API server authorizes with
// RBAC, authenticates bearer tokens (the admin's, service accounts'
// TokenRequest tokens) and client certificates, and has the aggregation
// layer set up (a front proxy CA and client certificate), so extension API
// servers (KubeVirt's virt-api) can be registered with an APIService.
func Start(t testing.TB) *Server {
	t.Helper()
	kubeBin, etcdBin := Tool(t, "kube-apiserver"), Tool(t, "etcd")
	dir := t.TempDir()
	s := &Server{Dir: dir, log: &testenv.Buffer{}, t: t}
	tok := make([]byte, 16)
	_, _ = rand.Read(tok)
	s.Token = hex.EncodeToString(tok)
	s.writeFiles(t)
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
	t.Cleanup(func() { Stop(s.etcd) })
	s.apiPort = testenv.Port(t, "127.0.0.1")
	s.URL = "https://127.0.0.1:" + strconv.Itoa(s.apiPort)
	s.kube = s.apiserverCmd(kubeBin)
	if err := s.kube.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Stop(s.kube) })
	s.WaitReady(t, 90*time.Second)
	s.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := s.WriteKubeconfig(s.Kubeconfig, s.URL, s.Token); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *Server) apiserverCmd(bin string) *exec.Cmd {
	d := s.Dir
	f := func(name string) string { return filepath.Join(d, name) }
	c := exec.Command(bin,
		"--etcd-servers", s.etcdURL,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(s.apiPort),
		"--tls-cert-file", f("apiserver.crt"),
		"--tls-private-key-file", f("apiserver.key"),
		"--client-ca-file", f("ca.crt"),
		"--token-auth-file", f("tokens.csv"),
		"--authorization-mode", "RBAC",
		"--service-account-issuer", "https://127.0.0.1",
		"--service-account-key-file", f("sa.pub"),
		"--service-account-signing-key-file", f("sa.key"),
		"--service-cluster-ip-range", "10.0.0.0/24",
		// The aggregation layer: kube-apiserver proxies an APIService's
		// group to its server with this client certificate, which the
		// extension server trusts through the front proxy CA it reads
		// from the configmap kube-system/extension-apiserver-authentication.
		"--requestheader-client-ca-file", f("front-proxy-ca.crt"),
		"--requestheader-allowed-names", "front-proxy-client",
		"--requestheader-username-headers", "X-Remote-User",
		"--requestheader-group-headers", "X-Remote-Group",
		"--requestheader-extra-headers-prefix", "X-Remote-Extra-",
		"--proxy-client-cert-file", f("front-proxy-client.crt"),
		"--proxy-client-key-file", f("front-proxy-client.key"),
		"--allow-privileged",
		"--enable-priority-and-fairness=false",
		"--endpoint-reconciler-type", "none",
		"--v", "0")
	c.Stdout, c.Stderr = s.log, s.log
	return c
}

// Log returns what etcd and kube-apiserver printed so far.
func (s *Server) Log() string { return s.log.String() }

// RestConfig returns a client configuration for the server as the admin
// (system:masters).
func (s *Server) RestConfig() *rest.Config { return s.configFor(s.Token) }

func (s *Server) configFor(token string) *rest.Config {
	return &rest.Config{
		Host:            s.URL,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: s.CA},
		QPS:             -1, // no client-side throttling in tests
	}
}

// Clientset is a client of the core API groups as the admin.
func (s *Server) Clientset(t testing.TB) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(s.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// EnsureNamespace makes namespace ns, with the ServiceAccount "default"
// kube-controller-manager would make in it (pods need it).
func (s *Server) EnsureNamespace(t testing.TB, ns string) {
	t.Helper()
	cs := s.Clientset(t)
	ctx := context.Background()
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
	s.EnsureServiceAccount(t, ns, "default")
}

// EnsureServiceAccount makes ServiceAccount ns/name unless it is there.
func (s *Server) EnsureServiceAccount(t testing.TB, ns, name string) {
	t.Helper()
	_, err := s.Clientset(t).CoreV1().ServiceAccounts(ns).Create(context.Background(),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create ServiceAccount %s/%s: %v", ns, name, err)
	}
}

// ServiceAccountConfig returns a client configuration that authenticates
// as ServiceAccount ns/name, with a token the API server issued for it
// (TokenRequest, valid for the day), as a pod of that account has. The
// account must exist.
func (s *Server) ServiceAccountConfig(t testing.TB, ns, name string) *rest.Config {
	t.Helper()
	day := int64(24 * 3600)
	tr, err := s.Clientset(t).CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &day}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for ServiceAccount %s/%s: %v", ns, name, err)
	}
	return s.configFor(tr.Status.Token)
}

// ServiceAccountKubeconfig writes a kubeconfig for ServiceAccount ns/name
// (see ServiceAccountConfig) into the test's directory and returns its
// path.
func (s *Server) ServiceAccountKubeconfig(t testing.TB, ns, name string) string {
	t.Helper()
	c := s.ServiceAccountConfig(t, ns, name)
	p := filepath.Join(t.TempDir(), "kubeconfig-"+ns+"-"+name)
	if err := s.WriteKubeconfig(p, s.URL, c.BearerToken); err != nil {
		t.Fatal(err)
	}
	return p
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
	_ = s.kube.Process.Kill()
	_ = s.kube.Wait()
}

// StartAPIServer starts kube-apiserver again on the same port and waits
// until it is ready.
func (s *Server) StartAPIServer(t testing.TB) {
	t.Helper()
	s.kube = s.apiserverCmd(Tool(t, "kube-apiserver"))
	if err := s.kube.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Stop(s.kube) })
	s.WaitReady(t, 90*time.Second)
}

// Stop interrupts a command and waits for it, killing it after 10 s.
func Stop(c *exec.Cmd) {
	if c.Process == nil || c.ProcessState != nil {
		return
	}
	_ = c.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = c.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.Process.Kill()
		<-done
	}
}

// writeFiles writes the CAs, the serving certificate, the front proxy's
// client certificate, the service account key pair and the token file
// into s.Dir.
func (s *Server) writeFiles(t testing.TB) {
	t.Helper()
	s.ca = NewCA(t, "kubetest-ca")
	s.frontProxy = NewCA(t, "kubetest-front-proxy-ca")
	s.CA = s.ca.PEM
	f := func(name string) string { return filepath.Join(s.Dir, name) }
	s.ca.IssueFiles(t, Leaf{CN: "kube-apiserver", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, DNS: []string{"localhost"}, Server: true},
		f("apiserver.crt"), f("apiserver.key"))
	s.frontProxy.IssueFiles(t, Leaf{CN: "front-proxy-client", Client: true}, f("front-proxy-client.crt"), f("front-proxy-client.key"))
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	saPub, _ := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	files := map[string][]byte{
		"ca.crt":             s.CA,
		"front-proxy-ca.crt": s.frontProxy.PEM,
		"sa.key":             pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey)),
		"sa.pub":             pemBlock("PUBLIC KEY", saPub),
		"tokens.csv":         fmt.Appendf(nil, "%s,admin,admin-uid,system:masters\n", s.Token),
	}
	for name, b := range files {
		if err := os.WriteFile(f(name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// WriteKubeconfig writes a kubeconfig that reaches server (whose
// certificate the API server's CA signed) with token to path.
func (s *Server) WriteKubeconfig(path, server, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: s.CA}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "user"}
	cfg.CurrentContext = "test"
	return clientcmd.WriteToFile(*cfg, path)
}

// ServingCert returns a certificate for 127.0.0.1 signed by the server's
// CA, for a server the test puts beside kube-apiserver.
func (s *Server) ServingCert(t testing.TB) tls.Certificate {
	t.Helper()
	return s.ca.TLSCert(t, Leaf{CN: "kubetest-serving", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true})
}
