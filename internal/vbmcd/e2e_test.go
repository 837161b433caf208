package vbmcd

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/digitalocean/go-libvirt"
	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virt"
	"github.com/bmlab/bmlab/internal/virttest"
)

const bootTimeout = 90 * time.Second

// caFile is the certificate sushy verifies the daemon's TLS with: the
// self-signed one vbmcd generates into its state directory.
var caFile string

// daemon runs vbmcd in-process over the real libvirtd, serving only the
// domains whose names start with prefix, and returns its Redfish URL.
func daemon(t testing.TB, prefix string, mods ...func(*Config)) string {
	t.Helper()
	var cfg Config
	cfg.Backend, cfg.Libvirt = "libvirt", []virt.Host{{URI: "qemu:///system"}}
	cfg.Domains = []string{prefix + "*"}
	cfg.RedfishAddr = "127.0.0.1:0"
	cfg.Username, cfg.Password = "admin", "e2e-pass"
	cfg.StateDir = t.TempDir()
	cfg.MediaDir, cfg.MediaMaxBytes, cfg.MediaWait = testenv.QemuDir(t), 1<<30, time.Minute
	cfg.MediaAllowLoopback = true  // the tests serve images on loopback
	cfg.EventsAllowLoopback = true // and listen for events there
	cfg.SessionTimeout = time.Minute
	for _, mod := range mods {
		mod(&cfg)
	}
	url := startedAt(t, start(t, cfg), redfishURL, 30*time.Second)
	caFile = filepath.Join(cfg.StateDir, "redfish-tls.crt")
	return url
}

// markerLab makes a lab (virttest) whose domains' names start with prefix,
// with one machine, "a", that boots its marker disk and has no CD drive,
// and starts vbmcd (daemon) over those domains with mods. It returns the
// lab, the machine and vbmcd's Redfish URL.
func markerLab(t *testing.T, prefix string, mods ...func(*Config)) (*virttest.Lab, *virttest.VM, string) {
	t.Helper()
	lab := virttest.New(t, prefix)
	vm := lab.NewVM(t, "a", virttest.VMOptions{NoCD: true, DiskMarker: true})
	return lab, vm, daemon(t, prefix, mods...)
}

// redfishURL finds the Redfish URL in vbmcd's banner.
var redfishURL = regexp.MustCompile(`Redfish at (https://[0-9.:]+)/redfish/v1`)

// startedAt waits up to wait for vbmcd's banner in out and returns what
// re's first group matches in it (the Redfish URL or address).
func startedAt(t testing.TB, out *testenv.Buffer, re *regexp.Regexp, wait time.Duration) string {
	t.Helper()
	var at string
	if !testenv.WaitFor(wait, func() bool {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			at = m[1]
		}
		return at != ""
	}) {
		t.Fatalf("vbmcd did not start; output:\n%s", out.String())
	}
	return at
}

// start runs serve with cfg until the test ends and returns its output.
func start(t testing.TB, cfg Config) *testenv.Buffer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &testenv.Buffer{}
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, testenv.Logger(t), out, false) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("vbmcd: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("vbmcd did not shut down within 10 s")
		}
	})
	return out
}

type sushyState struct {
	Power, Target, Enabled, Mode string
	Token                        string
}

// sushy runs one step of the flow through python3-sushy.
func sushy(t *testing.T, url, user, pass, id string, step ...string) sushyState {
	t.Helper()
	var st sushyState
	runSushy(t, "sushy_step.py", url, user, pass, id, step, &st)
	return st
}

// adminStep runs one step of testdata/script (runSushy) as the daemon's
// admin on system id and returns the object it printed last as a T.
func adminStep[T any](t *testing.T, script, url, id string, step ...string) T {
	t.Helper()
	var v T
	runSushy(t, script, url, "admin", "e2e-pass", id, step, &v)
	return v
}

// runSushy runs testdata/script (a python3-sushy flow, made as Ironic makes
// it) for one step and decodes the JSON object it prints last into v.
func runSushy(t *testing.T, script, url, user, pass, id string, step []string, v any) {
	t.Helper()
	py := testenv.Python(t, "sushy")
	cmd := exec.Command(py, append([]string{"testdata/" + script, url, user, pass, id}, step...)...)
	// requests lets REQUESTS_CA_BUNDLE override a verify argument; point it
	// (and sushy) at the daemon's own certificate so TLS is really checked.
	cmd.Env = append(os.Environ(), "REQUESTS_CA_BUNDLE="+caFile, "CURL_CA_BUNDLE="+caFile, "SUSHY_VERIFY="+caFile)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", script, step, err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), v); err != nil {
		t.Fatalf("%s %v: %v\n%s", script, step, err, out)
	}
}

