package ipi

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/bmlab/bmlab/internal/labconfig"
)

// Networks every lab uses; the installer's defaults, written out so the
// file says what the cluster gets.
const (
	NetworkType       = "OVNKubernetes"
	ClusterNetwork    = "10.128.0.0/14"
	ClusterHostPrefix = 23
	ServiceNetwork    = "172.30.0.0/16"
)

// DefaultRootDevice is the first virtio disk, the bus internal/virt gives a
// node's disks unless told otherwise.
const DefaultRootDevice = "/dev/vda"

// Node is what the labctl pipeline knows about one VM once its domain is
// defined.
type Node struct {
	// Name is the host's name in install-config (a DNS-1123 subdomain).
	Name string
	// Role is RoleMaster or RoleWorker.
	Role string
	// UUID is the domain's UUID, the node's Redfish System id.
	UUID string
	// BootMAC is the MAC of the node's NIC on the baremetal bridge.
	BootMAC string
	// RootDevice is the OS disk as the node sees it (default /dev/vda).
	RootDevice string
	// BMCAddress is the node's bmc.address, made by BMCAddress where the
	// lab plan resolves the node's endpoint; Generate never makes one.
	BMCAddress string
}

// BMCAddress is a node's bmc.address for the lab's BMC kind:
//
//	redfish-virtualmedia+https://HOST:PORT/redfish/v1/Systems/UUID
//	redfish+https://HOST:PORT/redfish/v1/Systems/UUID
//	ipmi://HOST:PORT
//
// (http instead of https when the lab's BMC has TLS off).
func BMCAddress(b labconfig.BMC, uuid string, ipmiPort int) (string, error) {
	switch b.Kind {
	case labconfig.BMCIPMI:
		if ipmiPort < 1 || ipmiPort > 65535 {
			return "", fmt.Errorf("bmc address: IPMI port %d is not a port", ipmiPort)
		}
		return "ipmi://" + net.JoinHostPort(b.Address, strconv.Itoa(ipmiPort)), nil
	case labconfig.BMCRedfish, labconfig.BMCRedfishVirtualMedia:
		if uuid == "" {
			return "", errors.New("bmc address: a Redfish BMC needs the node's UUID")
		}
		scheme := "http"
		if b.UseTLS() {
			scheme = "https"
		}
		return fmt.Sprintf("%s+%s://%s/redfish/v1/Systems/%s", b.Kind, scheme,
			net.JoinHostPort(b.Address, strconv.Itoa(b.RedfishPort)), uuid), nil
	}
	return "", fmt.Errorf("bmc address: unknown BMC kind %q", b.Kind)
}

