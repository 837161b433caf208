package netplumb

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Rule is a routing policy rule the lab owns (ip rule): packets from From
// (to To, or anywhere when To is zero) are routed by the main table, or,
// Unreachable, refused with "network is unreachable". The lab uses them to
// route a network as a router would: its own addresses reach the networks
// a block of rules lets through, and nothing else.
type Rule struct {
	Priority    int          `json:"priority"`
	From        netip.Prefix `json:"from"`
	To          netip.Prefix `json:"to,omitzero"`
	Unreachable bool         `json:"unreachable,omitempty"`
}

// RuleProtocol marks the lab's rules (FRA_PROTOCOL, which ip rule shows
// as "proto 98", a number iproute2's rt_protos leaves unnamed): the lab
// adds, changes and removes no other rule.
const RuleProtocol = 98

// ruleBlock is how many rules one lab's block holds.
const ruleBlock = 8

// RulePriorities is the first priority of a lab's block of rules and the
// block's size: a block of 8 between 10000 and 26000 (before the main
// table's rule at 32766), derived from the lab's name, so down finds a
// lab's rules without its lab file.
func RulePriorities(lab string) (first, n int) {
	h := fnv.New32a()
	h.Write([]byte("bmlab-rules/" + lab))
	return 10000 + ruleBlock*int(h.Sum32()%2000), ruleBlock
}

func (r Rule) String() string {
	to := "all"
	if r.To.IsValid() {
		to = r.To.String()
	}
	action := "lookup main"
	if r.Unreachable {
		action = "unreachable"
	}
	return fmt.Sprintf("%d: from %s to %s %s", r.Priority, r.From, to, action)
}

// family is the rule's address family for netlink.
func (r Rule) family() int {
	if r.From.Addr().Is4() {
		return netlink.FAMILY_V4
	}
	return netlink.FAMILY_V6
}

// netlinkRule is r as netlink adds and deletes it.
func (r Rule) netlinkRule() *netlink.Rule {
	nr := netlink.NewRule()
	nr.Priority = r.Priority
	nr.Family = r.family()
	nr.Src = ipNet(r.From)
	if r.To.IsValid() {
		nr.Dst = ipNet(r.To)
	}
	nr.Protocol = RuleProtocol
	if r.Unreachable {
		nr.Type = unix.RTN_UNREACHABLE
	} else {
		nr.Table = unix.RT_TABLE_MAIN
	}
	return nr
}

// validateRules checks a topology's rules: a network of one family each.
func validateRules(rules []Rule) []error {
	var errs []error
	seen := map[int]bool{}
	for _, r := range rules {
		switch {
		case !r.From.IsValid():
			errs = append(errs, fmt.Errorf("rule %d: no source network", r.Priority))
		case r.To.IsValid() && r.To.Addr().Is4() != r.From.Addr().Is4():
			errs = append(errs, fmt.Errorf("rule %s: from and to are of two families", r))
		case r.Priority < 1 || r.Priority >= 32766:
			errs = append(errs, fmt.Errorf("rule %s: priority out of 1..32765", r))
		case seen[r.Priority]:
			errs = append(errs, fmt.Errorf("rule %s: priority %d is another rule's too", r, r.Priority))
		}
		seen[r.Priority] = true
	}
	return errs
}

// ObserveRules reads the namespace's rules that carry the lab's protocol
// mark (RuleProtocol), IPv4 and IPv6.
func ObserveRules(h *netlink.Handle) ([]Rule, error) {
	var out []Rule
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rules, err := retryDump(func() ([]netlink.Rule, error) { return h.RuleList(fam) })
		if err != nil {
			return nil, fmt.Errorf("list rules: %w", err)
		}
		for _, nr := range rules {
			if nr.Protocol != RuleProtocol || nr.Src == nil {
				continue
			}
			// netlink v1.3.1 does not read a rule's action back (Type):
			// the lab's rules look up the main table or, without a
			// table, are unreachable.
			r := Rule{Priority: nr.Priority, Unreachable: nr.Table == unix.RT_TABLE_UNSPEC}
			r.From, _ = prefixOf(nr.Src)
			if nr.Dst != nil {
				r.To, _ = prefixOf(nr.Dst)
			}
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b Rule) int { return a.Priority - b.Priority })
	return out, nil
}

