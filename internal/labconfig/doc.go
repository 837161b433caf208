// Package labconfig reads the lab's configuration file (YAML, lab.yaml by
// default) and fills in defaults that reproduce the seed lab.
//
// The file holds the lab's name, its network and the cluster that
// `labctl up --mode ipi-baremetal` installs (cluster name and base domain,
// masters and workers with their sizes, machine network, DHCP range, VIPs,
// BMC kind and where vbmcd is reached, pull secret, SSH key and
// openshift-install paths). New sections are added beside the others, never
// inside them. Unknown fields are errors, so a typo is caught instead of
// silently ignored. Config.ApplyProfile("tiny") shrinks the nodes for a demo
// on a small machine.
//
// Validate checks the file's shape; the OpenShift installer's own rules
// (VIPs in the machine network, DNS names, BMC schemes against the
// provisioning network) live in internal/ipi, worded as the installer words
// them.
//
// It does not touch the host: it turns the file into values (a
// netplumb.Topology, the libvirt networks to define) that other packages act on.
package labconfig
