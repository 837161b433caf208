package simfile

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/sim"
	"github.com/bmlab/bmlab/internal/testenv"
)

// A Metal3 job's sushy-tools configuration is read as it is: the Python
// around the list (an import, a namedtuple call, computed values) is
// skipped, the list and the notifier's URL are read, both quoting styles
// and a trailing comma are taken, and the settings vbmcd leaves alone are
// named with what does the same in vbmcd.
func TestSushyConfigAsMetal3WritesIt(t *testing.T) {
	f, err := Load("testdata/sushy-metal3.conf")
	if err != nil {
		t.Fatal(err)
	}
	if f.Form != FormSushyConfig || f.Notifier.URL != "http://127.0.0.1:9001" {
		t.Errorf("form %q, notifier %+v", f.Form, f.Notifier)
	}
	want := []sim.System{
		{UUID: "3d8a2c0e-5e3f-4d7b-9a51-0c6f1b2e7a01", Name: "fake1", Power: machine.PowerOff, Notify: true,
			NICs: []sim.NIC{{MAC: "00:5c:52:31:3a:01", IP: "172.22.0.101"}}},
		{UUID: "3D8A2C0E-5E3F-4D7B-9A51-0C6F1B2E7A02", Name: "fake2", Power: machine.PowerOn,
			NICs:       []sim.NIC{{MAC: "00:5c:52:31:3a:02", IP: "172.22.0.102"}, {MAC: "00:5c:52:31:3a:12"}},
			BootDevice: machine.BootPxe, BootMode: machine.BootModeLegacy},
	}
	if diff := cmp.Diff(want, f.Systems, cmpopts.IgnoreFields(sim.System{}, "Fake")); diff != "" {
		t.Errorf("systems (-want +got):\n%s", diff)
	}
	// The entry is kept as the fake driver keeps it, old keys included.
	if f.Systems[1].Fake["fake_ipa"] != false || f.Systems[1].Fake["name"] != "fake2" {
		t.Errorf("fake2's entry as kept: %v", f.Systems[1].Fake)
	}
	joined := strings.Join(f.Ignored, "\n")
	for _, s := range []string{"SUSHY_EMULATOR_LISTEN_PORT (vbmcd --redfish-addr)", "SUSHY_EMULATOR_AUTH_FILE (vbmcd --credentials-file", "SUSHY_EMULATOR_FAKE_IPA"} {
		if !strings.Contains(joined, s) {
			t.Errorf("ignored settings %q lack %q", f.Ignored, s)
		}
	}
	if strings.Contains(joined, "FAKE_IPA_API_URL") || strings.Contains(joined, "Host") {
		t.Errorf("ignored settings name fake-ipa's or Python's own names: %q", f.Ignored)
	}
}

// The list alone as JSON (nodes.json, which Metal3's scripts paste into the
// configuration), and vbmcd's own form with its hardware.
func TestJSONListAndVbmcdForm(t *testing.T) {
	f, err := Load("testdata/nodes.json")
	if err != nil {
		t.Fatal(err)
	}
	if f.Form != FormSushyJSON || len(f.Systems) != 2 || f.Systems[1].Notify != true || f.Systems[0].Notify ||
		f.Notifier.URL != DefaultNotificationURL || f.Systems[0].NICs[0].IP != "192.168.111.21" {
		t.Errorf("nodes.json: %+v", f)
	}

	f, err = Load("testdata/systems.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []sim.System{{
		Name: "worker-0", UUID: sim.UUIDFor("worker-0"), Power: machine.PowerOn, VCPUs: 16, MemoryBytes: 64 << 30,
		NICs:       []sim.NIC{{MAC: "52:54:00:10:00:01", IP: "192.168.111.30", Network: "baremetal"}, {MAC: "52:54:00:20:00:01", Network: "provisioning"}},
		Disks:      []sim.Disk{{ID: "sda", Capacity: 480 << 30, Bus: "sata", SSD: true}, {ID: "sdb", Capacity: 4 << 40, Bus: "sata"}},
		BIOS:       map[string]any{"ProcTurboMode": "Disabled", "PxeRetryCount": 5},
		Firmware:   map[machine.FirmwareComponent]string{machine.FirmwareBIOS: "2.10.1", machine.FirmwareBMC: "5.0"},
		BootDevice: machine.BootPxe, Notify: true,
	}, {
		Name: "worker-1", UUID: "9b2f0a4c-7d1e-4c3b-8e5f-0a1b2c3d4e5f", BootMode: machine.BootModeLegacy, Media: sim.MediaFetch,
		NICs: []sim.NIC{{MAC: "52:54:01:00:00:02"}},
	}}
	if diff := cmp.Diff(want, f.Systems); diff != "" {
		t.Errorf("systems.yaml (-want +got):\n%s", diff)
	}
	if f.Form != FormVbmcd || f.Media != sim.MediaProbe || f.Notifier.URL != "http://127.0.0.1:9999" {
		t.Errorf("systems.yaml: form %q, media %q, notifier %+v", f.Form, f.Media, f.Notifier)
	}
}

