package vbmcd

import (
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/digitalocean/go-libvirt"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virt"
	"github.com/bmlab/bmlab/internal/virttest"
)

type sushySBDatabase struct {
	DatabaseID   string   `json:"database_id"`
	Certificates []string `json:"certificates"`
	Signatures   int      `json:"signatures"`
}

type sushySB struct {
	Refused *struct {
		Status   int      `json:"status"`
		Messages []string `json:"messages"`
	} `json:"refused"`
	Enabled     bool                       `json:"enabled"`
	Mode        string                     `json:"mode"`
	CurrentBoot string                     `json:"current_boot"`
	Databases   map[string]sushySBDatabase `json:"databases"`
	Boot        map[string]any             `json:"boot"`
}

// sushySecureBoot runs one step of testdata/sushy_secureboot.py.
func sushySecureBoot(t *testing.T, url, id string, step ...string) sushySB {
	t.Helper()
	return adminStep[sushySB](t, "sushy_secureboot.py", url, id, step...)
}

// commonNames lists the subjects of a database's certificates.
func commonNames(t *testing.T, entries []machine.KeyEntry) []string {
	t.Helper()
	var out []string
	for _, e := range entries {
		if !e.IsCertificate() {
			continue
		}
		c, err := x509.ParseCertificate(e.Data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c.Subject.CommonName)
	}
	return out
}

// TestE2ESecureBootKeys drives Ironic's secure boot clean steps with sushy
// on real qemu: keys deleted (clear_secure_boot_keys), the secure firmware
// boots the unsigned marker ISO; keys reset to default
// (reset_secure_boot_keys_to_default), it refuses it. The databases show
// what OVMF's enrolled template holds, and the key state outlives vbmcd.
func TestE2ESecureBootKeys(t *testing.T) {
	fw := virt.DetectFirmware()
	testenv.Require(t, fw.Vars != "" && fw.SecureCode != "" && fw.SecureVars != "", "OVMF with secure boot and both variable templates (package ovmf)")
	factory, err := virt.ReadKeys(fw.SecureVars)
	if err != nil {
		t.Fatal(err)
	}
	lab := virttest.New(t, "e2e-sbkeys-")
	vm := lab.NewVM(t, "a", virttest.VMOptions{UEFI: true})
	url := daemon(t, "e2e-sbkeys-")

	st := sushySecureBoot(t, url, vm.ID, "show")
	if st.Mode != "SecureBootMode.USER" && st.Mode != "user" && !strings.Contains(strings.ToLower(st.Mode), "user") {
		t.Errorf("a new VM's mode %q, want user mode", st.Mode)
	}
	if len(st.Databases) != 8 {
		t.Errorf("%d databases, want 8: %v", len(st.Databases), st.Databases)
	}
	for _, db := range machine.KeyDatabases {
		want := commonNames(t, factory[db])
		for _, id := range []string{string(db), string(db) + "Default"} {
			if diff := cmp.Diff(want, st.Databases[id].Certificates, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s certificates against %s (-template +served):\n%s", id, fw.SecureVars, diff)
			}
		}
	}
	if st.Databases["dbx"].Signatures == 0 {
		t.Errorf("dbx lists no signatures; the template's dbx holds a hash")
	}

	// clear_secure_boot_keys, then secure boot on: setup mode, the
	// unsigned ISO boots.
	st = sushySecureBoot(t, url, vm.ID, "reset-keys", "DeleteAllKeys")
	if st.Refused != nil || !strings.Contains(strings.ToLower(st.Mode), "setup") || len(st.Databases["PK"].Certificates) != 0 || len(st.Databases["PKDefault"].Certificates) == 0 {
		t.Fatalf("after DeleteAllKeys: %+v", st)
	}
	if st = sushySecureBoot(t, url, vm.ID, "enable", "true"); !st.Enabled {
		t.Fatalf("secure boot not enabled: %+v", st)
	}
	if x := lab.LiveXML(t, vm.Name, libvirt.DomainXMLInactive); !strings.Contains(x, "deleted-keys>PK,KEK,db,dbx<") || !strings.Contains(x, "template='"+fw.Vars+"'") {
		t.Errorf("the domain does not keep the deleted keys with the empty template:\n%s", x)
	}
	sushy(t, url, "admin", "e2e-pass", vm.ID, "boot", "Cd", "Once", "UEFI")
	sushy(t, url, "admin", "e2e-pass", vm.ID, "reset", "On")
	markers := vm.WaitMarker(t, testenv.Marker, 0, 2*bootTimeout)
	lab.WaitPower(t, vm.ID, machine.PowerOff, bootTimeout) // the marker ISO halts

	// reset_secure_boot_keys_to_default: the enrolled template again, made
	// anew at the start; OVMF refuses the unsigned grub.
	st = sushySecureBoot(t, url, vm.ID, "reset-keys", "ResetAllKeysToDefault")
	if st.Refused != nil || !strings.Contains(strings.ToLower(st.Mode), "user") || len(st.Databases["PK"].Certificates) == 0 {
		t.Fatalf("after ResetAllKeysToDefault: %+v", st)
	}
	denied := testenv.Count(vm.SerialLog, "Access Denied")
	// The baseline is taken right before this boot, not when the first
	// marker showed: what the setup-mode boot wrote after that (the log
	// is written as qemu flushes it) is not this boot's.
	if c, _ := vm.Markers(); c >= markers {
		markers = c
	}
	sushy(t, url, "admin", "e2e-pass", vm.ID, "boot", "Cd", "Once", "UEFI")
	sushy(t, url, "admin", "e2e-pass", vm.ID, "reset", "On")
	vm.WaitMarker(t, "Access Denied", denied, 2*bootTimeout)
	if c, _ := vm.Markers(); c != markers {
		t.Errorf("the unsigned ISO booted with the default keys (%d markers, %d before this boot)", c, markers)
	}

	// One database's reset, and the state seen by a second vbmcd.
	if st = sushySecureBoot(t, url, vm.ID, "db-reset-keys", "db", "DeleteAllKeys"); st.Refused != nil || len(st.Databases["db"].Certificates) != 0 || len(st.Databases["KEK"].Certificates) == 0 {
		t.Fatalf("after db DeleteAllKeys: %+v", st)
	}
	// The factory databases advertise no action (sushy finds none to
	// call); a client that posts anyway is refused.
	if code, body := postJSON(t, url, "/redfish/v1/Systems/"+vm.ID+"/SecureBoot/SecureBootDatabases/dbDefault/Actions/SecureBootDatabase.ResetKeys",
		`{"ResetKeysType":"DeleteAllKeys"}`); code != http.StatusBadRequest || !strings.Contains(body, "ActionNotSupported") {
		t.Errorf("reset of dbDefault: %d %s, want 400 ActionNotSupported", code, body)
	}
	url2 := daemon(t, "e2e-sbkeys-")
	if st2 := sushySecureBoot(t, url2, vm.ID, "show"); len(st2.Databases["db"].Certificates) != 0 || len(st2.Databases["PK"].Certificates) == 0 {
		t.Errorf("a second vbmcd sees db %v, PK %v; want db deleted, PK kept", st2.Databases["db"].Certificates, st2.Databases["PK"].Certificates)
	}
}

