package upi

import (
	"net/netip"

	"github.com/bmlab/bmlab/internal/netaddr"
)

// Cluster is what the static pods and the ignition merge need to know about
// the cluster, resolved once by the lab plan.
type Cluster struct {
	// Name and BaseDomain make the cluster's domain: Name.BaseDomain.
	Name       string
	BaseDomain string
	// Family is the cluster's first address family: the nodes' subnet
	// (MachineNetwork) and its VIPs. APIVIP carries api and api-int;
	// IngressVIP carries *.apps. An invalid IngressVIP means *.apps
	// resolves to the API VIP and no ingress keepalived instance runs.
	netaddr.Family
	// Secondary is a dual-stack cluster's second address family (IPv6
	// after IPv4, as the installer orders them); its zero value means a
	// single-stack cluster. An IPv6-only cluster has IPv6 in Family and no
	// Secondary.
	Secondary netaddr.Family
	// APIRouterID and IngressRouterID are keepalived's virtual_router_id
	// for each VIP (1-255), deterministic per cluster and distinct from
	// every other cluster's on the same network (see RouterIDs).
	APIRouterID     int
	IngressRouterID int
	// Upstream are the DNS servers coredns forwards everything else to.
	Upstream []netip.Addr
	// Nodes are every node, bootstrap included, with their reserved IPs.
	Nodes []Node
	// SSHKey is the public key the core user accepts.
	SSHKey string
	// Images are the container images of the static pods (from the
	// release payload or the lab file).
	Images Images
	// SingleNode is a single-node cluster installed in place: no static
	// pods, and the node keeps the lab network's DNS (which gives api,
	// api-int and *.apps its address) as its resolver, without the
	// dispatcher that would put its own coredns first.
	SingleNode bool
}

// Node is one node of the cluster.
type Node struct {
	Name        string // short host name, also the domain's name
	Role        string // RoleBootstrap, RoleMaster or RoleWorker
	IP          netip.Addr
	SecondaryIP netip.Addr // dual-stack: the second family's address, else invalid
	MAC         string
}

// Images are the static pods' container images.
type Images struct {
	Keepalived string
	CoreDNS    string
	HAProxy    string
}

// File is a file to put on a node through ignition.
type File struct {
	Path     string // absolute
	Mode     int    // e.g. 0o644
	Contents []byte
}
