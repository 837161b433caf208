// Package listen is vbmcd's Redfish listeners: the front they are all
// built from, and every machine's own BMC listener (--bmc-addresses).
//
// A Front (front.go) holds what all of a daemon's Redfish listeners share:
// header, body and idle timeouts, HTTP/2 streams, frames and windows,
// connections per source and in total (connlimit.go: at a source's cap its
// longest idle keep-alive gives way, at the total the biggest source gives
// one up), and the request budgets of internal/admission (requests in
// flight, unauthenticated ones, body bytes), whose sweeper keeps the HTTP/1
// write deadlines through the front's ConnState hook; after a burst it
// gives the free memory back to the system. NewServer is a plain server
// with the same limits (the metrics listener's).
//
// A Pool (pool.go) is --bmc-addresses: ranges and pins, checked whole, and
// the assignment of one address per machine, recorded with the machine.
// BMCs (bmcs.go) keeps a Redfish listener per machine at its address,
// served by the daemon's one server through the same Front, marks each
// connection with the machine it reached (redfish.AtBMC) and serves each
// address a certificate of its own from the BMC CA; it follows the model
// with machine.Follow.
//
// What it does not do: parse flags or build the daemon (internal/vbmcd
// does, and only wires these), serve Redfish itself (internal/redfish), or
// bind IPMI (internal/ipmi's manager binds port 623 at the same
// addresses).
package listen
