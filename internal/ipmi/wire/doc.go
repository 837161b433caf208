// Package wire encodes and decodes the bytes of IPMI: over LAN, RMCP and ASF
// (IPMI v2.0 §13.1, ASF 2.0 §3.2), the IPMI v1.5 and v2.0/RMCP+ session
// headers (§13.6), IPMI LAN messages (§13.8), the RMCP+ session setup
// payloads (Open Session and RAKP, §13.17–§13.23) and SOL payloads (§15.9);
// in-band, the VM protocol qemu's ipmi-bmc-extern speaks to an external BMC
// over a chardev (vm.go).
//
// What it does not do: keys, integrity, encryption, sequence windows (the
// session package) or sockets (package ipmi). Decoders never panic on short
// or malformed input; they return an error that says "want N bytes, got M".
// Decoded byte slices alias the input.
package wire
