// Package lab is the `labctl up` pipeline: an ordered list of idempotent
// steps (preflight, network, storage, nodes, BMCs, install-config,
// installer), each with an Ensure that creates what is missing and verifies
// what is there, and a Delete inverse that treats "not found" as success.
// Re-running up resumes; down removes exactly what up created.
//
// What the lab owns is recorded twice: in a state file in the lab's
// directory (.bmlab/state.json) and as ownership marks on each libvirt object
// (<metadata> in the namespace LabNS). A foreign object with a lab name stops
// the run with an error that says how to clear it.
//
// What it does not do: talk to people. Steps report to a Reporter; labctl
// draws the spinner and the ticks.
package lab
