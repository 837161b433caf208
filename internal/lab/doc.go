// Package lab is labctl's engine, in the manner of kind's create-cluster:
// an install mode (Mode) is an ordered list of actions; Up runs them, each
// Ensure creating what is missing and verifying what is there, and records
// the last one done (State) so that up again resumes; Down runs every
// Delete backwards, past failures, and needs no state. Actions report to a
// Reporter; labctl draws the spinner and the ticks. A mode's own step that
// keeps no settings is a Step: its name and its Ensure and Delete
// functions, listed in place.
//
// The actions reach the platform through a Provider (provider.go): a few
// calls over the objects the steps declare in labctl's own terms (a
// node's machine, its disks, the lab's networks and links, its BMC
// daemon), whatever the platform, and one about its host (Info: KVM,
// CPUs, memory, free space, whether its VMs can read the lab's files), which the steps ask instead of reading the
// machine. The libvirt provider is internal/labvirt; another platform is
// another package.
//
// Ownership. Everything the lab creates bears its mark, and Delete finds
// what bears it, whether or not the lab's state file or directory still
// exists; after deleting, a step looks again (Remaining): it reports
// success only when nothing of its kind bearing the mark is left. A
// foreign object with a lab name stops up before anything is created
// (preflight) and is never changed.
//
// What it does not do: know any install mode, step or provider. The steps
// every mode shares are internal/lab/steps; each mode is a package of its
// own (internal/lab/ipimode, hybridmode, agentmode), listed once in
// internal/lab/modes; nothing here reads the lab file (internal/plan
// resolves it). TestTheFloorPlan holds the imports to that.
package lab
