// Package labconfig reads the lab's configuration file (YAML, lab.yaml by
// default) and fills in defaults that reproduce the seed lab.
//
// For now the file holds the lab's name and its network; the same file will
// later hold the cluster name, the nodes and their BMC kind for `labctl up`,
// so new sections are added beside network, never inside it. Unknown fields
// are errors, so a typo is caught instead of silently ignored.
//
// It does not touch the host: it turns the file into values (a
// netplumb.Topology, the libvirt networks to define) that other packages act on.
package labconfig