// Generate builds the install-config for the lab's cluster and nodes. It
// fails only on what the caller got wrong (a role or BMC kind it does not
// know, a Redfish node without UUID); what the installer would refuse is
// Validate's to report.
func Generate(cfg labconfig.Config, nodes []Node, pullSecret, sshKey string) (*InstallConfig, error) {
	k := cfg.Cluster
	bm := &BareMetal{
		APIVIPs:             []string{k.APIVIP.String()},
		IngressVIPs:         []string{k.IngressVIP.String()},
		ProvisioningNetwork: cfg.Network.ProvisioningNetwork,
		ExternalBridge:      externalBridge(cfg.Network),
		Hosts:               []Host{},
	}
	if cfg.Network.ProvisioningNetwork != labconfig.ProvisioningDisabled {
		bm.ProvisioningBridge = provisioningBridge(cfg.Network, bm.ExternalBridge)
		if k.ProvisioningNetworkCIDR.IsValid() {
			bm.ProvisioningNetworkCIDR = k.ProvisioningNetworkCIDR.String()
		}
	}
	// vbmcd's certificate is self-signed unless the lab says otherwise.
	insecure := k.BMC.Kind != labconfig.BMCIPMI && k.BMC.UseTLS()
	for _, n := range nodes {
		if n.Role != RoleMaster && n.Role != RoleWorker {
			return nil, fmt.Errorf("node %q: role %q is not %s or %s", n.Name, n.Role, RoleMaster, RoleWorker)
		}
		addr := n.BMCAddress
		if addr == "" {
			return nil, fmt.Errorf("node %q: no BMC address (the lab plan gives every node one)", n.Name)
		}
		root := n.RootDevice
		if root == "" {
			root = DefaultRootDevice
		}
		bm.Hosts = append(bm.Hosts, Host{
			Name: n.Name,
			Role: n.Role,
			BMC: BMC{
				Address:                        addr,
				Username:                       k.BMC.Username,
				Password:                       k.BMC.Password,
				DisableCertificateVerification: insecure,
			},
			BootMACAddress:  n.BootMAC,
			BootMode:        BootModeUEFI,
			RootDeviceHints: &RootDeviceHints{DeviceName: root},
		})
	}
	return &InstallConfig{
		APIVersion: "v1",
		BaseDomain: k.BaseDomain,
		Metadata:   Metadata{Name: k.Name},
		Networking: Networking{
			NetworkType:    NetworkType,
			MachineNetwork: []MachineNetworkEntry{{CIDR: k.MachineNetwork.String()}},
			ClusterNetwork: []ClusterNetworkEntry{{CIDR: ClusterNetwork, HostPrefix: ClusterHostPrefix}},
			ServiceNetwork: []string{ServiceNetwork},
		},
		Compute:      []MachinePool{{Name: RoleWorker, Replicas: k.Workers.N()}},
		ControlPlane: MachinePool{Name: RoleMaster, Replicas: k.Masters.N()},
		Platform:     Platform{BareMetal: bm},
		PullSecret:   pullSecret,
		SSHKey:       sshKey,
	}, nil
}

// externalBridge is the lab's baremetal bridge, else its first bridge.
func externalBridge(n labconfig.Network) string {
	for _, b := range n.Bridges {
		if b.Name == labconfig.BaremetalBridge {
			return b.Name
		}
	}
	if len(n.Bridges) > 0 {
		return n.Bridges[0].Name
	}
	return ""
}

// provisioningBridge is the lab's provisioning bridge, else its first
// bridge that is not the external one ("" when there is none: Validate
// says so).
func provisioningBridge(n labconfig.Network, external string) string {
	other := ""
	for _, b := range n.Bridges {
		if b.Name == labconfig.ProvisioningBridge {
			return b.Name
		}
		if other == "" && b.Name != external {
			other = b.Name
		}
	}
	return other
}

// PlaceholderNodes are the lab's nodes before their domains exist: names
// master-N and worker-N, locally administered MACs and made-up UUIDs. They
// let Precheck validate everything but the real MACs and UUIDs.
func PlaceholderNodes(k labconfig.Cluster) []Node {
	var nodes []Node
	add := func(role string, n int) {
		for i := range n {
			j := len(nodes) + 1
			n := Node{
				Name:    fmt.Sprintf("%s-%d", role, i),
				Role:    role,
				UUID:    fmt.Sprintf("00000000-0000-4000-8000-%012x", j),
				BootMAC: fmt.Sprintf("02:00:00:00:%02x:%02x", j>>8&0xff, j&0xff),
			}
			n.BMCAddress, _ = BMCAddress(k.BMC, n.UUID, k.BMC.IPMIPortBase+j-1)
			nodes = append(nodes, n)
		}
	}
	add(RoleMaster, k.Masters.N())
	add(RoleWorker, k.Workers.N())
	return nodes
}

// Precheck validates the install-config the lab will produce, with
// placeholder nodes, before any VM is built.
func Precheck(cfg labconfig.Config, pullSecret, sshKey string) error {
	ic, err := Generate(cfg, PlaceholderNodes(cfg.Cluster), pullSecret, sshKey)
	if err != nil {
		return err
	}
	if errs := Validate(ic, cfg.Cluster.DHCPRange); len(errs) > 0 {
		return errs
	}
	return nil
}
