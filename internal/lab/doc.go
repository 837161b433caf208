// Package lab is labctl's actions: the steps that bring a lab up and take
// it down, in the style of kind's create-cluster actions. Each action has
// an Ensure (create what is missing, verify what is there, report whether
// anything changed) and a Delete (remove what the lab owns; absent is
// success). A pipeline is an ordered list of actions, chosen by the mode
// (Pipeline): ipi-baremetal and hybrid share the first ones. Most actions
// have a file of their own; the hybrid flow's smaller ones share
// hybrid_*.go.
//
// Every fact comes from the resolved plan (internal/plan); nothing here
// reads the lab file. Preflight checks the whole lab before the first
// object exists: the host (KVM, memory, disk, qemu's access, clashes with
// other labs) and, through CheckInputs, every rule of the installer files
// the run will write, worded with the lab file's fields.
//
// The actions reach the platform through a Provider of five small
// interfaces (host.go): Objects (find, own and remove what bears the
// mark), Nodes, Storage, Networks and BMCs. RealHost is libvirt (through a
// labvirt.Conn), netlink and processes on one host; MultiHost sends each
// call to the host its object lives on; the unit tests use a fake. Another
// platform is another Provider.
//
// The network action is the one owner of the host network: CheckNetwork,
// EnsureNetwork and RemoveNetwork are what `labctl net check|repair|down`
// print, and what up and down run. A lab on a shared network
// (network.shared) adds its entries to it there, and its down removes the
// entries the network lists as the lab's, found without the lab file;
// preflight checks its addresses, MACs and names against every other lab's
// on that network (sharedClashes). The host resolver's drop-in
// (network.hostResolver: dnsmasq or resolved) is one of the network's
// objects: checked, written back and removed with the rest.
//
// The hybrid pipeline holds two flows; each plan runs the actions that
// apply to it (conditional): the bootstrap flow (manifests, ignition,
// control-plane, bootstrap-complete, remove-bootstrap, workers) and, for a
// single node (masters 1, no workers), kcli's sno with the bootstrap in
// place (hybrid_sno.go: the bootstrap-in-place ignition embedded into the
// live ISO, one VM booting it from its CD drive behind its blank disk).
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
