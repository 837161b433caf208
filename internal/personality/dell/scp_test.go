package dell

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/sim"
)

func TestParseProfile(t *testing.T) {
	want := Profile{Components: []Component{
		{FQDD: IDRACFQDD, Attributes: []Attribute{{Name: attrBootOnce, Value: "Enabled"}, {Name: attrFirstBoot, Value: "VCD-DVD"}}},
	}}
	for _, tc := range []struct {
		name, in string
		want     Profile
		err      string
	}{
		{"sushy-oem-idrac's XML", `<SystemConfiguration><Component FQDD="iDRAC.Embedded.1"><Attribute Name="ServerBoot.1#BootOnce">Enabled</Attribute><Attribute Name="ServerBoot.1#FirstBootDevice">VCD-DVD</Attribute></Component></SystemConfiguration>`, want, ""},
		{"JSON", ` {"SystemConfiguration":{"Components":[{"FQDD":"iDRAC.Embedded.1","Attributes":[{"Name":"ServerBoot.1#BootOnce","Value":"Enabled"},{"Name":"ServerBoot.1#FirstBootDevice","Value":"VCD-DVD","Set On Import":"True"}]}]}}`, want, ""},
		{"a number value", `{"SystemConfiguration":{"Components":[{"FQDD":"BIOS.Setup.1-1","Attributes":[{"Name":"PxeRetryCount","Value":4}]}]}}`,
			Profile{Components: []Component{{FQDD: BIOSFQDD, Attributes: []Attribute{{Name: "PxeRetryCount", Value: "4"}}}}}, ""},
		{"neither", "hello", Profile{}, "neither XML"},
		{"no SystemConfiguration", `{"Components":[]}`, Profile{}, "no SystemConfiguration"},
		{"broken XML", `<SystemConfiguration><Component FQDD="x">`, Profile{}, "not a Server Configuration Profile"},
		{"no FQDD", `<SystemConfiguration><Component><Attribute Name="a">b</Attribute></Component></SystemConfiguration>`, Profile{}, "no FQDD"},
		{"no Name", `<SystemConfiguration><Component FQDD="x"><Attribute>b</Attribute></Component></SystemConfiguration>`, Profile{}, "no Name"},
		{"too many", `<SystemConfiguration><Component FQDD="x">` + strings.Repeat(`<Attribute Name="a">b</Attribute>`, maxAttributes+1) + `</Component></SystemConfiguration>`, Profile{}, "at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseProfile(tc.in)
			if tc.err != "" {
				if err == nil || !errors.Is(err, ErrProfile) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want ErrProfile saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestExportImportRoundTrip: a machine's export, in JSON and in XML, read
// back and imported, asks for nothing the machine does not have and
// refuses nothing (read-only attributes are skipped).
func TestExportImportRoundTrip(t *testing.T) {
	m := sim.New(1).List()[0]
	nics := []string{"525400000001"}
	p := Export(m, []string{"ALL"}, "PowerEdge R660", "ABCDEFG", "7.10.70.00", "2026-01-01T00:00:00Z", nics)
	js, err := json.Marshal(p.JSON())
	if err != nil {
		t.Fatal(err)
	}
	for name, buf := range map[string]string{"JSON": string(js), "XML": p.XML()} {
		back, err := ParseProfile(buf)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cfg, out := Import(back, []string{"ALL"}, m, nics)
		for _, o := range out {
			if o.Err != "" {
				t.Errorf("%s: %s %s refused: %s", name, o.Component, o.Attribute, o.Err)
			}
		}
		if cfg.BootOrder == nil || len(cfg.BIOS) == 0 || cfg.Boot == nil {
			t.Errorf("%s: the round trip lost parts: %+v", name, cfg)
		}
		if cfg.Boot.Target == nil || *cfg.Boot.Target != machine.BootNone {
			t.Errorf("%s: override %+v, want Normal (None)", name, cfg.Boot)
		}
	}
}

func TestImportRefusesWhatItCannotDo(t *testing.T) {
	m := sim.New(1).List()[0]
	p := Profile{Components: []Component{
		{FQDD: IDRACFQDD, Attributes: []Attribute{{Name: attrFirstBoot, Value: "CD-DVD"}, {Name: "Users.2#Password", Value: "x"}}},
		{FQDD: BIOSFQDD, Attributes: []Attribute{{Name: "PxeRetryCount", Value: "many"}, {Name: attrBootSeq, Value: "Hdd-nope"}, {Name: "TpmSecurity", Value: "On"}}},
		{FQDD: "RAID.Integrated.1-1", Attributes: []Attribute{{Name: "RAIDMode", Value: "x"}}},
		{FQDD: "525400000001", Attributes: []Attribute{{Name: attrLegacyPXE, Value: "PXE"}}},
	}}
	cfg, out := Import(p, []string{"ALL"}, m, []string{"525400000001"})
	if cfg.Boot != nil || cfg.BIOS != nil || cfg.BootOrder != nil {
		t.Errorf("refused attributes made a configuration: %+v", cfg)
	}
	var refused []string
	for _, o := range out {
		if o.Err != "" {
			refused = append(refused, o.Attribute)
		}
	}
	want := []string{attrFirstBoot, "Users.2#Password", "PxeRetryCount", attrBootSeq, "TpmSecurity", "RAIDMode", attrLegacyPXE}
	if diff := cmp.Diff(want, refused); diff != "" {
		t.Errorf("refused (-want +got):\n%s", diff)
	}
	_, out = Import(p, []string{"BIOS"}, m, nil)
	for _, o := range out {
		if o.Component != BIOSFQDD {
			t.Errorf("Target BIOS read %s", o.Component)
		}
	}
}

func TestJobIDs(t *testing.T) {
	for _, tc := range []struct{ task, job string }{{"1", "JID_000000000001"}, {"123456", "JID_000000123456"}} {
		if got := JobID(tc.task); got != tc.job {
			t.Errorf("JobID(%s) = %s", tc.task, got)
		}
		if got, ok := TaskID(tc.job); !ok || got != tc.task {
			t.Errorf("TaskID(%s) = %s %v", tc.job, got, ok)
		}
	}
	for _, bad := range []string{"7", "JID_", "JID_x", "JID_1234567890123", "RID_1"} {
		if _, ok := TaskID(bad); ok {
			t.Errorf("TaskID(%q) took it", bad)
		}
	}
}
