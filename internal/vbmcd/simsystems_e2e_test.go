package vbmcd

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/ironictest"
	"github.com/bmlab/bmlab/internal/testenv"
)

// fakeIPA is a notification listener that decides as Metal3's fake-ipa
// decides (utility-images, fake-ipa/fake_ipa/main.py, notification_handler):
// a PUT at its root with a system's JSON; no pending_power, nothing to
// do; pending_power On for a system not booted whose boot_device is not Hdd,
// boot its agent; any other pending_power for a booted system, stop it.
// It reads the fields as fake-ipa does, without defaults: a missing one
// is a 500, as there.
type fakeIPA struct {
	mu        sync.Mutex
	booted    map[string]bool
	decisions []string // "boot NAME", "shutdown NAME"
	bodies    []map[string]any
	refused   []string // the bodies fake-ipa would fail on
	got       chan struct{}
	// boot and shutdown, when set, act on the decisions: a stand-in
	// agent boots or stops on the system's NICs.
	boot, shutdown func(macs ...string)
}

func newFakeIPA(t testing.TB) (*fakeIPA, string) {
	f := &fakeIPA{booted: map[string]bool{}, got: make(chan struct{}, 1000)}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

// drive makes the decisions act on Ironic's stand-in agent a: a boot boots
// it on the system's NICs, a shutdown powers it off.
func (f *fakeIPA) drive(a *ironictest.Agent) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.boot, f.shutdown = a.Booted, a.PoweredOff
}

func (f *fakeIPA) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPut || r.URL.Path != "/" {
		http.Error(w, "fake-ipa takes PUT /", http.StatusMethodNotAllowed)
		return
	}
	b, _ := io.ReadAll(r.Body)
	var sys map[string]any
	if err := json.Unmarshal(b, &sys); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer func() {
		f.mu.Unlock()
		select { // a wake-up for waitFor; a full channel has one already
		case f.got <- struct{}{}:
		default:
		}
	}()
	f.bodies = append(f.bodies, sys)
	pending, _ := sys["pending_power"].(map[string]any)
	if pending == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	uuid, ok1 := sys["uuid"].(string)
	name, ok2 := sys["name"].(string)
	state, ok3 := pending["power_state"].(string)
	_, ok4 := pending["apply_time"].(float64)
	boot, ok5 := sys["boot_device"].(string)
	nics, ok6 := sys["nics"].([]any)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || len(nics) == 0 {
		f.refused = append(f.refused, string(b))
		http.Error(w, fmt.Sprintf("fake-ipa would fail on %s", b), http.StatusInternalServerError)
		return
	}
	var macs []string
	for _, n := range nics {
		if m, _ := n.(map[string]any)["mac"].(string); m != "" {
			macs = append(macs, m)
		}
	}
	switch {
	case state == "On" && !f.booted[uuid] && boot != "Hdd":
		f.booted[uuid] = true
		f.decisions = append(f.decisions, "boot "+name)
		if f.boot != nil {
			f.boot(macs...)
		}
	case state != "On" && f.booted[uuid]:
		delete(f.booted, uuid)
		f.decisions = append(f.decisions, "shutdown "+name)
		if f.shutdown != nil {
			f.shutdown(macs...)
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// waitFor waits until the listener has seen what cond looks for.
func (f *fakeIPA) waitFor(t *testing.T, what string, cond func(bodies []map[string]any, decisions []string) bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		f.mu.Lock()
		ok := cond(f.bodies, f.decisions)
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-f.got:
		case <-deadline:
			f.mu.Lock()
			defer f.mu.Unlock()
			t.Fatalf("the listener never saw %s; decisions %v, last bodies %v", what, f.decisions, f.bodies[max(0, len(f.bodies)-3):])
		}
	}
}