// TestE2EUefiHttpBoot: a UefiHttp override with HttpBootUri, as Ironic's
// redfish-https boot interface sets it, boots the marker ISO served on
// loopback (which the VM itself could never reach): vbmcd fetches it and
// the VM boots it from the CD drive, not its own disk. Bad URIs are
// refused, or fail the power-on visibly.
func TestE2EUefiHttpBoot(t *testing.T) {
	fw := virt.DetectFirmware()
	testenv.Require(t, fw.Code != "", "OVMF (package ovmf)")
	iso := testenv.MarkerISO(t)
	images := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/marker.iso" {
			http.ServeFile(w, r, iso)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(images.Close)
	lab := virttest.New(t, "e2e-httpboot-")
	vm := lab.NewVM(t, "a", virttest.VMOptions{UEFI: true, NoCD: true, DiskMarker: true})
	url := daemon(t, "e2e-httpboot-")

	st := sushySecureBoot(t, url, vm.ID, "http-boot", "ftp://127.0.0.1/marker.iso", "Once")
	if st.Refused == nil || st.Refused.Status != http.StatusBadRequest || !slices.Contains(st.Refused.Messages, "PropertyValueFormatError") {
		t.Errorf("an ftp HttpBootUri: %+v, want 400 PropertyValueFormatError", st.Refused)
	}

	// A URI with nothing behind it: the power-on fails and says why,
	// either in the answer or, when the fetch outlasts the answer, in the
	// system's health.
	missing := images.URL + "/missing.iso"
	if st = sushySecureBoot(t, url, vm.ID, "http-boot", missing, "Once"); st.Refused != nil {
		t.Fatalf("UefiHttp override: %+v", st.Refused)
	}
	onRefused(t, url, lab, vm, "ResourceMissingAtURI", "missing.iso", "a missing image")

	img := images.URL + "/marker.iso"
	httpBootOnce(t, url, lab, vm, img, testenv.Marker)
	// The override was Once: the next boot is the disk's, and takes the
	// image out.
	onceSpent(t, url, vm)
}

