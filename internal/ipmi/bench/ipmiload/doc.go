// Command ipmiload measures the IPMI BMCs: it starts a vbmcd-like server
// (a Manager over the sim backend) as a child process, drives it with Go
// clients that open a new RMCP+ session per query, or with synthetic qemus
// on the machines' in-band sockets (kcs.go, the VM protocol), and reads the
// child's CPU time, memory and file descriptors from /proc.
//
//	ipmiload -mode qps -clients 8 -duration 10s      queries per second, CPU per query
//	ipmiload -mode idle -bmcs 1000 -duration 30s     idle CPU and memory of many BMCs
//	ipmiload -mode sessions -sessions 100000         memory across many sessions
//	ipmiload -mode kcs-rtt                           in-band round trip, requests a second, CPU per request
//	ipmiload -mode kcs-idle -bmcs 1000               fds, memory and idle CPU of 1,000 in-band sockets, with and without a client each
//
// It does not check protocol correctness (the tests with ipmitool, FreeIPMI
// and pyghmi, and a real guest's ipmitool in-band, do), never touches
// libvirt, and sends traffic only to 127.0.0.1 and to unix sockets in a
// directory of its own.
package main