// A Metal3 job's sushy-tools configuration starts vbmcd as it is. Its
// systems answer Redfish (by UUID and by name), and python3-sushy driving
// one as Ironic does (a Once Cd override, On, a virtual media insert and
// eject, ForceOff) makes vbmcd PUT each change to the notification
// listener in the fake driver's form, which a listener deciding as
// fake-ipa does turns into "boot the agent" and "stop it". The system
// without external_notifier is never announced; the notifier's metrics
// count what was sent.
func TestSushyFakeSystemsNotify(t *testing.T) {
	testenv.Integration(t)
	ipa, listener := newFakeIPA(t)
	conf := fakeDriverConf(t, listener, false)
	images := isoServer(t)
	addr, out := simDaemon(t, func(c *Config) {
		c.SimSystems, c.SimMedia, c.SimDelay = conf, "probe", 300*time.Millisecond
		c.MediaAllowLoopback = true
		c.MetricsAddr = "127.0.0.1:0"
	})
	url := "http://" + addr
	if !strings.Contains(out.String(), "serving 2 sim machine(s)") {
		t.Errorf("vbmcd's first line: %s", out)
	}
	r, err := send("GET", url+"/redfish/v1/Systems/fake1", "admin", "sim-pass-1", "")
	if err != nil || r.object()["Id"] != "27946b59-9e44-4fa7-8e91-f3527a1ef094" || r.object()["Name"] != "fake1" {
		t.Fatalf("GET by name: %v %s", err, r.Body)
	}

	for _, id := range []string{fakeID1, fakeID2} {
		sushy(t, url, "admin", "sim-pass-1", id, "boot", "Cd", "Once", "UEFI")
		sushy(t, url, "admin", "sim-pass-1", id, "reset", "On")
	}
	ipa.waitFor(t, "fake1 booted, then on", func(b []map[string]any, d []string) bool {
		return len(d) == 1 && d[0] == "boot fake1" && b[len(b)-1]["power_state"] == "On" && b[len(b)-1]["pending_power"] == nil
	})
	var vm struct{ Inserted bool }
	runSushy(t, "sushy_vmedia.py", url, "admin", "sim-pass-1", fakeID1, []string{"insert", images + "/boot-fake1.iso"}, &vm)
	ipa.waitFor(t, "the inserted image", func(b []map[string]any, _ []string) bool {
		img, _ := b[len(b)-1]["boot_image"].(map[string]any)
		cd, _ := img["Cd"].([]any)
		return len(cd) == 3 && cd[0] == images+"/boot-fake1.iso" && cd[2] == true
	})
	runSushy(t, "sushy_vmedia.py", url, "admin", "sim-pass-1", fakeID1, []string{"eject"}, &vm)
	ipa.waitFor(t, "the ejection", func(b []map[string]any, _ []string) bool {
		img, _ := b[len(b)-1]["boot_image"].(map[string]any)
		cd, _ := img["Cd"].([]any)
		return len(cd) == 3 && cd[0] == nil && cd[2] == false
	})
	sushy(t, url, "admin", "sim-pass-1", fakeID1, "reset", "ForceOff")
	ipa.waitFor(t, "the agent stopped", func(_ []map[string]any, d []string) bool {
		return len(d) == 2 && d[1] == "shutdown fake1"
	})

	// Each power change is announced as the fake driver announces it: the
	// pending state with its apply_time (whole seconds) and the state
	// still the old one, then the new state with no pending one.
	ipa.mu.Lock()
	if want, steps := []string{"Off", "Off->On", "On", "On->Off", "Off"}, powerSteps(t, ipa.bodies, "fake1"); !slices.Equal(steps, want) {
		t.Errorf("fake1's power as announced: %v, want %v", steps, want)
	}
	for _, b := range ipa.bodies {
		if b["name"] != "fake1" || b["external_notifier"] != true {
			t.Errorf("an announcement of another system, or without the entry's keys: %v", b)
		}
	}
	sent := len(ipa.bodies)
	ipa.mu.Unlock()
	if !metricsSay(t, out, `(?m)^vbmcd_notifications_sent_total `+strconv.Itoa(sent)+`$`) || !metricsSay(t, out, `(?m)^vbmcd_media_probes_total 1$`) {
		t.Errorf("metrics do not count %d announcements sent and one probe", sent)
	}
}

