package redfish

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/machine"
)

// TestUefiHttpBoot drives a UefiHttp override as Ironic's redfish-https
// boot interface sets it (Boot.HttpBootUri with the target): the image is
// fetched as the boot begins and sits in the CD drive for that boot, shown
// by the Cd member; bad URIs are refused with the Base message that says
// why.
func TestUefiHttpBoot(t *testing.T) {
	f := newMediaFixture(t)
	// The reset's answer waits for the outcome, so a failed fetch is in it.
	f.svc = machine.NewService(f.be, nil, machine.WithImageFetcher(mustCache(t)), machine.WithAnswerWithin(10*time.Second))
	f.srv = New(f.svc, nil, WithCredentials(testUser, testPass), WithServiceUUID(testService))
	f.h = f.srv.Handler()
	sys := f.sys(0)
	img := f.images.URL + "/small.iso"
	patch := func(body string) *http.Response {
		t.Helper()
		return f.do(req{method: http.MethodPatch, path: sys, body: body}).Result()
	}
	reset := func(rt string) *http.Response {
		t.Helper()
		return f.do(req{method: http.MethodPost, path: sys + "/Actions/ComputerSystem.Reset", body: `{"ResetType":"` + rt + `"}`}).Result()
	}
	cd := func() map[string]any { return decode(t, f.do(req{path: f.cd(0)})) }
	for _, bad := range []struct {
		body   string
		status int
		msg    MessageID
	}{
		{`{"Boot":{"BootSourceOverrideTarget":"UefiHttp","BootSourceOverrideEnabled":"Once"}}`, 400, MsgPropertyMissing},
		{`{"Boot":{"BootSourceOverrideTarget":"UefiHttp","HttpBootUri":"ftp://images/boot.iso"}}`, 400, MsgPropertyValueFormatError},
		{`{"Boot":{"HttpBootUri":"/boot.iso"}}`, 400, MsgPropertyValueFormatError},
		{`{"Boot":{"HttpBootUri":7}}`, 400, MsgPropertyValueTypeError},
		// HTTP boot is a UEFI boot.
		{`{"Boot":{"BootSourceOverrideTarget":"UefiHttp","HttpBootUri":"http://images/boot.efi","BootSourceOverrideMode":"Legacy"}}`, 409, MsgPropertyValueConflict},
	} {
		w := f.do(req{method: http.MethodPatch, path: sys, body: bad.body})
		if ids := messageIDs(t, w); w.Code != bad.status || len(ids) == 0 || ids[0] != string(bad.msg) {
			t.Errorf("PATCH %s: %d %v, want %d %s", bad.body, w.Code, ids, bad.status, bad.msg)
		}
	}

	if w := patch(`{"Boot":{"BootSourceOverrideTarget":"UefiHttp","BootSourceOverrideEnabled":"Once","HttpBootUri":"` + img + `"}}`); w.StatusCode != http.StatusOK && w.StatusCode != http.StatusNoContent {
		t.Fatalf("PATCH UefiHttp: %d", w.StatusCode)
	}
	boot := decode(t, f.do(req{path: sys}))["Boot"].(map[string]any)
	if boot["HttpBootUri"] != img || boot["BootSourceOverrideTarget"] != "UefiHttp" {
		t.Fatalf("Boot after the PATCH: %v", boot)
	}
	if v := cd(); v["Inserted"] != false {
		t.Fatalf("the image is in the drive before any boot: %v", v)
	}
	if w := reset("On"); w.StatusCode != http.StatusNoContent {
		t.Fatalf("On: %d", w.StatusCode)
	}
	if v := cd(); v["Inserted"] != true || v["Image"] != img || v["TransferProtocolType"] != "HTTP" {
		t.Fatalf("Cd after the UefiHttp boot: %v", v)
	}
	m, _ := f.svc.Get(f.ids[0])
	if m.Settings.Boot.Enabled != machine.BootDisabled {
		t.Errorf("the Once override was not spent: %+v", m.Settings.Boot)
	}
	// The boot's image holds the drive: an insert is refused until it goes.
	if w := f.insert(0, img); w.Code != http.StatusConflict {
		t.Errorf("insert over the UefiHttp boot image: %d, want 409", w.Code)
	}
	// The next boot without the override takes it out.
	reset("ForceRestart")
	if v := cd(); v["Inserted"] != false {
		t.Errorf("Cd after a boot without the override: %v", v)
	}

	// Continuous: every boot boots it, and clearing the override while off
	// takes it out at once.
	patch(`{"Boot":{"BootSourceOverrideTarget":"UefiHttp","BootSourceOverrideEnabled":"Continuous","HttpBootUri":"` + img + `"}}`)
	reset("ForceRestart")
	reset("PowerCycle")
	if v := cd(); v["Inserted"] != true || v["Image"] != img {
		t.Errorf("Cd under a Continuous UefiHttp override: %v", v)
	}
	if f.be.Stale(f.ids[0]) {
		t.Errorf("stale after a restart with the Continuous override")
	}
	reset("ForceOff")
	patch(`{"Boot":{"BootSourceOverrideTarget":"None"}}`)
	if v := cd(); v["Inserted"] != false {
		t.Errorf("Cd after the override was cleared while off: %v", v)
	}

	// A URI that is not there: the power-on fails and says why.
	patch(`{"Boot":{"BootSourceOverrideTarget":"UefiHttp","BootSourceOverrideEnabled":"Once","HttpBootUri":"` + f.images.URL + `/missing.iso"}}`)
	w := f.do(req{method: http.MethodPost, path: sys + "/Actions/ComputerSystem.Reset", body: `{"ResetType":"On"}`})
	if ids := messageIDs(t, w); w.Code != http.StatusBadRequest || len(ids) == 0 || ids[0] != string(MsgResourceMissingAtURI) {
		t.Errorf("On with a missing HttpBootUri: %d %v, want 400 ResourceMissingAtURI", w.Code, ids)
	}
	if m, _ := f.svc.Get(f.ids[0]); m.Power != machine.PowerOff || m.PowerFault == "" {
		t.Errorf("after the failed fetch: power %s, fault %q; want Off with the reason", m.Power, m.PowerFault)
	}

	// The BIOS made the machine Legacy after the override was set: the
	// boot is refused, for HTTP boot is a UEFI boot.
	patch(`{"Boot":{"BootSourceOverrideTarget":"UefiHttp","BootSourceOverrideEnabled":"Once","HttpBootUri":"` + img + `"}}`)
	if w := f.do(req{method: http.MethodPatch, path: sys + "/Bios/Settings", body: `{"Attributes":{"BootMode":"Bios"}}`}); w.Code != http.StatusOK && w.Code != http.StatusNoContent && w.Code != http.StatusAccepted {
		t.Fatalf("PATCH BootMode Bios: %d %s", w.Code, w.Body)
	}
	w = f.do(req{method: http.MethodPost, path: sys + "/Actions/ComputerSystem.Reset", body: `{"ResetType":"On"}`})
	if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "Legacy") {
		t.Errorf("On with UefiHttp on a machine gone Legacy: %d %s, want 409 saying the mode is Legacy", w.Code, w.Body)
	}
	if m, _ := f.svc.Get(f.ids[0]); m.Power != machine.PowerOff {
		t.Errorf("the machine went %s", m.Power)
	}
}
