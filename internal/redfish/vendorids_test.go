package redfish

import (
	"context"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
)

// vendorIDs are the ids each vendor's BMC gives its one System, Manager
// and Chassis, and the virtual media member a client inserts into: written
// out from the vendors' public material (docs/personalities.md), not read
// from internal/personality.
var vendorIDs = map[string]vendorIDSet{
	"generic":        {"", "", "", "manager", "Cd"}, // the machine id: filled in by the test
	"idrac9":         {"System.Embedded.1", "iDRAC.Embedded.1", "System.Embedded.1", "manager", "CD"},
	"idrac10":        {"System.Embedded.1", "iDRAC.Embedded.1", "System.Embedded.1", "system", "1"},
	"ilo6":           {"1", "1", "1", "manager", "2"},
	"supermicro-x13": {"1", "1", "1", "manager", "CD1"},
}

type vendorIDSet struct{ system, manager, chassis, mediaAt, member string }

// wantIDs are the ids view v's BMC must show: vendorIDs, with the generic
// BMC's machine id filled in.
func wantIDs(v vendorView) vendorIDSet {
	want := vendorIDs[v.Personality]
	if want.system == "" {
		want.system, want.manager, want.chassis = v.UUID, v.UUID, v.UUID
	}
	return want
}

// listenAtBMC serves f's handler as machine id's own BMC (AtBMC, as
// vbmcd's per-address listeners do) over TLS on loopback.
func listenAtBMC(t *testing.T, h http.Handler, id string) *httptest.Server {
	t.Helper()
	ts := httptest.NewUnstartedServer(h)
	ts.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context { return AtBMC(ctx, id) }
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts
}

