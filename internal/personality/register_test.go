package personality_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/personality"
	"github.com/bmlab/bmlab/internal/testenv"
)

// acme is a vendor of the test's own, declared here and nowhere else: Acme's
// BMC 1 gives its one System, Manager and Chassis ids of its own, hangs one
// virtual CD "Disc" under its Manager, writes Oem.Acme blocks, and refuses
// an eject while the server is on (the quirk eject-needs-power-off, on by
// default as a real vendor's quirks are).
var acme = &personality.Personality{
	Name:         "acme-bmc1",
	Manufacturer: "Acme Corporation",
	Model:        "Acme R1",
	BMCModel:     "Acme BMC 1",
	BMCFirmware:  "1.4.2",
	BIOSVersion:  "A07",
	SystemID:     "Node.1",
	ManagerID:    "BMC.1",
	ChassisID:    "Enclosure.1",
	Media:        []personality.Slot{{ID: "Disc", Drive: machine.SlotCD, Name: "Acme Disc", MediaTypes: []string{"CD", "DVD"}}},
	MediaAt:      personality.UnderManager,
	Quirks:       []personality.Quirk{personality.EjectNeedsPowerOff},
	Oem: personality.OEM{
		System: func(p *personality.Personality, m *machine.Machine, _ string, _ bool) map[string]any {
			return map[string]any{"Acme": map[string]any{
				"@odata.type": "#AcmeSystem.v1_0_0.AcmeSystem",
				"AssetTag":    "ACME-" + personality.ServiceTag(m.ID),
				"Generation":  p.Model,
			}}
		},
		Manager: func(p *personality.Personality, _ *machine.Machine) map[string]any {
			return map[string]any{"Acme": map[string]any{
				"@odata.type":   "#AcmeManager.v1_0_0.AcmeManager",
				"FirmwareTrain": p.BMCFirmware,
			}}
		},
	},
	Sources: []string{"none: a fictional vendor, the test's own (internal/personality/register_test.go)"},
}

// TestRegisterRefuses: Register takes no nil, no name a lab file could not
// spell, no taken name and no personality that is not whole, and says why.
func TestRegisterRefuses(t *testing.T) {
	idrac, err := personality.Lookup("idrac9")
	if err != nil {
		t.Fatal(err)
	}
	copied := func(edit func(p *personality.Personality)) *personality.Personality {
		p := *acme
		p.Name = "acme-bmc2"
		edit(&p)
		return &p
	}
	before := personality.Names()
	for _, tc := range []struct {
		name string
		p    *personality.Personality
		want string
	}{
		{"nil", nil, "nil"},
		{"spaces", copied(func(p *personality.Personality) { p.Name = "Acme BMC 1" }), "lower-case letters"},
		{"empty", copied(func(p *personality.Personality) { p.Name = "" }), "lower-case letters"},
		{"taken", idrac, "the name is taken"},
		{"generic", copied(func(p *personality.Personality) { p.Name = personality.Generic }), "the name is taken"},
		{"no manufacturer", copied(func(p *personality.Personality) { p.Manufacturer = "" }), "Manufacturer"},
		{"no ids", copied(func(p *personality.Personality) { p.ManagerID = "" }), "ManagerID"},
		{"no CD", copied(func(p *personality.Personality) { p.Media = nil }), "CD drive"},
		{"no sources", copied(func(p *personality.Personality) { p.Sources = nil }), "Sources"},
		{"unknown quirk", copied(func(p *personality.Personality) { p.Quirks = []personality.Quirk{"acme-hiccup"} }), "want one of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := personality.Register(tc.p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Register = %v, want an error naming %q", err, tc.want)
			}
		})
	}
	if diff := cmp.Diff(before, personality.Names()); diff != "" {
		t.Errorf("a refused personality is on the list (-want +got):\n%s", diff)
	}
}

// TestRegisterBesideLookups: faces look personalities up on every request
// while Register adds one; under -race, a read of the list that is not
// safe beside the write fails the run.
func TestRegisterBesideLookups(t *testing.T) {
	other := *acme
	other.Name = "acme-bmc3"
	t.Cleanup(func() { personality.Unregister(other.Name) })
	var wg, ready sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Add(1)
		ready.Add(1)
		go func() {
			defer wg.Done()
			personality.Names()
			ready.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := personality.Lookup("idrac9"); err != nil {
					t.Error(err)
					return
				}
				personality.Lookup("acme-bmc3") // found or not, as the Register is done or not
				personality.Names()
			}
		}()
	}
	ready.Wait() // every reader is reading
	err := personality.Register(&other)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if p, err := personality.Lookup("acme-bmc3"); err != nil || p.Name != "acme-bmc3" {
		t.Errorf("Lookup after Register = %v, %v", p, err)
	}
}

