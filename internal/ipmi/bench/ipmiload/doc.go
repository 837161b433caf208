// Command ipmiload measures the IPMI BMCs: it starts a vbmcd-like server
// (a Manager over the sim backend) as a child process, drives it with Go
// clients that open a new RMCP+ session per query, and reads the child's CPU
// time and memory from /proc.
//
//	ipmiload -mode qps -clients 8 -duration 10s      queries per second, CPU per query
//	ipmiload -mode idle -bmcs 1000 -duration 30s     idle CPU and memory of many BMCs
//	ipmiload -mode sessions -sessions 100000         memory across many sessions
//
// It does not check protocol correctness (the tests with ipmitool, FreeIPMI
// and pyghmi do), never touches libvirt, and sends traffic only to
// 127.0.0.1.
package main