// writeServerCA writes the certificate of a TLS test server at path, for a
// client to verify it with, and returns path.
func writeServerCA(t *testing.T, path string, ts *httptest.Server) string {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestVendorIDsSushy: at a BMC of its own, python3-sushy (Ironic's client)
// finds each vendor's System, Manager and Chassis under the vendor's ids,
// reads no machine id in their bodies, powers the server on, sets a boot
// override and inserts and ejects media through the vendor's paths;
// proliantutils (HPE's library, which addresses /Systems/1 and /Managers/1
// itself) reads the iLO 6 and inserts and ejects there.
func TestVendorIDsSushy(t *testing.T) {
	testenv.Integration(t)
	py := testenv.Python(t, "sushy")
	testenv.Python(t, "proliantutils")
	f, views := personalityFixture(t, allQuirksOff)
	for _, v := range views {
		t.Run(v.Personality, func(t *testing.T) {
			want, ts := wantIDs(v), listenAtBMC(t, f.h, v.UUID)
			ca := writeServerCA(t, filepath.Join(t.TempDir(), "ca.pem"), ts)
			args := []string{"testdata/sushy_vendor_ids.py", ts.URL, ca, testUser, testPass, v.UUID,
				want.system, want.manager, want.chassis, want.mediaAt, want.member, f.images.URL + "/small.iso"}
			if v.Personality == "ilo6" {
				args = append(args, "proliantutils")
			}
			cmd := exec.Command(py, args...)
			// requests prefers REQUESTS_CA_BUNDLE to a session's own
			// verify: name the test's CA there too.
			cmd.Env = append(os.Environ(), "REQUESTS_CA_BUNDLE="+ca)
			runToDone(t, "sushy", cmd)
		})
	}
}

// TestVendorIDsGofish: gofish reads the same at each BMC, and the shared
// listener keeps naming the same machines by their ids.
func TestVendorIDsGofish(t *testing.T) {
	f, views, shared := personalitiesGofish(t)
	for _, v := range views {
		t.Run(v.Personality, func(t *testing.T) {
			want, ts := wantIDs(v), listenAtBMC(t, f.h, v.UUID)
			c := gofishConnect(t, gofish.ClientConfig{Endpoint: ts.URL, Username: testUser, Password: testPass, BasicAuth: true, Insecure: true})
			systems, err := c.Service.Systems()
			if err != nil || len(systems) != 1 {
				t.Fatalf("systems: %d %v", len(systems), err)
			}
			sys := systems[0]
			if sys.ID != want.system || sys.ODataID != systemURI(want.system) || sys.UUID != v.UUID || sys.Manufacturer != v.Manufacturer {
				t.Errorf("system %q at %q (UUID %q, %q), want %q at %q", sys.ID, sys.ODataID, sys.UUID, sys.Manufacturer, want.system, systemURI(want.system))
			}
			mgrs, err := sys.ManagedBy()
			if err != nil || len(mgrs) != 1 || mgrs[0].ID != want.manager || mgrs[0].ODataID != managerURI(want.manager) {
				t.Errorf("managers %v %v, want %s", mgrs, err, want.manager)
			}
			chassis, err := sys.Chassis()
			if err != nil || len(chassis) != 1 || chassis[0].ID != want.chassis || chassis[0].ODataID != chassisOf(want.chassis) {
				t.Errorf("chassis %v %v, want %s", chassis, err, want.chassis)
			}
			if _, err := sys.Reset(schemas.OnResetType); err != nil {
				t.Fatalf("reset at %s: %v", sys.ODataID, err)
			}
			var vms []*schemas.VirtualMedia
			if want.mediaAt == "system" {
				vms, err = sys.VirtualMedia()
			} else if len(mgrs) == 1 {
				vms, err = mgrs[0].VirtualMedia()
			}
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, vm := range vms {
				if !strings.HasPrefix(vm.ODataID, systemURI(want.system)) && !strings.HasPrefix(vm.ODataID, managerURI(want.manager)) {
					t.Errorf("media member at %s", vm.ODataID)
				}
				if vm.ID != want.member {
					continue
				}
				found = true
				if _, err := vm.InsertMedia(&schemas.VirtualMediaInsertMediaParameters{Image: f.images.URL + "/small.iso"}); err != nil {
					t.Fatalf("insert at %s: %v", vm.ODataID, err)
				}
				if _, err := vm.EjectMedia(); err != nil {
					t.Fatalf("eject at %s: %v", vm.ODataID, err)
				}
			}
			if !found {
				t.Errorf("no member %s", want.member)
			}

			// The shared listener names the machine by its id.
			s, err := schemas.GetObject[schemas.ComputerSystem](shared, systemURI(v.UUID))
			if err != nil || s.ID != v.UUID || s.PowerState != schemas.OnPowerState {
				t.Errorf("on the shared listener: %v %v, want %s powered on", s, err, v.UUID)
			}
		})
	}
}

// TestVendorIDsHTTP: the edges of the mapping. A request by the machine id
// still reaches the machine at its BMC; the answer names the vendor's
// ids; a Location header is mapped; each BMC's renderings are cached
// apart from the shared listener's, and a PATCH with the ETag read at the
// BMC is taken.
func TestVendorIDsHTTP(t *testing.T) {
	f, views := personalityFixture(t, allQuirksOff)
	dell := views[1].UUID
	ts := listenAtBMC(t, f.h, dell)
	hc := ts.Client()
	get := func(path string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, ts.URL+path, nil)
		req.SetBasicAuth(testUser, testPass)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	// Fill the shared listener's cache first: the BMC must not be served it.
	if w := f.do(req{path: systemURI(dell)}); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"Id":"`+dell+`"`) {
		t.Fatalf("shared listener: %d %s", w.Code, w.Body)
	}
	for _, path := range []string{"/redfish/v1/Systems/System.Embedded.1", systemURI(dell)} {
		resp, body := get(path)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"Id":"System.Embedded.1"`) ||
			!strings.Contains(body, `"@odata.id":"/redfish/v1/Systems/System.Embedded.1"`) ||
			!strings.Contains(body, `/redfish/v1/Managers/iDRAC.Embedded.1"`) || strings.Count(body, dell) != 1 {
			t.Errorf("GET %s at the BMC: %d %s", path, resp.StatusCode, body)
		}
		if resp.Header.Get("Content-Length") != "" && resp.Header.Get("Content-Length") != strconv.Itoa(len(body)) {
			t.Errorf("Content-Length %s, body %d bytes", resp.Header.Get("Content-Length"), len(body))
		}
	}
	resp, body := get("/redfish/v1/Managers/iDRAC.Embedded.1")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"Id":"iDRAC.Embedded.1"`) || strings.Contains(body, dell) {
		t.Errorf("manager at the BMC: %d %s", resp.StatusCode, body)
	}
	if resp, _ := get("/redfish/v1/Systems/1"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("another vendor's id at a Dell: %d, want 404", resp.StatusCode)
	}

	// A PATCH with the ETag the BMC gave.
	resp, _ = get("/redfish/v1/Systems/System.Embedded.1")
	patch, _ := http.NewRequest(http.MethodPatch, ts.URL+"/redfish/v1/Systems/System.Embedded.1",
		strings.NewReader(`{"Boot":{"BootSourceOverrideTarget":"Pxe","BootSourceOverrideEnabled":"Once"}}`))
	patch.SetBasicAuth(testUser, testPass)
	patch.Header.Set("Content-Type", "application/json")
	patch.Header.Set("If-Match", resp.Header.Get("ETag"))
	presp, err := hc.Do(patch)
	if err != nil {
		t.Fatal(err)
	}
	presp.Body.Close()
	if presp.StatusCode != http.StatusOK && presp.StatusCode != http.StatusNoContent {
		t.Errorf("PATCH with the BMC's ETag: %d", presp.StatusCode)
	}

	// A GET by the machine's name is sent to the canonical URI: the
	// vendor's.
	m, err := f.svc.Get(dell)
	if err != nil {
		t.Fatal(err)
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if resp, _ := get("/redfish/v1/Systems/" + m.Name); resp.StatusCode != http.StatusPermanentRedirect ||
		resp.Header.Get("Location") != "/redfish/v1/Systems/System.Embedded.1" {
		t.Errorf("GET by name at the BMC: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// TestVendorIDsInBody: a request body that names the vendor's System (a
// SimpleUpdate's Targets) reaches the machine, and the task's monitor is
// the BMC's; a System the BMC does not have is refused.
func TestVendorIDsInBody(t *testing.T) {
	f, images := newUpdateFixture(t)
	id := f.ids[0]
	if _, err := f.svc.UpdateSettings(context.Background(), id, func(s *machine.Settings) error {
		s.Personality = "idrac9"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ts := listenAtBMC(t, f.h, id)
	hc := ts.Client()
	do := func(method, path, body string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		req.SetBasicAuth(testUser, testPass)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	update := func(target string) (*http.Response, string) {
		return do(http.MethodPost, "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate",
			`{"ImageURI":"`+images+`/bios-2.3.1.bin","Targets":["`+target+`"]}`)
	}
	if resp, body := update("/redfish/v1/Systems/System.Embedded.2"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("SimpleUpdate of a System this BMC lacks: %d %s", resp.StatusCode, body)
	}
	resp, body := update("/redfish/v1/Systems/System.Embedded.1")
	mon := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusAccepted || strings.Contains(body, id) || mon == "" || strings.Contains(mon, id) {
		t.Fatalf("SimpleUpdate with the vendor's System in Targets: %d %q %s", resp.StatusCode, mon, body)
	}
	if resp, body := do(http.MethodGet, mon, ""); resp.StatusCode >= 300 && resp.StatusCode != http.StatusAccepted || strings.Contains(body, id) {
		t.Errorf("the update's monitor %s at the BMC: %d %s", mon, resp.StatusCode, body)
	}
}
