// Package accounts is the BMC user store that both protocol faces share: a
// Redfish ManagerAccount and an IPMI user (IPMI v2.0 §22.26-§22.30) are the
// same record, so a user made on one face logs in on the other.
//
// An account has a role (Administrator, Operator, ReadOnly: Redfish's
// predefined roles, DSP0266 §13.2.3), which gives its Redfish privileges and
// its IPMI privilege limit; it is global (reaches every system) or bound to
// one system (reaches that system only, on both faces). Names are per BMC:
// two systems' accounts may share one, a global account's clashes with any,
// and a login names the BMC it came through (Verify's system; the service's
// listener, which serves every system, refuses a name several hold). Passwords are kept
// twice: a bcrypt hash, which Redfish checks, and the cleartext sealed with
// AES-256-GCM, because IPMI's RAKP needs the key K_UID itself (see
// DECISION.md). Repeated failures from one source lock the name for that
// source for a while (lockout.go: everyone once several sources hold a
// lock; unknown names alike; a lock ends no session); a refused login costs
// one bcrypt comparison whether the name exists or not, so the time does
// not tell names apart. Throttle slows guessing per source address (IPv6
// per /64, rolled up into its /48 when several fail). Changed tells the
// faces at once when an account changes, so that what is logged in
// follows it (Signal).
//
// The store lives in two files of the state directory, both 0600:
// accounts.json and accounts.key. It does not hold the bootstrap
// administrator (the daemon's --username/--credentials-file user) nor the
// per-machine credentials kept in the machines' settings: the faces check
// those first, as before. Htpasswd reads the Redfish users of an htpasswd
// file of bcrypt entries (vbmcd --htpasswd-file, sushy-tools'
// SUSHY_EMULATOR_AUTH_FILE); they are not IPMI users.
package accounts
