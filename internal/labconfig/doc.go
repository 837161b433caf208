// Package labconfig reads the lab's configuration file (YAML, lab.yaml by
// default) and fills in defaults that reproduce the seed lab.
//
// The file holds the lab's name, its network and the cluster that
// `labctl up --mode ipi-baremetal` installs (cluster name and base domain,
// masters and workers with their sizes, the address families (ipFamily v4,
// v6 or dual), machine network, DHCP range, VIPs (and dual stack's IPv6
// ones in the *V6 fields),
// BMC kind and where vbmcd is reached, pull secret, SSH key and
// openshift-install paths). New sections are added beside the others, never
// inside them. Parse reads the YAML tree first and reports, all
// at once, every unknown key (with its path, line and the nearest known
// key, "did you mean cluster.masters?") and every value of the wrong type
// or that does not parse (with its field), before decoding.
// Config.ApplyProfile("tiny") shrinks the nodes for a demo on a small
// machine.
//
// Validate checks the file's own rules, each message naming the field and
// what to write instead: names, ports, the VIPs inside the machine network
// and outside the DHCP range and the host's address, the provisioning
// subnet apart from the machine network, the control plane's size, a shared
// network (network.shared) other than libvirt's default named with its
// bridge, the host resolver (network.hostResolver: hosts, dnsmasq,
// resolved or none; a drop-in directory only with a drop-in). The
// OpenShift installer's rules on the files a run writes live in
// internal/ipi, worded as the installer words them; labctl's preflight
// applies them before anything is built.
//
// It does not touch the host: it turns the file into values (a
// netplumb.Topology, the libvirt networks to define) that other packages act on.
package labconfig