// A bad file is refused whole, each problem naming the entry and the
// field, and saying what is wanted.
func TestBadFilesNameTheEntryAndField(t *testing.T) {
	entry := func(fields string) string {
		return "SUSHY_EMULATOR_FAKE_SYSTEMS = [\n  {'uuid': '27946b59-9e44-4fa7-8e91-f3527a1ef094', 'name': 'fake', 'power_state': 'Off', 'nics': [{'mac': '00:5c:52:31:3a:9c'}]},\n  {" + fields + "},\n]\n"
	}
	ok := "'uuid': '27946b59-9e44-4fa7-8e91-f3527a1ef095', 'name': 'fake2', 'power_state': 'Off', 'nics': []"
	for _, tc := range []struct {
		name, file string
		want       []string
	}{
		{"uuid missing", entry("'name': 'fake2', 'power_state': 'Off', 'nics': []"),
			[]string{"entry 2 (fake2): uuid is missing"}},
		{"uuid not a UUID", entry(strings.Replace(ok, "27946b59-9e44-4fa7-8e91-f3527a1ef095", "node-0", 1)),
			[]string{`entry 2 (fake2): uuid "node-0": want a UUID`}},
		{"uuid twice", entry(strings.Replace(ok, "ef095", "ef094", 1)),
			[]string{"entry 2 (fake2): uuid 27946b59-9e44-4fa7-8e91-f3527a1ef094 is also SUSHY_EMULATOR_FAKE_SYSTEMS entry 1 (fake)'s"}},
		{"name twice", entry(strings.Replace(ok, "'fake2'", "'fake'", 1)),
			[]string{"entry 2 (fake): name fake is also SUSHY_EMULATOR_FAKE_SYSTEMS entry 1 (fake)'s"}},
		{"power state", entry(strings.Replace(ok, "'Off'", "'off'", 1)),
			[]string{`entry 2 (fake2): power_state "off": want On or Off`}},
		{"power state a bool", entry(strings.Replace(ok, "'Off'", "False", 1)),
			[]string{"entry 2 (fake2): power_state is the boolean false; want a string"}},
		{"nics not a list", entry(strings.Replace(ok, "[]", "{}", 1)),
			[]string{"entry 2 (fake2): nics is a dict; want a list"}},
		{"bad mac", entry(strings.Replace(ok, "[]", "[{'mac': '00:5c:52:31:3a'}]", 1)),
			[]string{`entry 2 (fake2): nics[0]: mac "00:5c:52:31:3a": want a MAC address`}},
		{"mac twice", entry(strings.Replace(ok, "[]", "[{'mac': '00:5C:52:31:3A:9C'}]", 1)),
			[]string{"nics[0]: mac 00:5c:52:31:3a:9c is also SUSHY_EMULATOR_FAKE_SYSTEMS entry 1 (fake): nics[0]'s"}},
		{"bad ip", entry(strings.Replace(ok, "[]", "[{'mac': '00:5c:52:31:3a:9d', 'ip': '172.22.0.300'}]", 1)),
			[]string{`entry 2 (fake2): nics[0]: ip "172.22.0.300": want an IPv4 or IPv6 address`}},
		{"notifier flag", entry(ok + ", 'external_notifier': 'yes'"),
			[]string{`entry 2 (fake2): external_notifier is the string "yes"; want True or False`}},
		{"boot device", entry(ok + ", 'boot_device': 'Floppy'"),
			[]string{`entry 2 (fake2): boot_device "Floppy": want one of`}},
		{"entry not a dict", "SUSHY_EMULATOR_FAKE_SYSTEMS = ['fake']\n",
			[]string{`entry 1 is the string "fake"; want a dict with uuid, name, power_state and nics`}},
		{"several problems at once", entry("'name': 'a/b', 'power_state': 'Of'"),
			[]string{"entry 2 (a/b): uuid is missing", `name "a/b" has a / ? or #`, `power_state "Of"`, "nics is missing"}},
		{"no list", "SUSHY_EMULATOR_FAKE_DRIVER = True\n",
			[]string{"no SUSHY_EMULATOR_FAKE_SYSTEMS"}},
		{"a computed list", "import json\nSUSHY_EMULATOR_FAKE_SYSTEMS = json.load(open('nodes.json'))\n",
			[]string{`line 2 column 31: the value of SUSHY_EMULATOR_FAKE_SYSTEMS has name "json"`, "vbmcd does not run the file", "give the JSON form"}},
		{"an expression", "SUSHY_EMULATOR_FAKE_SYSTEMS = [] + []\n",
			[]string{`line 1 column 34: the value of SUSHY_EMULATOR_FAKE_SYSTEMS has operator "+"`}},
		{"extended later", entry(ok) + "SUSHY_EMULATOR_FAKE_SYSTEMS += [{}]\n",
			[]string{"line 5: SUSHY_EMULATOR_FAKE_SYSTEMS is set with +="}},
		{"set in a block", "if True:\n    SUSHY_EMULATOR_FAKE_SYSTEMS = []\n",
			[]string{"line 2: SUSHY_EMULATOR_FAKE_SYSTEMS is set in a block"}},
		{"unclosed", "SUSHY_EMULATOR_FAKE_SYSTEMS = [\n  {'uuid': 'x',\n",
			[]string{`line 2: "{" is never closed`}},
		{"unclosed string", "SUSHY_EMULATOR_FAKE_SYSTEMS = ['x]\n",
			[]string{"line 1: a string is not closed on its line"}},
		{"a bad notifier URL", entry(ok) + "EXTERNAL_NOTIFICATION_URL = 'localhost:9999'\n",
			[]string{`EXTERNAL_NOTIFICATION_URL "localhost:9999": want an http:// or https:// URL`}},
		{"a certificate without its key", entry(ok) + "EXTERNAL_NOTIFICATION_CERTFILE = '/c.pem'\n",
			[]string{"EXTERNAL_NOTIFICATION_CERTFILE and EXTERNAL_NOTIFICATION_KEYFILE go together"}},
		{"JSON booleans in Python", "SUSHY_EMULATOR_FAKE_SYSTEMS = [{'external_notifier': true}]\n",
			[]string{`has name "true"`}},
		{"JSON with Python booleans", `[{"uuid": "27946b59-9e44-4fa7-8e91-f3527a1ef094", "external_notifier": True}]`,
			[]string{"sushy-tools JSON", "line 1: invalid character 'T'"}},
		{"vbmcd: unknown key", "systems:\n- name: n0\n  memroy: 8Gi\n",
			[]string{`systems[0] (n0): unknown key "memroy"`}},
		{"vbmcd: bad size", "systems:\n- name: n0\n  memory: 8GB\n",
			[]string{`systems[0] (n0): memory is the string "8GB"; want a size in bytes, or with Ki, Mi, Gi or Ti`}},
		{"vbmcd: a version as a number", "systems:\n- name: n0\n  firmware: {BIOS: 2.10}\n",
			[]string{`systems[0] (n0): firmware: BIOS is the number 2.1; want a version string`}},
		{"vbmcd: bios", "systems:\n- name: n0\n  bios: {ProcTurboMode: Off}\n",
			[]string{`systems[0] (n0): bios: BIOS attribute "ProcTurboMode": value false has the wrong type`}},
		{"vbmcd: bios boot mode", "systems:\n- name: n0\n  bios: {BootMode: Bios}\n",
			[]string{`systems[0] (n0): bios: BootMode is set with the system's bootMode`}},
		{"vbmcd: disk", "systems:\n- name: n0\n  disks: [{name: sdy, size: 1Gi}, {bus: ide}]\n",
			[]string{`disks[0]: name "sdy": want a device name`, "disks[1]: size is missing", `disks[1]: bus "ide"`}},
		{"vbmcd: media", "media: lazy\nsystems:\n- name: n0\n  media: fast\n",
			[]string{`media "lazy": want fetch`, `systems[0] (n0): media "fast"`}},
		{"vbmcd: secure boot on legacy", "systems:\n- name: n0\n  bootMode: Legacy\n  secureBoot: true\n",
			[]string{"systems[0] (n0): secureBoot true needs bootMode UEFI"}},
		{"vbmcd: no systems", "notifier: {url: 'http://127.0.0.1:1'}\n",
			[]string{"top level: systems is missing"}},
		{"vbmcd: YAML", "systems:\n- name: n0\n name: n1\n",
			[]string{"vbmcd YAML", "line 2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("f", []byte(tc.file))
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.file)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
		})
	}
}