// TestAPersonalityOfItsOwn: a vendor declared only in this file (acme) is
// registered, and a Redfish service built as vbmcd builds it (a machine
// service over simulated machines, redfish.New with --personality's
// option, served at the machine's own BMC as --bmc-addresses serves it)
// serves it with no edit elsewhere: gofish reads the vendor's ids,
// Manufacturer, Model and Oem blocks, powers the server on and off through
// ComputerSystem.Reset, inserts into the vendor's member, and meets the
// vendor's quirk (an eject refused while the server is on).
func TestAPersonalityOfItsOwn(t *testing.T) {
	if err := personality.Register(acme); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { personality.Unregister(acme.Name) })
	if err := personality.Register(acme); err == nil || !strings.Contains(err.Error(), "taken") {
		t.Errorf("a second Register = %v, want the name refused as taken", err)
	}
	if p, err := personality.Lookup("acme-bmc1"); err != nil || p != acme {
		t.Fatalf("Lookup = %v, %v", p, err)
	}

	url, id, images := serveAtItsBMC(t, string(acme.Name), "admin", "acme-password")
	c, err := gofish.Connect(gofish.ClientConfig{Endpoint: url, Username: "admin", Password: "acme-password", BasicAuth: true, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Logout)
	systems, err := c.Service.Systems()
	if err != nil || len(systems) != 1 {
		t.Fatalf("systems: %d %v", len(systems), err)
	}
	sys := systems[0]
	mgrs, err := sys.ManagedBy()
	if err != nil || len(mgrs) != 1 {
		t.Fatalf("managers: %d %v", len(mgrs), err)
	}
	chassis, err := sys.Chassis()
	if err != nil || len(chassis) != 1 {
		t.Fatalf("chassis: %d %v", len(chassis), err)
	}
	type seen struct {
		System, Manager, Chassis, Manufacturer, Model, BMCModel, BMCFirmware, BIOS string
		SystemOem, ManagerOem                                                      map[string]map[string]string
	}
	got := seen{
		System: sys.ODataID, Manager: mgrs[0].ODataID, Chassis: chassis[0].ODataID,
		Manufacturer: sys.Manufacturer, Model: sys.Model, BMCModel: mgrs[0].Model, BMCFirmware: mgrs[0].FirmwareVersion, BIOS: sys.BiosVersion,
	}
	if err := json.Unmarshal(sys.OEM, &got.SystemOem); err != nil {
		t.Fatalf("System Oem %s: %v", sys.OEM, err)
	}
	if err := json.Unmarshal(mgrs[0].OEM, &got.ManagerOem); err != nil {
		t.Fatalf("Manager Oem %s: %v", mgrs[0].OEM, err)
	}
	want := seen{
		System: "/redfish/v1/Systems/Node.1", Manager: "/redfish/v1/Managers/BMC.1", Chassis: "/redfish/v1/Chassis/Enclosure.1",
		Manufacturer: "Acme Corporation", Model: "Acme R1", BMCModel: "Acme BMC 1", BMCFirmware: "1.4.2", BIOS: "A07",
		SystemOem: map[string]map[string]string{"Acme": {
			"@odata.type": "#AcmeSystem.v1_0_0.AcmeSystem", "AssetTag": "ACME-" + personality.ServiceTag(id), "Generation": "Acme R1"}},
		ManagerOem: map[string]map[string]string{"Acme": {
			"@odata.type": "#AcmeManager.v1_0_0.AcmeManager", "FirmwareTrain": "1.4.2"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("what gofish reads of Acme's BMC (-want +got):\n%s", diff)
	}
	if chassis[0].Manufacturer != "Acme Corporation" {
		t.Errorf("chassis Manufacturer %q", chassis[0].Manufacturer)
	}

	vms, err := mgrs[0].VirtualMedia()
	if err != nil || len(vms) != 1 || vms[0].ODataID != "/redfish/v1/Managers/BMC.1/VirtualMedia/Disc" {
		t.Fatalf("virtual media %v %v, want the member Disc under the Manager", vms, err)
	}
	if _, err := vms[0].InsertMedia(&schemas.VirtualMediaInsertMediaParameters{Image: images + "/acme.iso"}); err != nil {
		t.Fatalf("insert at Disc: %v", err)
	}

	power := func(rt schemas.ResetType, want schemas.PowerState) {
		t.Helper()
		if _, err := sys.Reset(rt); err != nil {
			t.Fatalf("Reset %s: %v", rt, err)
		}
		var last schemas.PowerState
		if !testenv.WaitFor(10*time.Second, func() bool {
			now, err := schemas.GetObject[schemas.ComputerSystem](c, sys.ODataID)
			if err != nil {
				t.Fatal(err)
			}
			last = now.PowerState
			return last == want
		}) {
			t.Fatalf("after Reset %s: PowerState %s, want %s", rt, last, want)
		}
	}
	power(schemas.OnResetType, schemas.OnPowerState)
	if _, err := vms[0].EjectMedia(); err == nil || !strings.Contains(err.Error(), string(personality.EjectNeedsPowerOff)) {
		t.Errorf("eject while on = %v, want Acme's quirk %s to refuse it", err, personality.EjectNeedsPowerOff)
	}
	power(schemas.ForceOffResetType, schemas.OffPowerState)
	if _, err := vms[0].EjectMedia(); err != nil {
		t.Errorf("eject while off: %v", err)
	}
	vm, err := schemas.GetObject[schemas.VirtualMedia](c, vms[0].ODataID)
	if err != nil || vm.Inserted == nil || *vm.Inserted {
		t.Errorf("after the eject: %+v %v, want nothing inserted", vm, err)
	}
}
