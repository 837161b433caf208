package redfish

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
)

// vendorView is what a client should see of a machine of one personality;
// written out here from the vendors' public material (docs/personalities.md),
// not read from internal/personality, so a wrong table fails.
type vendorView struct {
	Personality  string              `json:"personality"`
	UUID         string              `json:"uuid"`
	Manufacturer string              `json:"manufacturer"`
	Model        string              `json:"model"`
	BIOS         string              `json:"bios"`
	BMCModel     string              `json:"bmc_model"`
	BMCFirmware  string              `json:"bmc_firmware"`
	Oem          []string            `json:"oem"`
	MediaAt      string              `json:"media_at"`
	Members      map[string][]string `json:"members"`
	Insert       string              `json:"insert"`
}

var vendorViews = []vendorView{
	{Personality: "generic", Manufacturer: "bmlab", Model: "bmlab virtual server", BIOS: "1.0.0",
		BMCModel: "bmlab virtual server BMC", BMCFirmware: "1.0.0", Oem: []string{}, MediaAt: "both",
		Members: map[string][]string{"Cd": {"CD", "DVD"}, "Removable": {"USBStick", "Floppy"}}, Insert: "Cd"},
	{Personality: "idrac9", Manufacturer: "Dell Inc.", Model: "PowerEdge R660", BIOS: "2.3.5",
		BMCModel: "16G Monolithic", BMCFirmware: "7.10.70.00", Oem: []string{"Dell"}, MediaAt: "manager",
		Members: map[string][]string{"CD": {"CD", "DVD"}, "RemovableDisk": {"USBStick", "Floppy"}}, Insert: "CD"},
	{Personality: "idrac10", Manufacturer: "Dell Inc.", Model: "PowerEdge R770", BIOS: "1.2.1",
		BMCModel: "17G Monolithic", BMCFirmware: "1.20.25.00", Oem: []string{"Dell"}, MediaAt: "system",
		Members: map[string][]string{"1": {"CD", "DVD"}, "2": {"USBStick", "Floppy"}}, Insert: "1"},
	{Personality: "ilo6", Manufacturer: "HPE", Model: "ProLiant DL360 Gen11", BIOS: "U54 v2.16 (03/01/2024)",
		BMCModel: "iLO 6", BMCFirmware: "iLO 6 v1.59", Oem: []string{"Hpe"}, MediaAt: "manager",
		Members: map[string][]string{"1": {"USBStick", "Floppy"}, "2": {"CD", "DVD"}}, Insert: "2"},
	{Personality: "supermicro-x13", Manufacturer: "Supermicro", Model: "SYS-221H-TNR", BIOS: "2.1",
		BMCModel: "X13DEM", BMCFirmware: "01.03.10", Oem: []string{"Supermicro"}, MediaAt: "manager",
		Members: map[string][]string{"CD1": {"CD", "DVD"}}, Insert: "CD1"},
}

// allQuirksOff turns every quirk off: the layout tests read the vendors'
// shape alone.
const allQuirksOff = "-power-on-conflict,-refuse-in-post,-stale-inserted,-media-slot-one,-eject-needs-power-off,-slow-bios-patch,-scp-target-list"

