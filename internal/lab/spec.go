package lab

import (
	"crypto/sha1"
	"crypto/sha256"
	"fmt"
)

// LabNS is the namespace of the lab's ownership marks on libvirt objects.
const LabNS = "http://bmlab.dev/xmlns/lab/1"

// Spec is everything the pipeline builds, in terms of the host.
type Spec struct {
	// Name is the lab's name; it marks everything the lab creates.
	Name string
	// Dir is the lab's directory: state, logs, disks, install-config.
	Dir   string
	Nodes []NodeSpec
	// Network is the libvirt network (or bridge, with Bridge set) the
	// nodes' boot NIC joins.
	Network string
	Bridge  string
	BMC     BMCSpec
	// VbmcdPath is the vbmcd binary labctl starts and supervises.
	VbmcdPath string
	// Netns is the network namespace the lab's network lives in (where
	// libvirtd runs); vbmcd runs there too, so the BMC addresses in
	// install-config are reachable from the nodes. "" is the current one.
	Netns string
}

// NodeSpec is one VM that plays a bare-metal server.
type NodeSpec struct {
	Name      string // the domain's name
	Role      string // master or worker
	VCPUs     uint
	MemoryMiB uint
	DiskGiB   uint
	// ExtraDiskGiB are further disks (vdb, vdc, ...), e.g. for storage
	// operators; thin like the first.
	ExtraDiskGiB []uint
	// MAC and UUID are derived from the lab's and the node's names, so
	// a lab brought down and up again has the same BMC addresses and boot
	// MACs.
	MAC  string
	UUID string
	IP   string // the DHCP reservation, when the network step makes one
}

// BMCSpec says how installers reach the nodes' BMCs.
type BMCSpec struct {
	Kind         string // redfish-virtualmedia, redfish or ipmi
	Host         string // the address installers use to reach vbmcd
	RedfishPort  int
	IPMIPortBase int
	Username     string
	Password     string
}

// MACFor returns the node's boot MAC: locally administered qemu prefix and
// three bytes of a hash of lab and node names.
func MACFor(lab, node string) string {
	h := sha256.Sum256([]byte(lab + "/" + node))
	return fmt.Sprintf("52:54:00:%02x:%02x:%02x", h[0], h[1], h[2])
}

// UUIDFor returns the node's domain UUID (name-based, version 5 layout).
func UUIDFor(lab, node string) string {
	h := sha1.Sum([]byte("bmlab-lab/" + lab + "/" + node))
	h[6] = (h[6] & 0x0f) | 0x50
	h[8] = (h[8] & 0x3f) | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// Fill derives the nodes' MACs and UUIDs where they are not set.
func (s *Spec) Fill() {
	for i := range s.Nodes {
		n := &s.Nodes[i]
		if n.MAC == "" {
			n.MAC = MACFor(s.Name, n.Name)
		}
		if n.UUID == "" {
			n.UUID = UUIDFor(s.Name, n.Name)
		}
	}
}

// BMCAddress returns the node's BMC address as install-config and Ironic
// spell it.
func (s *Spec) BMCAddress(i int) string {
	n := s.Nodes[i]
	switch s.BMC.Kind {
	case "ipmi":
		return fmt.Sprintf("ipmi://%s:%d", s.BMC.Host, s.BMC.IPMIPortBase+i)
	case "redfish":
		return fmt.Sprintf("redfish+https://%s:%d/redfish/v1/Systems/%s", s.BMC.Host, s.BMC.RedfishPort, n.UUID)
	default:
		return fmt.Sprintf("redfish-virtualmedia+https://%s:%d/redfish/v1/Systems/%s", s.BMC.Host, s.BMC.RedfishPort, n.UUID)
	}
}
