package personality

import (
	"fmt"
	"slices"
	"strings"
)

// Quirk is a BMC misbehaviour, one switch each: a vendor's, with its
// public record, or a case of the project's own (QuirkInfo.Own) that a
// client should survive although no record of a vendor doing it was found.
type Quirk string

// The quirks vbmcd can replay.
const (
	// PowerOnConflict: after a power-off, ComputerSystem.Reset On answers
	// 409 for a while (iDRAC 10; Ironic bug 2162995).
	PowerOnConflict Quirk = "power-on-conflict"
	// RefuseInPost: while the server is in POST, changes (boot override,
	// BIOS settings, resets other than a forced power-off) answer 400
	// (iLO; Ironic bug 2136275).
	RefuseInPost Quirk = "refuse-in-post"
	// StaleInserted: after an eject, the member keeps Inserted true and its
	// Image for a while (Supermicro; community.general issue 6969).
	StaleInserted Quirk = "stale-inserted"
	// MediaSlotOne: only member 1 takes an insert (iDRAC 10).
	MediaSlotOne Quirk = "media-slot-one"
	// EjectNeedsPowerOff: an eject is refused while the server is on
	// (the project's own case).
	EjectNeedsPowerOff Quirk = "eject-needs-power-off"
	// SlowBIOSPatch: a PATCH of the BIOS settings holds the connection
	// longer than a client's 60 s read timeout before it answers (the
	// project's own case, after a slow BIOS action on record).
	SlowBIOSPatch Quirk = "slow-bios-patch"
	// SCPTargetList: the Server Configuration Profile's
	// ShareParameters.Target is a list (["ALL"]), a string is refused
	// (iDRAC 10; off, the iDRAC takes a string and refuses a list, as
	// iDRAC 9 does).
	SCPTargetList Quirk = "scp-target-list"
)

// QuirkInfo is what docs/personalities.md tells of a quirk.
type QuirkInfo struct {
	Quirk  Quirk
	Vendor string
	Source string
	// Own marks a case of the project's own: no public record of a
	// vendor's BMC doing it was found (Source says what was searched, or
	// the nearest record).
	Own bool
}

// Quirks lists every quirk with its public source, or marked as the
// project's own.
var Quirks = []QuirkInfo{
	{PowerOnConflict, "Dell iDRAC 10", "Ironic bug 2162995", false},
	{RefuseInPost, "HPE iLO", "Ironic bug 2136275", false},
	{StaleInserted, "Supermicro", "ansible-collections/community.general issue 6969; Ironic ejects before every insert", false},
	{MediaSlotOne, "Dell iDRAC 10", "karmab/kcli 5a465493", false},
	{EjectNeedsPowerOff, "none named", "the project's own: no record found in Ironic's, sushy's, Metal3's or the vendors' public issues and code", true},
	{SlowBIOSPatch, "none named", "the project's own, after ansible/ansible issue 52332 (a Lenovo ThinkSystem SR650's BIOS action answered in about 30 s, past the client's read timeout) and the 60 s read timeout Ironic's [redfish] connect_timeout help names", true},
	{SCPTargetList, "Dell iDRAC 10", "redhat-performance/jetlag PR 878 (ShareParameters.Target [\"ALL\"] for iDRAC 10, \"ALL\" for iDRAC 9)", false},
}

// ParseQuirks reads a list of switches, "name" (on) or "-name" (off),
// separated by commas, as a map of the switches given.
func ParseQuirks(s string) (map[Quirk]bool, error) {
	out := map[Quirk]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		on := true
		if rest, ok := strings.CutPrefix(f, "-"); ok {
			f, on = rest, false
		}
		if !slices.ContainsFunc(Quirks, func(q QuirkInfo) bool { return string(q.Quirk) == f }) {
			return nil, fmt.Errorf("quirk %q: want one of %s (or -name to turn one off)", f, strings.Join(quirkNames(), ", "))
		}
		out[Quirk(f)] = on
	}
	return out, nil
}

func quirkNames() []string {
	out := make([]string, len(Quirks))
	for i, q := range Quirks {
		out[i] = string(q.Quirk)
	}
	return out
}

// Has reports whether quirk q is on: the switch in set when it names q,
// else the personality's default.
func (p *Personality) Has(q Quirk, set map[Quirk]bool) bool {
	if on, ok := set[q]; ok {
		return on
	}
	return slices.Contains(p.Quirks, q)
}
