package personality

import (
	"strings"
	"testing"
)

// TestEveryPersonalityIsWhole: each personality names its vendor, its
// firmware and a CD member behind the model's CD drive, its quirks are
// known ones, and a vendor's own ids are set (generic's are the machine's):
// what Register asks of a personality added later (whole).
func TestEveryPersonalityIsWhole(t *testing.T) {
	for _, name := range Names() {
		p, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.whole(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestParseQuirks(t *testing.T) {
	got, err := ParseQuirks(" stale-inserted, -power-on-conflict ,")
	if err != nil || len(got) != 2 || !got[StaleInserted] || got[PowerOnConflict] {
		t.Errorf("ParseQuirks = %v, %v", got, err)
	}
	for _, bad := range []string{"stale", "--stale-inserted", "+stale-inserted"} {
		if _, err := ParseQuirks(bad); err == nil || !strings.Contains(err.Error(), "want one of") {
			t.Errorf("ParseQuirks(%q) = %v, want a refusal naming the quirks", bad, err)
		}
	}
	if _, err := Lookup("idrac"); err == nil || !strings.Contains(err.Error(), "idrac9, idrac10") {
		t.Errorf("Lookup(idrac) = %v", err)
	}
}