// Many bad entries make a bounded error.
func TestProblemsAreBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("[")
	for i := range 100 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"name": "n"}`)
	}
	b.WriteString("]")
	_, err := Parse("f", []byte(b.String()))
	var fe *Error
	if !errors.As(err, &fe) || len(fe.Problems) != maxProblems || fe.More == 0 || !strings.HasSuffix(err.Error(), "more") {
		t.Fatalf("error: %v", err)
	}
}

// Python literals as ast.literal_eval reads them.
func TestPythonLiterals(t *testing.T) {
	src := `# comment
A = 'it''s' "x" r'\d' '\x41\u00e9\n'  # joined
B = (1, -2, 0x1f, 1_000, 2.5e3, +3)
C = {'k': [None, True, False], "d": {}}; D = ()
E = 1,
F = (1)
G = """multi
line""" \
  'more'
H = [
  1,  # a comment inside
  2,
]
def f(x):
    return {'A': 'not this one'}
B_not = f(1)
`
	vals, _, others, err := pyAssignments([]byte(src), "A", "B", "C", "D", "E", "F", "G", "H")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"A": "its" + "x" + `\d` + "Aé\n",
		"B": []any{int64(1), int64(-2), int64(31), int64(1000), 2500.0, int64(3)},
		"C": map[string]any{"k": []any{nil, true, false}, "d": map[string]any{}},
		"D": []any{},
		"E": []any{int64(1)},
		"F": int64(1),
		"G": "multi\nline" + "more",
		"H": []any{int64(1), int64(2)},
	}
	if diff := cmp.Diff(want, vals); diff != "" {
		t.Errorf("values (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"B_not"}, others); diff != "" {
		t.Errorf("other names (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"A = f'x'", "A = 1j", "A = 012", "A = {1: 2}", "A = {1, 2}", "A = [" + strings.Repeat("[", 100) + strings.Repeat("]", 101)} {
		if _, _, _, err := pyAssignments([]byte(bad+"\n"), "A"); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

// allocated is what f allocates, in bytes (every allocation, freed or not:
// an upper bound of the memory it held).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestPythonConfigMemoryBounded: reading a sushy-tools configuration of
// Python takes memory for the values asked for, not for the file's tokens
// (issue 46: a 4 MB file took 1.2 GB, 8 MB 2.9 GB; 3 GB were allocated for
// 4 MB of brackets or commas). Files of 4 MiB (1 MiB with -short) whose statements vbmcd does
// not read (deep brackets, a long list, commas, two million expression
// lines) each allocate at most 8 times their size; a list vbmcd does read
// costs at most twice what the same list costs in the JSON form.
func TestPythonConfigMemoryBounded(t *testing.T) {
	dir := t.TempDir()
	n := 4 << 20
	if testing.Short() {
		n = 1 << 20 // the unit tests run under -race, ten times slower
	}
	for name, body := range map[string]string{
		"brackets":         "X = " + strings.Repeat("[", n),
		"a list not read":  "X = [" + strings.Repeat("1,", n/2) + "]\n",
		"commas":           "X = [" + strings.Repeat(",", n) + "]\n",
		"expression lines": "A = 1\n" + strings.Repeat("a\n", n/2),
	} {
		p := testenv.WriteFile(t, dir, "c.py", []byte(body))
		if got := allocated(func() { _, _ = SushySettings(p, "SUSHY_EMULATOR_LISTEN_PORT") }); got > 8*uint64(len(body)) {
			t.Errorf("%s (%d bytes): %d MB allocated, more than 8 times the file", name, len(body), got>>20)
		}
	}
	list := "[" + strings.Repeat("1,", n/2) + "1]"
	py, js := testenv.WriteFile(t, dir, "list.py", []byte("SUSHY_EMULATOR_LISTEN_PORT = "+list+"\n")), testenv.WriteFile(t, dir, "list.json", []byte(`{"SUSHY_EMULATOR_LISTEN_PORT": `+list+"}\n"))
	var pyErr, jsErr error
	fromPy := allocated(func() { _, pyErr = SushySettings(py, "SUSHY_EMULATOR_LISTEN_PORT") })
	fromJSON := allocated(func() { _, jsErr = SushySettings(js, "SUSHY_EMULATOR_LISTEN_PORT") })
	if pyErr != nil || jsErr != nil || fromPy > 2*fromJSON {
		t.Errorf("a list read: %d MB allocated from Python, %d MB from JSON (%v, %v); want at most twice", fromPy>>20, fromJSON>>20, pyErr, jsErr)
	}
	t.Logf("a list of %d values read: %d MB allocated from Python, %d MB from JSON", n/2+1, fromPy>>20, fromJSON>>20)
}
