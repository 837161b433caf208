// Package rfbench is the load generator behind cmd/rfbench. It drives GET
// requests over N keep-alive connections with a minimal HTTP/1.1 client (so
// the client's own cost stays small on a machine it shares with the server)
// and reads the server's CPU time from /proc/PID/stat.
//
// Without -url it starts the server itself, as a child process over the sim
// backend, so the server's CPU is measured apart from the client's.
//
// With -floor-bytes or -floor-copy it starts a bare net/http server
// instead, this machine's floor for the same load: -floor-bytes answers N
// bytes of JSON with Content-Type, Content-Length and Date alone and
// checks no credentials; -floor-copy answers a response saved from vbmcd
// (curl -si) byte for byte, its status, headers and body (net/http adds
// its own Date), after comparing the Authorization header with the
// expected Basic value (401 otherwise): what net/http and the machine cost
// for vbmcd's very answer (hack/front-bench.sh alternates both with
// vbmcd).
//
// With -attack it sends hostile requests of one kind and reports the
// server's memory (attack.go); the HTTP/2 kinds (h2attack.go) write frames
// themselves with golang.org/x/net/http2's Framer, from one or more
// loopback source addresses, hold the streams, sample the server's VmRSS
// from /proc every 50 ms, probe the server as an administrator meanwhile,
// and stop when the server passes a ceiling (-max-rss). The body kinds
// (bodyattack.go) run the same way over HTTP/1.1, each connection a request
// whose chunked body never ends, aimed at a machine's own BMC.
//
// It talks to loopback addresses only.
package rfbench