// Differences of rules (Diff).
const (
	RuleMissing DiffKind = "rule-missing" // a rule of the topology is not there
	RuleExtra   DiffKind = "rule-extra"   // a rule of the lab's block that the topology no longer has
)

// diffRules adds to p the rules missing and, in the priorities of the
// topology's rules' blocks, the lab's rules it no longer has.
func (p *Plan) diffRules(t Topology, got []Rule) {
	for _, r := range t.Rules {
		if !slices.Contains(got, r) {
			p.add(Difference{Link: "rule " + r.String(), Kind: RuleMissing, Want: r.String(), Fix: "add the rule: ip rule add " + ruleCommand(r)})
			p.Steps = append(p.Steps, Step{Op: OpRuleAdd, Link: "rule", Arg: r.String(), rule: r})
		}
	}
	blocks := map[int]bool{}
	for _, r := range t.Rules {
		blocks[blockOf(r.Priority)] = true
	}
	from := map[netip.Prefix]bool{}
	for _, r := range t.Rules {
		from[r.From] = true
	}
	for _, r := range got {
		if blocks[blockOf(r.Priority)] && from[r.From] && !slices.Contains(t.Rules, r) {
			p.add(Difference{Link: "rule " + r.String(), Kind: RuleExtra, Got: r.String(), Fix: "delete the rule: ip rule del " + ruleCommand(r)})
			p.Steps = append(p.Steps, Step{Op: OpRuleDel, Link: "rule", Arg: r.String(), rule: r})
		}
	}
}

func blockOf(priority int) int { return (priority - 10000) / ruleBlock }

// ruleCommand is a rule as ip rule's arguments.
func ruleCommand(r Rule) string {
	s := fmt.Sprintf("priority %d from %s", r.Priority, r.From)
	if r.To.IsValid() {
		s += " to " + r.To.String()
	}
	if r.Unreachable {
		return s + " unreachable proto " + fmt.Sprint(RuleProtocol)
	}
	return s + " lookup main proto " + fmt.Sprint(RuleProtocol)
}

// Operations on rules (Step.Op).
const (
	OpRuleAdd Op = "add-rule"
	OpRuleDel Op = "delete-rule"
)

// ruleStep adds or deletes a rule; one that is there already (or gone) is
// success.
func (p *Plumber) ruleStep(s Step) error {
	if s.Op == OpRuleAdd {
		err := p.h.RuleAdd(s.rule.netlinkRule())
		if errors.Is(err, unix.EEXIST) {
			return nil
		}
		return err
	}
	err := p.h.RuleDel(s.rule.netlinkRule())
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

// OwnedRules lists the namespace's rules of the lab's block (RulePriorities
// of its name) that carry its mark, as ip rule shows them: what down
// removes, with or without the lab file.
func (p *Plumber) OwnedRules() ([]string, error) {
	rules, err := ObserveRules(p.h)
	if err != nil {
		return nil, err
	}
	first, n := RulePriorities(strings.TrimPrefix(p.owner, Owner("")))
	var out []string
	for _, r := range rules {
		if r.Priority >= first && r.Priority < first+n {
			out = append(out, r.String())
		}
	}
	return out, nil
}

// DeleteRule deletes the lab's rule of OwnedRules named name (its String);
// one that is gone is no error.
func (p *Plumber) DeleteRule(name string) error {
	rules, err := ObserveRules(p.h)
	if err != nil {
		return err
	}
	first, n := RulePriorities(strings.TrimPrefix(p.owner, Owner("")))
	for _, r := range rules {
		if r.String() == name && r.Priority >= first && r.Priority < first+n {
			return p.ruleStep(Step{Op: OpRuleDel, rule: r})
		}
	}
	return nil
}
