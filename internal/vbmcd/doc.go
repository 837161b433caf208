// Package vbmcd is the vbmcd command: one daemon that gives every libvirt VM
// (or KubeVirt VirtualMachine, or simulated server) a Redfish BMC and an IPMI lanplus BMC over one
// machine model; a libvirt VM's BMC is reached from inside it too, through
// the KCS interface vbmcd adds to its domain at the next power-on
// (--ipmi-inband; inband.go gives the IPMI manager the sockets' directory,
// their owner, qemu's user, and the host networks `lan print` reports). It parses flags, the YAML config file and VBMCD_*
// environment variables, builds the backend, the model and the protocol
// faces, and shuts them down within a bounded time. On the Redfish listener
// it also serves the web console (internal/webui, --web-console). Beside the daemon it
// serves Prometheus metrics (--metrics-addr) and an admin socket in the
// state directory, through which `vbmcd fault set|clear|list` injects faults
// (latency, HTTP errors, dropped IPMI packets, a refused power-on, stuck
// media, a BMC down) into a running daemon for testing clients; `vbmcd
// personality set|list` records a machine's vendor personality and quirk
// switches (internal/personality) with the machine; `vbmcd ipmi
// set|unset|list` (package ipmicmd) manages machines' IPMI endpoints, and
// `vbmcd lldp` (lldp.go) sends every running NIC's tap the LLDP frames of
// its port's LLDPReceive, reading the machines as the daemon does;
// `vbmcd sushy-emulator` runs the daemon from sushy-tools' sushy-emulator
// flags and configuration file (sushycompat.go), as a container of vbmcd's
// image does by default: SUSHY_EMULATOR_AUTH_FILE becomes --htpasswd-file,
// and its --media-allow-loopback opens loopback images, not loopback event
// destinations (--events-allow-loopback). With --sim-systems the sim backend's servers come
// from a systems file (simbackend.go; internal/simfile, internal/simnotify).
// Every Redfish listener is built from one front (internal/listen), which
// all share: timeouts, HTTP/2 settings, connections per source and in
// total, and the request budgets of internal/admission. While the live
// heap is small the daemon keeps the garbage collector's headroom at 8 MB
// (gcfloor.go). With --bmc-addresses every machine also gets a BMC of its
// own (internal/listen assigns and records the addresses and runs a
// Redfish listener per address, served through the same front, with a
// certificate per address from the BMC CA vbmcd loads or makes; the IPMI
// manager binds port 623 there).
//
// What it does not do: any protocol, listener or backend work; that lives
// in internal/redfish, internal/ipmi, internal/listen, internal/webui,
// internal/virt, internal/kubevirt and internal/sim.
package vbmcd
