// Package lab is labctl's actions: the steps that bring a lab up and take
// it down, in the style of kind's create-cluster actions. Each action lives
// in its own file and has an Ensure (create what is missing, verify what is
// there, report whether anything changed) and a Delete (remove what the
// lab owns; absent is success). A pipeline is an ordered list of actions,
// chosen by the mode (Pipeline): ipi-baremetal and hybrid share the first
// ones.
//
// Every fact comes from the resolved plan (internal/plan); the actions work
// over a small Host interface (host.go), which the real host implements with
// libvirt (internal/labvirt), netlink (internal/netplumb) and processes, and
// the unit tests with a fake.
//
// Ownership. Everything the lab creates bears its mark: domains and libvirt
// networks in their <metadata>, links in their alias (bmlab:<lab>), the
// storage pool in a mark file in its directory, the vbmcd process in its
// environment (BMLAB_LAB=<lab>). Delete finds what bears the mark, whether or
// not the lab's state file or directory still exists, and after deleting it
// looks again: an action reports success only when nothing of its kind
// bearing the mark is left. A storage pool whose directory is gone has lost
// its mark file; it is removed when its name is the plan's pool name and its
// directory had the lab's layout (…/.bmlab/disks): undefining it loses
// nothing, since its volumes were files in that directory. Any other pool
// is reported and left alone. A foreign object with a lab name stops up
// before anything is created (preflight) and is never changed.
//
// What it does not do: talk to people. Actions report to a Reporter; labctl
// draws the spinner and the ticks.
package lab
