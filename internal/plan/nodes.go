package plan

// The nodes: names, MACs, UUIDs, addresses, disks and BMC endpoints.

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"

	"github.com/bmlab/bmlab/internal/labconfig"
	"github.com/bmlab/bmlab/internal/ocp"
	"github.com/bmlab/bmlab/internal/personality"
)

// Node is one VM.
type Node struct {
	Name string `json:"name"`
	Role string `json:"role"`
	// MAC is the node's NIC on the node network (the machine network):
	// its DHCP reservation and address there.
	MAC string `json:"mac"`
	// BootMAC is the NIC the node network-boots from, install-config's
	// bootMACAddress: its first NIC, on the provisioning network where the
	// lab has one (provisioning.go), else MAC.
	BootMAC string `json:"bootMAC"`
	// NICs are its NICs in the domain's order.
	NICs []NIC      `json:"nics"`
	UUID string     `json:"uuid"`
	IP   netip.Addr `json:"ip"`
	// SecondaryIP is a dual-stack node's IPv6 address (the same place in
	// dhcpRangeV6 as IP in dhcpRange); invalid otherwise.
	SecondaryIP netip.Addr `json:"secondaryIP,omitzero"`
	VCPUs       uint       `json:"vcpus"`
	MemoryMiB   uint       `json:"memoryMiB"`
	// Arch is the node's CPU architecture: x86_64 or aarch64.
	Arch string `json:"arch"`
	// Disks are the node's volumes, the boot disk first.
	Disks     []Disk `json:"disks"`
	SerialLog string `json:"serialLog"`
	// BMC is the node's endpoint; empty for hybrid nodes, which have none.
	BMC Endpoint `json:"bmc,omitzero"`
	// Ignition is the file qemu hands the node through fw_cfg (hybrid).
	Ignition string `json:"ignition,omitempty"`
	// Host is the libvirt host the node is placed on (labs with hosts:).
	Host string `json:"host,omitempty"`
	// Added marks a node added to the running cluster (labctl add-node):
	// not in the installer's files, which describe the cluster installed.
	Added bool `json:"added,omitempty"`
	// Bond is the mode of the bond of its NICs on the machine network
	// (its role's cluster.*.bond; "": none).
	Bond string `json:"bond,omitempty"`
}

// Disk is a thin volume of the lab's pool.
type Disk struct {
	Volume  string `json:"volume"`
	Path    string `json:"path"`
	SizeGiB uint   `json:"sizeGiB"`
	// Backing is the image the volume is a thin clone of (hybrid).
	Backing string `json:"backing,omitempty"`
}

// Endpoint is how installers reach a node's BMC.
type Endpoint struct {
	// Address is bmc.address in install-config.
	Address string `json:"address"`
	// SystemURL is the node's Redfish System, which vbmcd serves for every
	// node whatever the kind; labctl checks the BMC there. It names the
	// System as Address does (a vendor's id at a BMC of its own, else the
	// node's UUID).
	SystemURL string `json:"systemURL"`
	IPMIPort  int    `json:"ipmiPort,omitempty"`
	// Addr is the node's BMC's own address on the BMC network
	// (cluster.bmc.network; invalid: none, the BMC is at BMC.Host).
	Addr netip.Addr `json:"addr,omitzero"`
	// Username and Password are the node's own BMC user, bound to its
	// system (empty: the lab's user serves every node).
	Username string `json:"username,omitempty"`
	Password string `json:"-"`
	// Personality is the vendor BMC vbmcd gives the node (its entry of
	// its role's personalities in the lab file, else the role's
	// personality); empty is generic.
	Personality string `json:"personality,omitempty"`
	// Vendor is its Manufacturer, as the node's BMC reports it.
	Vendor string `json:"vendor,omitempty"`
	// PersonalityField is the lab file's field Personality comes from
	// (cluster.masters.personality, cluster.workers.personalities[1]), for
	// the errors of checks that refuse it.
	PersonalityField string `json:"personalityField,omitempty"`
	// Inband says the node's in-band IPMI (the KCS its OS reaches as
	// /dev/ipmi0) is wired to this BMC: an x86_64 node on the host the
	// lab's vbmcd runs on, whose socket it can reach.
	Inband bool `json:"inband,omitempty"`
}

