package redfish

import (
	"context"

	"os/exec"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/personality"
	"github.com/bmlab/bmlab/internal/testenv"
)

// testQuirkTimes are short windows, so that each quirk is met and outlived
// in a few seconds.
var testQuirkTimes = QuirkTimes{
	PowerOnConflict: 2 * time.Second,
	InPost:          2 * time.Second,
	StaleInserted:   2 * time.Second,
	SlowBIOSPatch:   3 * time.Second,
}

// quirkCases: each quirk on a machine of the personality that has it (or
// the generic one with the switch on), and the member it uses.
var quirkCases = []struct {
	quirk, personality, on, member string
	args                           []string
}{
	{quirk: "power-on-conflict", personality: "idrac10"},
	{quirk: "refuse-in-post", personality: "ilo6"},
	{quirk: "stale-inserted", personality: "supermicro-x13", member: "CD1"},
	{quirk: "media-slot-one", personality: "idrac10"},
	{quirk: "eject-needs-power-off", personality: "generic", on: "eject-needs-power-off", member: "Cd"},
	{quirk: "slow-bios-patch", personality: "generic", on: "slow-bios-patch", args: []string{"1"}},
}

// TestQuirksSushy meets every quirk through python3-sushy as Ironic's
// redfish driver calls it: on, the client sees the vendor's misbehaviour
// (a 409 to On after a power-off, a 400 in POST, Inserted true after an
// eject, slot 2 refused, an eject refused while on, a BIOS PATCH that
// outlasts the read timeout) and then gets through once the window passes;
// off, the same calls succeed at once.
func TestQuirksSushy(t *testing.T) {
	testenv.Integration(t)
	py := testenv.Python(t, "sushy")
	for _, tc := range quirkCases {
		for _, on := range []bool{true, false} {
			name := tc.quirk + map[bool]string{true: "/on", false: "/off"}[on]
			t.Run(name, func(t *testing.T) {
				f := newMediaFixtureN(t, 1, WithQuirkTimes(testQuirkTimes))
				switches := tc.on
				if !on {
					switches = "-" + tc.quirk
				}
				if _, err := f.svc.UpdateSettings(context.Background(), f.ids[0], func(s *machine.Settings) error {
					s.Personality, s.Quirks = tc.personality, switches
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				mode := map[bool]string{true: "ON", false: "OFF"}[on]
				argv := []string{"testdata/sushy_quirks.py", f.listen(t), testUser, testPass, tc.quirk, mode, f.ids[0]}
				switch {
				case tc.args != nil:
					argv = append(argv, tc.args...)
				default:
					argv = append(argv, f.images.URL+"/small.iso")
					if tc.member != "" {
						argv = append(argv, tc.member)
					}
				}
				runToDone(t, "sushy", exec.Command(py, argv...))
			})
		}
	}
}

// TestQuirkSwitches: a personality's own quirks are on unless switched off,
// others off unless switched on, and the service-wide switches give way
// to a machine's own.
func TestQuirkSwitches(t *testing.T) {
	f := newFixture(t, 1, WithPersonality("idrac10", "stale-inserted"))
	m, _ := f.svc.Get(f.ids[0])
	for _, c := range []struct {
		persona, quirks, quirk string
		want                   bool
	}{
		{"", "", "power-on-conflict", true},
		{"", "", "stale-inserted", true},
		{"", "", "refuse-in-post", false},
		{"ilo6", "", "refuse-in-post", true},
		{"ilo6", "", "stale-inserted", false},
		{"ilo6", "-refuse-in-post", "refuse-in-post", false},
		{"", "-power-on-conflict", "power-on-conflict", false},
		{"", "-power-on-conflict", "media-slot-one", true},
	} {
		mm := *m
		mm.Settings.Personality, mm.Settings.Quirks = c.persona, c.quirks
		if got := s2q(f.srv, &mm, c.quirk); got != c.want {
			t.Errorf("personality %q switches %q: %s %v, want %v", c.persona, c.quirks, c.quirk, got, c.want)
		}
	}
}

func s2q(s *Server, m *machine.Machine, q string) bool {
	p, set := s.personaOf(m)
	return p.Has(personalityQuirk(q), set)
}

func personalityQuirk(q string) personality.Quirk { return personality.Quirk(q) }

func TestParseQuirkTimes(t *testing.T) {
	got, err := ParseQuirkTimes("power-on-conflict=5s, slow-bios-patch=90s")
	if err != nil || got != (QuirkTimes{PowerOnConflict: 5 * time.Second, SlowBIOSPatch: 90 * time.Second}) {
		t.Errorf("ParseQuirkTimes = %+v, %v", got, err)
	}
	for _, bad := range []string{"media-slot-one=5s", "power-on-conflict", "power-on-conflict=0s", "refuse-in-post=2h", "stale-inserted=soon"} {
		if _, err := ParseQuirkTimes(bad); err == nil {
			t.Errorf("ParseQuirkTimes(%q) accepted", bad)
		}
	}
}
