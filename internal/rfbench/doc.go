// Package rfbench is the load generator behind cmd/rfbench. It drives GET
// requests over N keep-alive connections with a minimal HTTP/1.1 client (so
// the client's own cost stays small on a machine it shares with the server)
// and reads the server's CPU time from /proc/PID/stat.
//
// Without -url it starts the server itself, as a child process over the sim
// backend, so the server's CPU is measured apart from the client's.
//
// It talks to loopback addresses only.
package rfbench