func gofishClient(t *testing.T, url, user, pass string, session bool) *gofish.APIClient {
	t.Helper()
	c, err := gofish.Connect(gofish.ClientConfig{Endpoint: url, Username: user, Password: pass, Insecure: true, BasicAuth: !session})
	if err != nil {
		t.Fatalf("gofish connect: %v", err)
	}
	return c
}

func gofishSystem(t *testing.T, c *gofish.APIClient, id string) *schemas.ComputerSystem {
	t.Helper()
	s, err := schemas.GetComputerSystem(c, "/redfish/v1/Systems/"+id)
	if err != nil {
		t.Fatalf("gofish get system: %v", err)
	}
	return s
}

// TestE2EBIOS drives a BIOS VM through vbmcd with sushy and gofish, checking
// each effect in libvirt and on the VM's serial console.
func TestE2EBIOS(t *testing.T) {
	lab := virttest.New(t, "e2e-bios-")
	vm := lab.NewVM(t, "a", virttest.VMOptions{DiskMarker: true})
	url := daemon(t, "e2e-bios-")
	const user, pass = "admin", "e2e-pass"

	// Ironic's flow with sushy: Once to Cd (Legacy), power on: the marker.
	st := sushy(t, url, user, pass, vm.ID, "boot", "Cd", "Once", "Legacy")
	if st.Target != "Cd" || st.Enabled != "Once" || st.Mode != "Legacy" {
		t.Fatalf("after set_system_boot_options: %+v", st)
	}
	// The power-on is answered at once; the boot spends the override.
	sushy(t, url, user, pass, vm.ID, "reset", "On")
	cd := vm.WaitMarker(t, testenv.Marker, 0, bootTimeout)
	if st = sushy(t, url, user, pass, vm.ID, "show"); st.Enabled != "Disabled" {
		t.Errorf("the Once override should be spent by the boot: %+v", st)
	}
	lab.WaitPower(t, vm.ID, machine.PowerOff, bootTimeout) // the marker ISO powers off

	// The next boot is the disk's: the Once override is gone.
	sushy(t, url, user, pass, vm.ID, "reset", "On")
	disk := vm.WaitMarker(t, testenv.DiskMarker, 0, bootTimeout)
	if c, _ := vm.Markers(); c != cd {
		t.Fatalf("the CD booted again after a spent Once override")
	}
	if s := lab.DomainState(t, vm.Name); s != libvirt.DomainRunning {
		t.Fatalf("libvirt state %d, want running", s)
	}

	// gofish: ForceRestart really restarts (the disk boots again), ForceOff
	// really stops.
	gc := gofishClient(t, url, user, pass, false)
	defer gc.Logout()
	sys := gofishSystem(t, gc, vm.ID)
	if sys.PowerState != schemas.OnPowerState {
		t.Fatalf("gofish sees %s, want On", sys.PowerState)
	}
	if _, err := sys.Reset(schemas.ForceRestartResetType); err != nil {
		t.Fatal(err)
	}
	disk = vm.WaitMarker(t, testenv.DiskMarker, disk, bootTimeout)
	if _, err := sys.Reset(schemas.ForceOffResetType); err != nil {
		t.Fatal(err)
	}
	lab.WaitPower(t, vm.ID, machine.PowerOff, 10*time.Second) // answered at once, done soon after
	if s := lab.DomainState(t, vm.Name); s != libvirt.DomainShutoff {
		t.Fatalf("after ForceOff libvirt state %d, want shut off", s)
	}

	// Continuous to Cd keeps booting the CD. gofish sends If-Match with the
	// ETag it read; a late libvirt event (the ForceOff's) may change the
	// system in between, and the BMC then rightly answers 412: re-read and
	// try again, as sushy does.
	var err error
	for try := 0; try < 3; try++ {
		sys = gofishSystem(t, gc, vm.ID)
		err = sys.SetBoot(&schemas.Boot{BootSourceOverrideTarget: schemas.CdBootSource, BootSourceOverrideEnabled: schemas.ContinuousBootSourceOverrideEnabled})
		if err == nil || !strings.Contains(err.Error(), "412") {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		sys = gofishSystem(t, gc, vm.ID)
		if _, err := sys.Reset(schemas.OnResetType); err != nil {
			t.Fatal(err)
		}
		cd = vm.WaitMarker(t, testenv.Marker, cd, bootTimeout)
		lab.WaitPower(t, vm.ID, machine.PowerOff, bootTimeout)
	}
	if st := sushy(t, url, user, pass, vm.ID, "show"); st.Enabled != "Continuous" || st.Target != "Cd" {
		t.Errorf("Continuous override lost: %+v", st)
	}
	if _, d := vm.Markers(); d != disk {
		t.Errorf("the disk booted during Continuous Cd")
	}
}

// TestE2EUEFI: the same Once boot on UEFI firmware.
func TestE2EUEFI(t *testing.T) {
	lab := virttest.New(t, "e2e-uefi-")
	vm := lab.NewVM(t, "a", virttest.VMOptions{UEFI: true, DiskMarker: true})
	url := daemon(t, "e2e-uefi-")
	sushy(t, url, "admin", "e2e-pass", vm.ID, "boot", "Cd", "Once", "UEFI")
	sushy(t, url, "admin", "e2e-pass", vm.ID, "reset", "On")
	vm.WaitMarker(t, testenv.Marker, 0, 2*bootTimeout)
	if _, d := vm.Markers(); d != 0 {
		t.Errorf("the disk booted although the override said Cd")
	}
}

// TestE2EAuth: sessions log in and out, ETag/If-Match, and a system's own
// credentials reach that system only.
func TestE2EAuth(t *testing.T) {
	lab := virttest.New(t, "e2e-auth-")
	a := lab.NewVM(t, "a", virttest.VMOptions{NoCD: true})
	b := lab.NewVM(t, "b", virttest.VMOptions{NoCD: true})
	url := daemon(t, "e2e-auth-")
	do := func(method, path, user, pass, token, ifMatch, body string) reply {
		t.Helper()
		r, err := send(method, url+path, user, pass, body, "X-Auth-Token", token, "If-Match", ifMatch)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	// Sessions through sushy: the token works until logout.
	st := sushy(t, url, "admin", "e2e-pass", a.ID, "session-logout")
	if st.Token == "" {
		t.Fatal("sushy got no session token")
	}
	if r := do("GET", "/redfish/v1/Systems/"+a.ID, "", "", st.Token, "", ""); r.Code != http.StatusUnauthorized {
		t.Errorf("token after logout: %d, want 401", r.Code)
	}
	// gofish sessions.
	gc := gofishClient(t, url, "admin", "e2e-pass", true)
	sess, err := gc.GetSession()
	if err != nil || sess.Token == "" {
		t.Fatalf("gofish got no session: %v", err)
	}
	tok := sess.Token
	if r := do("GET", "/redfish/v1/Systems/"+a.ID, "", "", tok, "", ""); r.Code != http.StatusOK {
		t.Errorf("live session token: %d", r.Code)
	}
	gc.Logout()
	if r := do("GET", "/redfish/v1/Systems/"+a.ID, "", "", tok, "", ""); r.Code != http.StatusUnauthorized {
		t.Errorf("gofish token after logout: %d, want 401", r.Code)
	}

	// ETag and If-Match.
	r := do("GET", "/redfish/v1/Systems/"+a.ID, "admin", "e2e-pass", "", "", "")
	etag := r.Header.Get("ETag")
	if etag == "" {
		t.Fatal("no ETag on GET")
	}
	patch := `{"Boot":{"BootSourceOverrideTarget":"Pxe","BootSourceOverrideEnabled":"Once"}}`
	if r := do("PATCH", "/redfish/v1/Systems/"+a.ID, "admin", "e2e-pass", "", `"stale"`, patch); r.Code != http.StatusPreconditionFailed {
		t.Errorf("PATCH with a stale If-Match: %d, want 412", r.Code)
	}
	if r := do("PATCH", "/redfish/v1/Systems/"+a.ID, "admin", "e2e-pass", "", etag, patch); r.Code/100 != 2 {
		t.Errorf("PATCH with the current ETag: %d", r.Code)
	}
	if r := do("GET", "/redfish/v1/Systems/"+a.ID, "admin", "e2e-pass", "", "", ""); r.Header.Get("ETag") == etag {
		t.Errorf("ETag unchanged after a change")
	}

	// Per-system credentials, stored with the domain by another process
	// (here: the test's own backend), reach the daemon through libvirt events.
	if _, err := lab.Service.UpdateSettings(context.Background(), a.ID, func(s *machine.Settings) error {
		s.Credentials = []machine.Credential{{Username: "node-a", Password: "a-pass"}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var code int
	if !testenv.WaitFor(10*time.Second, func() bool {
		code = do("GET", "/redfish/v1/Systems/"+a.ID, "node-a", "a-pass", "", "", "").Code
		return code == http.StatusOK
	}) {
		t.Fatalf("a's own credentials on a: %d, want 200", code)
	}
	if r := do("GET", "/redfish/v1/Systems/"+b.ID, "node-a", "a-pass", "", "", ""); r.Code != http.StatusUnauthorized {
		t.Errorf("a's credentials on b: %d, want 401", r.Code)
	}
	if r := do("GET", "/redfish/v1/Systems/"+a.ID, "node-a", "wrong", "", "", ""); r.Code != http.StatusUnauthorized {
		t.Errorf("wrong password: %d, want 401", r.Code)
	}
}

// TestE2EVirtualMedia: the daemon's virtual media is wired: an image served
// on loopback, inserted over Redfish, boots the VM.
func TestE2EVirtualMedia(t *testing.T) {
	lab := virttest.New(t, "e2e-vmedia-")
	// Domains without a CD drive, as other tools define them: a BMC always
	// has its virtual drive, so an insert while off adds one.
	vm := lab.NewVM(t, "a", virttest.VMOptions{NoCD: true, DiskMarker: true})
	lab.RemoveCD(t, vm)
	running := lab.NewVM(t, "b", virttest.VMOptions{NoCD: true, DiskMarker: true})
	lab.RemoveCD(t, running)
	url := daemon(t, "e2e-vmedia-")
	iso := testenv.MarkerISO(t)
	img := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, iso) }))
	defer img.Close()

	post := func(method, path, body string) int {
		t.Helper()
		r, err := send(method, url+path, "admin", "e2e-pass", body)
		if err != nil {
			t.Fatal(err)
		}
		return r.Code
	}
	vmPath := "/redfish/v1/Managers/" + vm.ID + "/VirtualMedia/Cd"
	if c := post("POST", vmPath+"/Actions/VirtualMedia.InsertMedia", `{"Image":"`+img.URL+`/boot.iso"}`); c/100 != 2 {
		t.Fatalf("InsertMedia: %d", c)
	}
	if c := post("POST", vmPath+"/Actions/VirtualMedia.InsertMedia", `{"Image":"`+img.URL+`/boot.iso"}`); c != http.StatusConflict {
		t.Errorf("second InsertMedia: %d, want 409", c)
	}
	if c := post("PATCH", "/redfish/v1/Systems/"+vm.ID, `{"Boot":{"BootSourceOverrideTarget":"Cd","BootSourceOverrideEnabled":"Once"}}`); c/100 != 2 {
		t.Fatalf("PATCH boot: %d", c)
	}
	if c := post("POST", "/redfish/v1/Systems/"+vm.ID+"/Actions/ComputerSystem.Reset", `{"ResetType":"On"}`); c/100 != 2 {
		t.Fatalf("Reset On: %d", c)
	}
	vm.WaitMarker(t, testenv.Marker, 0, bootTimeout)
	if _, d := vm.Markers(); d != 0 {
		t.Errorf("the disk booted although the inserted CD was the Once target")
	}

	// A running domain cannot get a drive: refused at once, saying what to do.
	if c := post("POST", "/redfish/v1/Systems/"+running.ID+"/Actions/ComputerSystem.Reset", `{"ResetType":"On"}`); c/100 != 2 {
		t.Fatalf("Reset On: %d", c)
	}
	lab.WaitPower(t, running.ID, machine.PowerOn, bootTimeout)
	code, body := postJSON(t, url, "/redfish/v1/Managers/"+running.ID+"/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia", `{"Image":"`+img.URL+`/boot.iso"}`)
	if code != http.StatusBadRequest || !strings.Contains(body, "power it off and insert again") {
		t.Errorf("insert into a running domain without a CD drive: %d %s", code, body)
	}
}