// onRefused powers vm on with a UefiHttp override whose image cannot
// boot: the On is refused (400 with message msg), or accepted and the
// system's health turns Critical with a Status that contains why; either
// way the VM stays off. what names the image in failures.
func onRefused(t *testing.T, url string, lab *virttest.Lab, vm *virttest.VM, msg, why, what string) {
	t.Helper()
	if st := sushySecureBoot(t, url, vm.ID, "reset", "On"); st.Refused != nil {
		if st.Refused.Status != http.StatusBadRequest || !slices.Contains(st.Refused.Messages, msg) {
			t.Errorf("On with %s: %+v, want 400 %s", what, st.Refused, msg)
		}
	} else if !testenv.WaitFor(bootTimeout, func() bool {
		v := getJSON(t, url, "/redfish/v1/Systems/"+vm.ID)
		s, _ := v["Status"].(map[string]any)
		return s["Health"] == "Critical" && strings.Contains(string(mustJSON(t, v["Status"])), why)
	}) {
		t.Errorf("On with %s was accepted and the system never said why", what)
	}
	if s := lab.DomainState(t, vm.Name); s != libvirt.DomainShutoff {
		t.Errorf("the VM started after On with %s (state %d)", what, s)
	}
}

// httpBootOnce sets a Once UefiHttp override to img and powers vm on: it
// boots img (its serial console shows marker), not its disk, with img in
// the Cd meanwhile, and powers itself off (the marker images halt).
func httpBootOnce(t *testing.T, url string, lab *virttest.Lab, vm *virttest.VM, img, marker string) {
	t.Helper()
	if st := sushySecureBoot(t, url, vm.ID, "http-boot", img, "Once"); st.Refused != nil || st.Boot["HttpBootUri"] != img || st.Boot["BootSourceOverrideTarget"] != "UefiHttp" {
		t.Fatalf("UefiHttp override: %+v", st)
	}
	sushy(t, url, "admin", "e2e-pass", vm.ID, "reset", "On")
	vm.WaitMarker(t, marker, 0, 2*bootTimeout)
	if _, d := vm.Markers(); d != 0 {
		t.Errorf("the disk booted although the override said UefiHttp")
	}
	cd := getJSON(t, url, "/redfish/v1/Managers/"+vm.ID+"/VirtualMedia/Cd")
	if cd["Inserted"] != true || cd["Image"] != img {
		t.Errorf("Cd during the UefiHttp boot: Inserted %v, Image %v; want true, %s", cd["Inserted"], cd["Image"], img)
	}
	lab.WaitPower(t, vm.ID, machine.PowerOff, bootTimeout)
}

// onceSpent: after a Once override's boot the override reads Disabled,
// and the next On boots vm's disk with the Cd empty.
func onceSpent(t *testing.T, url string, vm *virttest.VM) {
	t.Helper()
	if st := sushySecureBoot(t, url, vm.ID, "show"); st.Boot["BootSourceOverrideEnabled"] != "Disabled" {
		t.Errorf("the Once override stayed: %v", st.Boot)
	}
	sushy(t, url, "admin", "e2e-pass", vm.ID, "reset", "On")
	vm.WaitMarker(t, testenv.DiskMarker, 0, 2*bootTimeout)
	if cd := getJSON(t, url, "/redfish/v1/Managers/"+vm.ID+"/VirtualMedia/Cd"); cd["Inserted"] != false {
		t.Errorf("Cd after a boot without the override: Inserted %v, Image %v", cd["Inserted"], cd["Image"])
	}
}

func getJSON(t *testing.T, url, path string) map[string]any {
	t.Helper()
	r, err := send("GET", url+path, "admin", "e2e-pass", "")
	if err != nil {
		t.Fatal(err)
	}
	v := r.object()
	if v == nil {
		t.Fatalf("GET %s: %d, not a JSON object: %.200s", path, r.Code, r.Body)
	}
	return v
}

func postJSON(t *testing.T, url, path, body string) (int, string) {
	t.Helper()
	r, err := send("POST", url+path, "admin", "e2e-pass", body)
	if err != nil {
		t.Fatal(err)
	}
	return r.Code, string(r.Body)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