// resolveNodes names the nodes <lab>-<role>-N (and <lab>-bootstrap in the
// modes with the BootImage trait), derives MACs and UUIDs from the names, reserves the DHCP
// range's addresses in order and gives each its disks and BMC endpoint.
func (p *Plan) resolveNodes(cfg *labconfig.Config) error {
	k := cfg.Cluster
	type group struct {
		role  string
		spec  labconfig.Role
		n     int
		field string // the role's in the lab file
	}
	groups := []group{{ocp.RoleMaster, k.Masters, k.Masters.N(), "masters"}, {ocp.RoleArbiter, k.Arbiter, k.Arbiter.N(), "arbiter"}, {ocp.RoleWorker, k.Workers, k.Workers.N() + p.addedWorkers, "workers"}}
	if p.Traits.BootImage && !p.Hybrid.SingleNode {
		// The bootstrap is sized like a master and first in line.
		groups = append([]group{{ocp.RoleBootstrap, k.Masters, 1, "masters"}}, groups...)
	}
	ip, ip6 := k.DHCPRange.Start, netip.Addr{}
	if k.IPFamily == labconfig.IPFamilyDual {
		ip6 = k.DHCPRangeV6.Start
	}
	for _, g := range groups {
		for i := 0; i < g.n; i++ {
			name := fmt.Sprintf("%s-%s-%d", cfg.Name, g.role, i)
			if g.role == ocp.RoleBootstrap {
				name = cfg.Name + "-bootstrap"
			}
			if !ip.IsValid() || !k.DHCPRange.Contains(ip) {
				return fmt.Errorf("cluster.dhcpRange: %s has no room for %d nodes; widen it", k.DHCPRange, len(p.Nodes)+1)
			}
			if ip6.IsValid() && !k.DHCPRangeV6.Contains(ip6) {
				return fmt.Errorf("cluster.dhcpRangeV6: %s has no room for %d nodes; widen it", k.DHCPRangeV6, len(p.Nodes)+1)
			}
			n := Node{
				Added: g.role == ocp.RoleWorker && i >= k.Workers.N(),
				Name:  name, Role: g.role, MAC: MACFor(cfg.Name, name), UUID: UUIDFor(cfg.Name, name), IP: ip,
				VCPUs: uint(g.spec.VCPUs), MemoryMiB: uint(g.spec.MemoryMiB), Arch: g.spec.Arch,
				SerialLog: filepath.Join(p.Paths.Logs, name+".serial.log"), Bond: g.spec.Bond,
			}
			p.nodeNICs(&n, p.Network.BridgeNetworks)
			ip = ip.Next()
			if ip6.IsValid() {
				n.SecondaryIP, ip6 = ip6, ip6.Next()
			}
			disk := Disk{Volume: name + ".qcow2", SizeGiB: uint(g.spec.DiskGiB)}
			if p.Hybrid != nil {
				disk.Backing = p.Hybrid.Backing
				n.Ignition = filepath.Join(p.Paths.IgnitionDir, name+".ign")
			}
			if p.Hybrid != nil && p.Hybrid.SingleNode {
				// A blank disk: the live ISO installs onto it. The merged
				// ignition stays beside the ISO it is embedded in, but
				// qemu does not hand it over (no fw_cfg).
				disk.Backing = ""
			}
			n.Disks = append(n.Disks, disk)
			for j, gib := range g.spec.ExtraDisks {
				n.Disks = append(n.Disks, Disk{Volume: fmt.Sprintf("%s-extra%d.qcow2", name, j+1), SizeGiB: uint(gib)})
			}
			for j := range n.Disks {
				n.Disks[j].Path = filepath.Join(p.Storage.Dir, n.Disks[j].Volume)
			}
			if p.Traits.BMCs {
				persona, field := g.spec.PersonalityOf(i)
				if err := p.endpoint(&n, len(p.Nodes), k.BMC.Kind, persona); err != nil {
					return err
				}
				if persona != "" {
					n.BMC.PersonalityField = "cluster." + g.field + "." + field
				}
				if k.BMC.UseNodeAccounts() {
					n.BMC.Username, n.BMC.Password = n.Name, NodePassword(p.BMC.Password, p.Lab, n.Name)
					if k.BMC.Kind == ocp.BMCIPMI || k.BMC.Network.IsValid() {
						// IPMI's longest password is 20 bytes (IPMI v2.0
						// §22.30): ipmitool, and Ironic through it, refuse
						// a longer one before they send anything. A BMC
						// of its own (a BMC network) answers IPMI at port
						// 623 whatever the kind (fence_ipmilan uses it).
						n.BMC.Password = n.BMC.Password[:ipmiMaxPassword]
						if len(n.Name) > ipmiMaxName {
							return fmt.Errorf("cluster.bmc.nodeAccounts: node %s's BMC user is its name, %d bytes, and an IPMI user name has at most %d (IPMI v2.0 §22.28); give the lab a shorter name (name) or every node the lab's user (cluster.bmc.nodeAccounts: false)", n.Name, len(n.Name), ipmiMaxName)
						}
					}
				}
			}
			p.Nodes = append(p.Nodes, n)
		}
	}
	return nil
}

