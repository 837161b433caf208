// Package labctl is the labctl command line: a cobra root command with one
// package per subcommand (kind's layout). Run is the whole program short of
// main: it parses args, runs the subcommand and returns its error, which the
// caller prints once (cobra's own error and usage printing are silenced).
//
// Subcommands: up, status, down and add-node (package up), net
// check|repair|down (package netcmd), graph (package graph), demo (package
// demo), console (package console: a node's screen, keys and serial output
// through its BMC). The flags every subcommand shares (-f, --profile, --mode, --netns,
// --libvirt-uri, --dir) select the lab; cli opens it (Globals.Open: the
// plan, the mode from labctl's list, the provider) the one way for every
// command.
package labctl
