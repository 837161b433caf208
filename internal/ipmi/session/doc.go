// Package session holds the RMCP+ session mathematics shared by the BMC and
// the Go test client: cipher suites (IPMI v2.0 §22.15.2), the RAKP auth codes
// and key derivation (§13.31, §13.32), payload integrity (§13.28.4) and
// confidentiality (AES-CBC-128, §13.29), and the inbound sequence number
// window (§6.12.13).
//
// What it does not do: decode packets (package wire), keep a session table or
// answer commands (package ipmi). Keys never leave a Keys value except through
// the functions that use them; nothing here logs.
package session
