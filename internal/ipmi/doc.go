// Package ipmi is the IPMI 2.0 lanplus face of the lab's BMCs: many BMCs in
// one process, each on its own UDP address and port and each bound to one
// machine of the machine model, so that what IPMI changes is what Redfish
// reports and the reverse.
//
// The layers follow gebn/bmc's shape: package wire encodes and decodes bytes,
// package session holds the RMCP+ key mathematics and sequence windows, and
// this package keeps the session state machine (Open Session, RAKP 1–4,
// privilege), answers commands, runs Serial-over-LAN and owns the sockets.
// A Manager reconciles listeners with the model: it starts, stops and rebinds
// BMCs as machines gain, change or lose their IPMI endpoint (or, with
// WithBMCPort, a BMC address of their own, where they answer at port 623),
// without a restart. Users are the shared account store's (users.go): the
// user commands show and change only what their caller may (an account
// bound to a system, and a machine's own user, that machine's accounts),
// and the password test counts as a login against its source; a
// session of a stored account is held to the account as it is now, per
// command and when the store changes (a deleted or disabled account's
// sessions end, a lower role lowers them), and the last session of a BMC is
// kept for the ADMINISTRATOR level. Refused logins are logged rate-limited
// (internal/lograte). The SDR
// repository holds four threshold sensors (two temperatures, a fan, the power
// drawn) whose readings follow the machine's power state (sdr.go).
//
// What it does not do: IPMI v1.5 sessions (refused; see DECISION.md), LAN
// configuration, FRU data, SEL entries, sensor events or writable SDRs.
// Secrets are never logged.
package ipmi
