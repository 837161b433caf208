package redfish

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stmcginnis/gofish"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/sim"
)

const (
	testUser    = "admin"
	testPass    = "s3cret"
	testService = "11111111-2222-5333-8444-555555555555"
)

// fixture is a Server over a sim backend with n machines.
type fixture struct {
	t   testing.TB
	be  *sim.Backend
	svc *machine.Service
	srv *Server
	h   http.Handler
	ids []string
}

func newFixture(t testing.TB, n int, opts ...Option) *fixture {
	t.Helper()
	be := sim.New(n, sim.WithFactoryKeys(testKeys(t)))
	svc := machine.NewService(be, nil)
	opts = append([]Option{WithCredentials(testUser, testPass), WithServiceUUID(testService),
		WithVendor("bmlab", "bmlab virtual server"), WithFirmwareVersion("1.0.0")}, opts...)
	srv := New(svc, nil, opts...)
	f := &fixture{t: t, be: be, svc: svc, srv: srv, h: srv.Handler()}
	for _, m := range be.List() {
		f.ids = append(f.ids, m.ID)
	}
	return f
}

// req describes a request; auth "" means the service credentials, "-" none;
// ctype "" is application/json for a change or a body, "-" none.
type req struct {
	method, path string
	body         string
	ctype        string
	header       map[string]string
	user, pass   string
	noAuth       bool
	bmc          string // the system whose own BMC is asked (AtBMC); "" for the service listener
	remote       string // the client's address; default httptest's 192.0.2.1:1234
}

func (f *fixture) do(q req) *httptest.ResponseRecorder {
	f.t.Helper()
	var body io.Reader
	if q.body != "" {
		body = bytes.NewBufferString(q.body)
	}
	if q.method == "" {
		q.method = http.MethodGet
	}
	r := httptest.NewRequest(q.method, q.path, body)
	if q.bmc != "" {
		r = r.WithContext(AtBMC(r.Context(), q.bmc))
	}
	if q.remote != "" {
		r.RemoteAddr = q.remote
	}
	// A change names JSON, as every client does, unless the test says
	// otherwise ("-": no Content-Type at all).
	switch {
	case q.ctype == "-":
	case q.ctype != "":
		r.Header.Set("Content-Type", q.ctype)
	case q.body != "" || q.method == http.MethodPost || q.method == http.MethodPatch || q.method == http.MethodPut:
		r.Header.Set("Content-Type", "application/json")
	}
	if !q.noAuth {
		u, p := q.user, q.pass
		if u == "" {
			u, p = testUser, testPass
		}
		r.SetBasicAuth(u, p)
	}
	for k, v := range q.header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	return w
}

func decode(t testing.TB, w *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
		t.Fatalf("body is not JSON (%v): %s", err, w.Body.String())
	}
	return v
}

// messageIDs returns the MessageIds of an error response, without the
// registry prefix.
func messageIDs(t *testing.T, w *httptest.ResponseRecorder) []string {
	t.Helper()
	v := decode(t, w)
	e, _ := v["error"].(map[string]any)
	infos, _ := e["@Message.ExtendedInfo"].([]any)
	var out []string
	for _, i := range infos {
		id, _ := i.(map[string]any)["MessageId"].(string)
		out = append(out, trimRegistry(id))
	}
	return out
}

func trimRegistry(id string) string {
	const p = baseRegistryID + "."
	if len(id) > len(p) && id[:len(p)] == p {
		return id[len(p):]
	}
	return id
}

// testKeys is a small factory key store: one certificate in PK, KEK and db
// (testdata/uefi_test_cert.der, made with openssl for these tests) and one
// SHA-256 hash in dbx.
func testKeys(t testing.TB) machine.KeyStore {
	t.Helper()
	der, err := os.ReadFile(filepath.Join("testdata", "uefi_test_cert.der"))
	if err != nil {
		t.Fatal(err)
	}
	const owner = "77fa9abd-0359-4d32-bd60-28f4e78f784b"
	cert := []machine.KeyEntry{{Type: "EFI_CERT_X509_GUID", Owner: owner, Data: der}}
	hash := sha256.Sum256([]byte("bmlab revoked loader"))
	return machine.KeyStore{
		machine.KeyPK:  cert,
		machine.KeyKEK: cert,
		machine.KeyDB:  cert,
		machine.KeyDBX: {{Type: "EFI_CERT_SHA256_GUID", Owner: owner, Data: hash[:]}},
	}
}

// gofishConnect connects gofish as cfg says; the client logs out when the
// test ends.
func gofishConnect(t *testing.T, cfg gofish.ClientConfig) *gofish.APIClient {
	t.Helper()
	c, err := gofish.Connect(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Logout)
	return c
}

// runToDone runs a client's script (name: the client), logs what it printed
// and how long it took, and fails the test unless it exits 0 having
// printed DONE, as each script under testdata does at its end.
func runToDone(t *testing.T, name string, cmd *exec.Cmd) {
	t.Helper()
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("%s (%.1f s):\n%s", name, time.Since(start).Seconds(), out)
	if err != nil || !strings.Contains(string(out), "DONE") {
		t.Fatalf("%s: %v", name, err)
	}
}