// A listener that is down costs the BMC nothing: power actions are
// answered as ever, and vbmcd counts the failures (the log of the outage:
// TestListenerDown in internal/simnotify).
func TestNotifierDown(t *testing.T) {
	testenv.Integration(t)
	// A port held for this test that nothing listens on.
	dead := fmt.Sprintf("http://127.0.0.1:%d", testenv.Port(t, "127.0.0.1"))
	file := testenv.WriteFile(t, t.TempDir(), "systems.yaml", []byte("notifier: {url: 'http://127.0.0.1:1'}\nsystems:\n- {name: n0, notify: true}\n"))
	addr, out := simDaemon(t, func(c *Config) {
		c.SimSystems, c.SimNotifyURL, c.SimDelay = file, dead, 0
		c.MetricsAddr = "127.0.0.1:0"
	})
	for _, rt := range []string{"On", "ForceOff", "On"} {
		start := time.Now()
		r, err := send("POST", "http://"+addr+"/redfish/v1/Systems/n0/Actions/ComputerSystem.Reset", "admin", "sim-pass-1", `{"ResetType":"`+rt+`"}`)
		if err != nil || r.Code/100 != 2 {
			t.Fatalf("%s: %v %d %s", rt, err, r.Code, r.Body)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("%s answered after %v with the listener down", rt, took)
		}
	}
	// Each announcement is tried 5 times over about 3 s, one after the
	// other: the first fails after that.
	if !metricsSay(t, out, `(?m)^vbmcd_notifications_failed_total [1-9]`) {
		t.Errorf("the failures to reach %s are not counted", dead)
	}
}

// metricsSay waits until the daemon's /metrics match re.
func metricsSay(t *testing.T, out *testenv.Buffer, re string) bool {
	t.Helper()
	m := regexp.MustCompile(`metrics at (http://[0-9.:]+/metrics)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no metrics listener in %s", out)
	}
	want := regexp.MustCompile(re)
	return testenv.WaitFor(30*time.Second, func() bool {
		resp, err := http.Get(m[1])
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return want.Match(b)
	})
}

// isoServer serves an image that passes the ISO check at every path.
func isoServer(t *testing.T) string {
	iso := make([]byte, 1<<20)
	copy(iso[32769:], "CD001")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "image.iso", time.Time{}, strings.NewReader(string(iso)))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// The systems of fakeDriverConf.
const (
	fakeID1, fakeMAC1 = "27946b59-9e44-4fa7-8e91-f3527a1ef094", "00:5c:52:31:3a:9c"
	fakeID2, fakeMAC2 = "27946b59-9e44-4fa7-8e91-f3527a1ef095", "00:5c:52:31:3a:9d"
)

// fakeDriverConf writes a sushy-tools configuration as a Metal3 job
// writes it for the fake driver, its notifications to listener: two
// systems off, fake1 with external_notifier, fake2 too when notify2.
func fakeDriverConf(t *testing.T, listener string, notify2 bool) string {
	t.Helper()
	n2 := ""
	if notify2 {
		n2 = "\n     'external_notifier': True,"
	}
	conf := filepath.Join(t.TempDir(), "conf.py")
	if err := os.WriteFile(conf, []byte(`import collections
Host = collections.namedtuple('Host', ['hostname', 'port'])
SUSHY_EMULATOR_FAKE_DRIVER = True
SUSHY_EMULATOR_LISTEN_PORT = 8001
EXTERNAL_NOTIFICATION_URL = "`+listener+`"
FAKE_IPA_ADVERTISE_ADDRESS = Host(hostname="127.0.0.1", port="9999")
SUSHY_EMULATOR_FAKE_SYSTEMS = [
    {'uuid': '`+fakeID1+`', 'name': 'fake1', 'power_state': 'Off',
     'external_notifier': True, 'nics': [{'mac': '`+fakeMAC1+`', 'ip': '172.22.0.100'}]},
    {'uuid': '`+fakeID2+`', 'name': 'fake2', 'power_state': 'Off',`+n2+`
     'nics': [{'mac': '`+fakeMAC2+`', 'ip': '172.22.0.101'}]},
]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	return conf
}
