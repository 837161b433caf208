// Package ipmi is the IPMI 2.0 face of the lab's BMCs: many BMCs in one
// process, each bound to one machine of the machine model and reached two
// ways, as a server's BMC is: over LAN (lanplus, on its own UDP address and
// port) and in-band, the system interface a machine's OS reaches through
// its KCS (inband.go: qemu's ipmi-bmc-extern on a unix socket per machine,
// OpenIPMI's VM protocol). Both run the same command handlers on the same
// BMC, so what one face or Redfish changes the others report. The command
// table (commands.go) gives each command its privilege, its faces and the
// bounds of its request's length, checked before the handler runs.
//
// The layers follow gebn/bmc's shape: package wire encodes and decodes bytes
// (RMCP+ and the VM protocol), package session holds the RMCP+ key
// mathematics and sequence windows, and this package keeps the session state
// machine (Open Session, RAKP 1–4, privilege), answers commands, runs
// Serial-over-LAN and owns the sockets. A Manager reconciles BMCs with the
// model: it starts, stops and rebinds their LAN listeners as machines gain,
// change or lose their IPMI endpoint (or, with WithBMCPort, a BMC address of
// their own, where they answer at port 623), and their in-band sockets as
// machines name them, without a restart. Users are the shared account
// store's (users.go): the user commands show and change only what their
// caller may (an account bound to a system, a machine's own user and the
// system interface, that machine's accounts), and the password test counts
// as a login against its source (in-band, where there is no source, a few
// wrong ones, then one a minute per machine); a session of a stored account
// is held to the account as it is now, per command and when the store
// changes (a deleted or disabled account's sessions end, a lower role
// lowers them), and the last session of a BMC is kept for the ADMINISTRATOR
// level. The system interface runs every command as ADMINISTRATOR, bound to
// its own machine: the users it makes are that machine's accounts, and it
// sees none of the fixed users. Refused logins are logged rate-limited
// (internal/lograte). The SDR repository holds four threshold sensors (two
// temperatures, a fan, the power drawn) whose readings follow the machine's
// power state (sdr.go); the SEL logs power changes, restarts and the
// watchdog (sel.go, watchdog.go); the LAN configuration parameters describe
// the BMC's NIC (lan.go); the system interface has its global enables,
// message flags, event buffer and attention bit (sysif.go).
//
// What it does not do: IPMI v1.5 sessions (refused; see DECISION.md),
// setting the LAN configuration (read-only), bridging (Send Message; the
// receive message queue is always empty), FRU data, sensor events or
// writable SDRs. Secrets are never logged.
package ipmi
