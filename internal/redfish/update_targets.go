package redfish

import (
	"fmt"
	"strings"

	"github.com/bmlab/bmlab/internal/accounts"
)

// SimpleUpdate without Targets (sushy up to 4.3, so Ironic 21.4 and the
// Metal3 that ships it, never sends them): a real BMC has one system, so
// the target is that system. Here it is the one system the caller reaches:
// an account bound to a system (AccountService, Oem.Bmlab.System) or a
// machine's own user. A caller who reaches several is refused, and told
// which accounts would have worked, among those it may see.

// maxNamedAccounts bounds the accounts a refusal names.
const maxNamedAccounts = 8

// noTargetHelp is the resolution of a SimpleUpdate without Targets from a
// caller who reaches several systems: the accounts bound to one system
// that could update firmware, when the caller may see accounts, else how
// to make one.
func (s *Server) noTargetHelp(c *call) string {
	const how = "Name the system in Targets, or send the update with an account bound to one system " +
		"(made with Oem.Bmlab.System in the AccountService, or a machine's own user): its system is the target."
	if c.who.priv&accounts.ConfigureUsers == 0 {
		return how
	}
	// Only what the caller may see (issue 46: every bound account and its
	// system were named to any caller reaching several systems): the
	// accounts it manages, and the machines' own users to the service's
	// administrator, who reaches every system.
	var names []string
	if s.accounts != nil {
		for _, a := range s.accounts.List("") {
			if a.System != "" && a.Enabled && a.Role.Privileges()&accounts.ConfigureComponents != 0 && c.who.manages(a) {
				names = append(names, fmt.Sprintf("%s (system %s)", a.UserName, a.System))
			}
		}
	}
	if c.who.everywhere() {
		for _, m := range s.visible(c) {
			for _, cr := range m.Settings.Credentials {
				names = append(names, fmt.Sprintf("%s (system %s)", cr.Username, m.ID))
			}
		}
	}
	if len(names) == 0 {
		return how + " No such account exists yet."
	}
	more := ""
	if len(names) > maxNamedAccounts {
		more = fmt.Sprintf(" and %d more", len(names)-maxNamedAccounts)
		names = names[:maxNamedAccounts]
	}
	return how + " Accounts that would work: " + truncate(strings.Join(names, ", ")+more, 1024) + "."
}