// endpoint gives node i its BMC address: the one place it is made. A node
// whose BMC's personality has a virtual media scheme of its own
// (Personality.VirtualMediaScheme: a Dell's iDRAC) is reached as the
// installer reaches that vendor's BMC, by that scheme (idrac-virtualmedia),
// where the lab boots from virtual media; one with a network boot scheme
// (Personality.NetworkBootScheme: an iLO 6) by that scheme (ilo5://ADDR)
// where the lab boots from its provisioning network by Redfish (bmc.kind
// redfish; labconfig refuses it without a provisioning network or a BMC
// network). At a BMC of its own (a BMC network) a vendor's BMC is
// named by the path the vendor serves, as a real rack's would be
// (/redfish/v1/Systems/System.Embedded.1 for an iDRAC, /Systems/1 for an
// iLO or a Supermicro: vbmcd serves the vendor's ids there); on the
// shared listener every System is named by its node's UUID, the one id
// unique there. install-config's address and labctl's own SystemURL name
// the same System.
func (p *Plan) endpoint(n *Node, i int, kind, persona string) error {
	pers, err := personality.Lookup(persona)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	if persona != "" {
		n.BMC.Personality, n.BMC.Vendor = persona, pers.Manufacturer
		if pers.VirtualMediaScheme != "" && kind == ocp.BMCRedfishVirtualMedia {
			kind = pers.VirtualMediaScheme // the vendor's own driver (an iDRAC's)
		}
		if pers.NetworkBootScheme != "" && kind == ocp.BMCRedfish {
			kind = pers.NetworkBootScheme // the vendor's own network boot (an iLO's)
		}
	}
	if p.BMC.Network.IsValid() {
		// A BMC of its own: the next address of the BMC network, Redfish
		// and IPMI at their usual ports there.
		a := p.BMC.HostAddress
		for range i + 1 {
			a = a.Next()
		}
		if !p.BMC.Network.Contains(a) || (a.Is4() && !p.BMC.Network.Contains(a.Next())) {
			return fmt.Errorf("cluster.bmc.network: %s has no address left for node %s's BMC; use a larger subnet", p.BMC.Network, n.Name)
		}
		system := n.UUID
		if pers.SystemID != "" {
			system = pers.SystemID
		}
		n.BMC.Addr = a
		n.BMC.SystemURL = fmt.Sprintf("%s://%s/redfish/v1/Systems/%s", p.BMC.Scheme, hostForURL(a), system)
		addr, err := ocp.BMCAddress(ocp.BMCEndpoint{Kind: kind, Host: a.String(), TLS: p.BMC.Scheme == "https", OwnAddress: true}, system, 0)
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		n.BMC.Address = addr
		return nil
	}
	host := net.JoinHostPort(p.BMC.Host, strconv.Itoa(p.BMC.RedfishPort))
	n.BMC.SystemURL = fmt.Sprintf("%s://%s/redfish/v1/Systems/%s", p.BMC.Scheme, host, n.UUID)
	if p.BMC.Kind == ocp.BMCIPMI {
		n.BMC.IPMIPort = p.BMC.IPMIPortBase + i
	}
	addr, err := ocp.BMCAddress(ocp.BMCEndpoint{Kind: kind, Host: p.BMC.Host, RedfishPort: p.BMC.RedfishPort, TLS: p.BMC.Scheme == "https"}, n.UUID, n.BMC.IPMIPort)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	n.BMC.Address = addr
	return nil
}

// resolveInband wires the in-band IPMI of the nodes that have a BMC, an
// ISA bus for the KCS (x86_64) and the lab's vbmcd on their host (the
// hub, in a lab over several hosts: a unix socket does not cross hosts).
func (p *Plan) resolveInband() {
	hub := ""
	for _, h := range p.Hosts {
		if h.Hub {
			hub = h.Name
		}
	}
	for i := range p.Nodes {
		n := &p.Nodes[i]
		n.BMC.Inband = n.BMC.SystemURL != "" && n.Arch == ArchX86_64 && n.Host == hub
	}
}

// hostForURL is an address as a URL's host: IPv6 in brackets.
func hostForURL(a netip.Addr) string {
	if a.Is6() {
		return "[" + a.String() + "]"
	}
	return a.String()
}

// MACFor returns a node's boot MAC: the qemu prefix and three bytes of a
// hash of the lab's and the node's names, so a lab brought down and up again
// keeps its MACs.
func MACFor(lab, node string) string {
	h := sha256.Sum256([]byte(lab + "/" + node))
	return fmt.Sprintf("52:54:00:%02x:%02x:%02x", h[0], h[1], h[2])
}

// UUIDFor returns a node's domain UUID (name-based, version 5 layout), so
// the BMC addresses survive down and up.
func UUIDFor(lab, node string) string {
	h := sha1.Sum([]byte("bmlab-lab/" + lab + "/" + node))
	h[6] = (h[6] & 0x0f) | 0x50
	h[8] = (h[8] & 0x3f) | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// Node returns the node with that name.
func (p *Plan) Node(name string) (Node, bool) {
	for _, n := range p.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return Node{}, false
}

// NodeNames lists the nodes' names in order.
func (p *Plan) NodeNames() []string {
	out := make([]string, len(p.Nodes))
	for i, n := range p.Nodes {
		out[i] = n.Name
	}
	return out
}

// Added is what labctl add-node records: the workers added to the running
// cluster.
type Added struct {
	Workers int `json:"workers"`
}

// ReadAdded reads the workers added to a lab (0 when none were).
func ReadAdded(path string) (int, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("added nodes: %w", err)
	}
	var a Added
	if err := json.Unmarshal(b, &a); err != nil || a.Workers < 0 {
		return 0, fmt.Errorf("added nodes: %s is damaged (%v); write {\"workers\": N} or remove it", path, err)
	}
	return a.Workers, nil
}
