// Command rfbench measures the Redfish service: N keep-alive connections
// GET one resource as fast as they can for a fixed time; it reports requests
// per second, latency percentiles and the server's CPU time per request
// (read from /proc). Without -url it starts a server over the sim backend as
// a child process; with -url it drives a running vbmcd.
//
// It does not test correctness (a non-200 answer is only counted), does not
// write or change anything, and refuses any address that is not loopback.
// The load logic is in internal/rfbench; this package is main only.
package main
