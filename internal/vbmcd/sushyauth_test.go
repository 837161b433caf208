package vbmcd

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/bmlab/bmlab/internal/testenv"
)

// sushyAuthScript is python3-sushy (Ironic's client) against vbmcd
// sushy-emulator: the htpasswd user reads the systems; vbmcd's built-in
// admin and password, a wrong password and no credentials are refused.
const sushyAuthScript = `
import sys, sushy
from sushy import auth, exceptions
url, user, password = sys.argv[1:4]
s = sushy.Sushy(url + "/redfish/v1", auth=auth.BasicAuth(user, password))
print("systems", len(s.get_system_collection().get_members()))
for u, p in (("admin", "password"), (user, "wrong-password")):
    try:
        sushy.Sushy(url + "/redfish/v1", auth=auth.BasicAuth(u, p)).get_system_collection()
        print("ACCEPTED", u, p)
    except exceptions.AccessError as e:
        print("refused", u, e.status_code)
print("DONE")
`

// TestSushyModeAuthFile: vbmcd sushy-emulator honours
// SUSHY_EMULATOR_AUTH_FILE as sushy-tools does. A configuration as
// metal3-dev-env writes it (fake driver, an htpasswd of a bcrypt entry, here
// in Apache's $2y$ form) runs vbmcd as a process on loopback, plain HTTP.
// python3-sushy logs in as the file's user; admin with the built-in
// password is refused (401), as are a wrong password and, with curl, no
// credentials. Before the fix (issue 46) the file was not read: its user
// was refused and admin:password served over plain HTTP.
func TestSushyModeAuthFile(t *testing.T) {
	testenv.Integration(t)
	py := testenv.Python(t, "sushy")
	curl := testenv.Command(t, "curl")
	hash, err := bcrypt.GenerateFromPassword([]byte("sushy-secret"), 5) // htpasswd -B's default cost
	if err != nil {
		t.Fatal(err)
	}
	htpasswd := testenv.WriteFile(t, t.TempDir(), "htpasswd", []byte("ironic:$2y$"+string(hash[4:])+"\n"))
	url := startSushyMode(t, "SUSHY_EMULATOR_AUTH_FILE = \""+htpasswd+"\"\n")

	out, err := exec.Command(py, "-c", sushyAuthScript, url, "ironic", "sushy-secret").CombinedOutput()
	t.Logf("sushy:\n%s", out)
	if err != nil || !strings.Contains(string(out), "DONE") || strings.Contains(string(out), "ACCEPTED") ||
		!strings.Contains(string(out), "systems 1") || strings.Count(string(out), "refused") != 2 {
		t.Errorf("python3-sushy: %v; want the htpasswd user to read one system and the others refused", err)
	}
	if code := curlCode(t, curl, url+"/redfish/v1/Systems"); code != "401" {
		t.Errorf("GET Systems without credentials: %s, want 401", code)
	}
}

// TestSushyModeRefusesLoopbackEvents: vbmcd sushy-emulator allows images
// on loopback, as sushy-tools does, but not event destinations there
// (issue 46: its --media-allow-loopback opened them too). Without an auth
// file (vbmcd's user), a subscription to a listener on 127.0.0.1 with a
// custom header, as to a host's admin interface, is refused with 400
// naming --events-allow-loopback, no subscription is kept and the listener
// gets nothing. Before the fix it was made (201) and a test event POSTed
// there.
func TestSushyModeRefusesLoopbackEvents(t *testing.T) {
	testenv.Integration(t)
	curl := testenv.Command(t, "curl")
	url := startSushyMode(t, "")
	// An event listener on loopback, as an admin interface of the host.
	var hits atomic.Int64
	ls := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer ls.Close()
	sub, err := exec.Command(curl, "-s", "-u", "admin:password", "-H", "Content-Type: application/json", "-w", "\n%{http_code}",
		"-d", `{"Destination":"`+ls.URL+`/admin/reload","HttpHeaders":[{"X-Admin-Token":"t"}]}`,
		url+"/redfish/v1/EventService/Subscriptions").CombinedOutput()
	if err != nil {
		t.Fatalf("curl: %v\n%s", err, sub)
	}
	if !strings.HasSuffix(string(sub), "\n400") || !strings.Contains(string(sub), "--events-allow-loopback") {
		t.Errorf("a subscription to a loopback listener in sushy-emulator mode: %s; want 400 naming --events-allow-loopback", sub)
	}
	// No subscription was kept, so nothing can be delivered there.
	list, err := exec.Command(curl, "-s", "-u", "admin:password", url+"/redfish/v1/EventService/Subscriptions").Output()
	if err != nil || !strings.Contains(string(list), `"Members":[]`) {
		t.Errorf("subscriptions after the refusal: %v %s; want none", err, list)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the loopback listener got %d requests", n)
	}
}

// startSushyMode runs vbmcd sushy-emulator as a process with a fake-driver
// configuration on loopback, plain HTTP, plus the settings in extra (Python
// lines); it returns the service's URL.
func startSushyMode(t *testing.T, extra string) string {
	t.Helper()
	dir := t.TempDir()
	port := testenv.Port(t, "127.0.0.1")
	conf := testenv.WriteFile(t, dir, "conf.py", []byte(`SUSHY_EMULATOR_LISTEN_IP = "127.0.0.1"
SUSHY_EMULATOR_LISTEN_PORT = `+strconv.Itoa(port)+`
SUSHY_EMULATOR_FAKE_DRIVER = True
SUSHY_EMULATOR_FAKE_SYSTEMS = [{"uuid": "27946b59-9e44-4fa7-8e91-f3527a1ef094", "name": "fake", "power_state": "Off", "nics": [{"mac": "00:5c:52:31:3a:9c"}]}]
`+extra))
	cmd := exec.Command(testenv.Binary(t, "vbmcd"), "sushy-emulator", "--config", conf)
	cmd.Env = append(os.Environ(), "VBMCD_STATE_DIR="+filepath.Join(dir, "state"), "VBMCD_MEDIA_DIR="+filepath.Join(dir, "media"),
		"VBMCD_IPMI=false", "VBMCD_METRICS_ADDR=")
	line, stderr := runDaemon(t, cmd)
	m := regexp.MustCompile(`Redfish at (http://[0-9.:]+)/redfish/v1`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("vbmcd sushy-emulator did not start: %q\n%s", line, stderr)
	}
	return m[1]
}

// curlCode is the status of curl's GET of url, without credentials.
func curlCode(t *testing.T, curl, url string) string {
	t.Helper()
	out, err := exec.Command(curl, "-s", "-o", "/dev/null", "-w", "%{http_code}", url).Output()
	if err != nil {
		t.Fatalf("curl %s: %v", url, err)
	}
	return string(out)
}