// personalityFixture is a media fixture whose machine i has the
// personality of vendorViews[i], recorded with the machine as vbmcd's
// admin socket records it.
func personalityFixture(t *testing.T, quirks string) (*mediaFixture, []vendorView) {
	t.Helper()
	f := newMediaFixtureN(t, len(vendorViews))
	views := slices.Clone(vendorViews)
	for i := range views {
		views[i].UUID = f.ids[i]
		if _, err := f.svc.UpdateSettings(context.Background(), f.ids[i], func(s *machine.Settings) error {
			s.Personality, s.Quirks = views[i].Personality, quirks
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return f, views
}

// TestPersonalitiesSushy: python3-sushy, as Ironic's redfish driver reads a
// BMC, sees each vendor's Manufacturer, Model, firmware strings, Oem
// vendor, and its virtual media where the vendor hangs it, with the
// vendor's member ids; it inserts and ejects at the vendor's CD member.
func TestPersonalitiesSushy(t *testing.T) {
	testenv.Integration(t)
	py := testenv.Python(t, "sushy")
	f, views := personalityFixture(t, allQuirksOff)
	in, _ := json.Marshal(views)
	cmd := exec.Command(py, "testdata/sushy_personality.py", f.listen(t), testUser, testPass, f.images.URL+"/small.iso")
	cmd.Stdin = strings.NewReader(string(in))
	runToDone(t, "sushy", cmd)
}

// personalitiesGofish is the personalities' fixture (quirks off) and its
// views, and gofish logged in to its shared listener (integration tests).
func personalitiesGofish(t *testing.T) (*mediaFixture, []vendorView, *gofish.APIClient) {
	t.Helper()
	testenv.Integration(t)
	f, views := personalityFixture(t, allQuirksOff)
	return f, views, gofishConnect(t, gofish.ClientConfig{Endpoint: f.listen(t), Username: testUser, Password: testPass, BasicAuth: true})
}

// TestPersonalitiesGofish: gofish reads the same.
func TestPersonalitiesGofish(t *testing.T) {
	f, views, c := personalitiesGofish(t)
	for _, w := range views {
		t.Run(w.Personality, func(t *testing.T) {
			sys, err := schemas.GetObject[schemas.ComputerSystem](c, systemURI(w.UUID))
			if err != nil {
				t.Fatal(err)
			}
			if sys.Manufacturer != w.Manufacturer || sys.Model != w.Model || sys.BiosVersion != w.BIOS {
				t.Errorf("system: %q %q %q, want %q %q %q", sys.Manufacturer, sys.Model, sys.BiosVersion, w.Manufacturer, w.Model, w.BIOS)
			}
			mgrs, err := sys.ManagedBy()
			if err != nil || len(mgrs) != 1 {
				t.Fatalf("managers %d %v", len(mgrs), err)
			}
			if m := mgrs[0]; m.Model != w.BMCModel || m.FirmwareVersion != w.BMCFirmware {
				t.Errorf("manager: %q %q, want %q %q", m.Model, m.FirmwareVersion, w.BMCModel, w.BMCFirmware)
			}
			chassis, err := sys.Chassis()
			if err != nil || len(chassis) != 1 || chassis[0].Manufacturer != w.Manufacturer {
				t.Errorf("chassis %v %v", chassis, err)
			}
			fromMgr, errMgr := mgrs[0].VirtualMedia()
			fromSys, errSys := sys.VirtualMedia()
			vms, none := fromMgr, fromSys
			if w.MediaAt == "system" {
				vms, none = fromSys, fromMgr
				if errSys != nil {
					t.Fatal(errSys)
				}
			} else if errMgr != nil {
				t.Fatal(errMgr)
			}
			if w.MediaAt == "both" {
				none = nil
				if len(fromMgr) != len(fromSys) {
					t.Errorf("manager %d members, system %d", len(fromMgr), len(fromSys))
				}
			}
			if len(none) != 0 {
				t.Errorf("virtual media where %s has none: %d members", w.Personality, len(none))
			}
			got := map[string][]string{}
			for _, vm := range vms {
				for _, mt := range vm.MediaTypes {
					got[vm.ID] = append(got[vm.ID], string(mt))
				}
			}
			if !mapsEqual(got, w.Members) {
				t.Errorf("members %v, want %v", got, w.Members)
			}
			for _, vm := range vms {
				if vm.ID != w.Insert {
					continue
				}
				if _, err := vm.InsertMedia(&schemas.VirtualMediaInsertMediaParameters{Image: f.images.URL + "/small.iso"}); err != nil {
					t.Fatalf("insert at %s: %v", vm.ODataID, err)
				}
				if _, err := vm.EjectMedia(); err != nil {
					t.Fatalf("eject at %s: %v", vm.ODataID, err)
				}
			}
		})
	}
}

func mapsEqual(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// TestPersonalityOnlyItsLayout: a member id or a media place another
// vendor has is not found on this one; iLO's own insert action works on an
// iLO only.
func TestPersonalityOnlyItsLayout(t *testing.T) {
	f, views := personalityFixture(t, allQuirksOff)
	dell10, ilo := views[2].UUID, views[3].UUID
	for _, tc := range []struct{ path string }{
		{managerURI(dell10) + "/VirtualMedia"},
		{managerURI(dell10) + "/VirtualMedia/1"},
		{systemURI(ilo) + "/VirtualMedia"},
		{managerURI(ilo) + "/VirtualMedia/Cd"},
		{managerURI(views[4].UUID) + "/VirtualMedia/2"},
	} {
		wantCode(t, f.do(req{path: tc.path}), http.StatusNotFound, tc.path)
	}
	img := `{"Image":"` + f.images.URL + `/small.iso"}`
	wantCode(t, f.post(managerURI(ilo)+"/VirtualMedia/2/Actions/Oem/Hpe/HpeiLOVirtualMedia.InsertVirtualMedia", img), http.StatusNoContent, "iLO's own insert")
	wantCode(t, f.post(managerURI(views[1].UUID)+"/VirtualMedia/CD/Actions/Oem/Hpe/HpeiLOVirtualMedia.InsertVirtualMedia", img), http.StatusNotFound, "iLO's insert on a Dell")
}
