package ipi

import (
	"cmp"
	"fmt"
	"net/netip"
	"strings"

	"github.com/bmlab/bmlab/internal/netaddr"
	"github.com/bmlab/bmlab/internal/ocp"
)

// Networks every lab uses; the installer's defaults, written out so the
// file says what the cluster gets.
const (
	NetworkType       = "OVNKubernetes"
	ClusterNetwork    = "10.128.0.0/14"
	ClusterHostPrefix = 23
	ServiceNetwork    = "172.30.0.0/16"
	// The IPv6 family's, as the installer's documentation and dev-scripts
	// write them.
	ClusterNetworkV6    = "fd01::/48"
	ClusterHostPrefixV6 = 64
	ServiceNetworkV6    = "fd02::/112"
)

// ClusterNetworking is install-config's networking for the machine
// networks given, one per family, in the installer's order (IPv4 first in
// a dual-stack cluster): each family has its machine, cluster and service
// network.
func ClusterNetworking(machine ...netip.Prefix) Networking {
	n := Networking{NetworkType: NetworkType}
	for _, m := range machine {
		if !m.IsValid() {
			continue
		}
		n.MachineNetwork = append(n.MachineNetwork, MachineNetworkEntry{CIDR: m.String()})
		if m.Addr().Is6() {
			n.ClusterNetwork = append(n.ClusterNetwork, ClusterNetworkEntry{CIDR: ClusterNetworkV6, HostPrefix: ClusterHostPrefixV6})
			n.ServiceNetwork = append(n.ServiceNetwork, ServiceNetworkV6)
		} else {
			n.ClusterNetwork = append(n.ClusterNetwork, ClusterNetworkEntry{CIDR: ClusterNetwork, HostPrefix: ClusterHostPrefix})
			n.ServiceNetwork = append(n.ServiceNetwork, ServiceNetwork)
		}
	}
	return n
}

// DefaultRootDevice is the first virtio disk, the bus internal/virt gives a
// node's disks unless told otherwise.
const DefaultRootDevice = "/dev/vda"

// Node is what the labctl pipeline knows about one VM once its domain is
// defined.
type Node struct {
	// Name is the host's name in install-config (a DNS-1123 subdomain).
	Name string
	// Role is ocp.RoleMaster or ocp.RoleWorker.
	Role string
	// UUID is the domain's UUID, the node's Redfish System id.
	UUID string
	// BootMAC is the MAC of the NIC the host boots from: its NIC on the
	// provisioning network when there is one, as dev-scripts wires it,
	// else its NIC on the baremetal bridge.
	BootMAC string
	// RootDevice is the OS disk as the node sees it (default /dev/vda).
	RootDevice string
	// BMCAddress is the node's bmc.address, made by ocp.BMCAddress where the
	// lab plan resolves the node's endpoint; Generate never makes one.
	BMCAddress string
	// BMCUsername and BMCPassword are the node's own BMC user (empty: the
	// cluster's BMCUsername and BMCPassword).
	BMCUsername, BMCPassword string
	// NetworkConfig is the host's nmstate state (nil: none), such as a
	// bond of its NICs.
	NetworkConfig *NetworkConfig
}

// Cluster is what Generate needs of the lab's cluster: facts of the lab
// plan (internal/plan), which resolves them from the lab file.
type Cluster struct {
	Name       string
	BaseDomain string
	// Family is the machine network's (first) address family: the nodes'
	// subnet, the part of it DHCP hands out (the VIPs must stay outside
	// it) and the VIPs.
	netaddr.Family
	Masters int
	Workers int
	// ProvisioningNetwork is Managed, Unmanaged or Disabled; the CIDR and
	// bridge only matter when it is not Disabled.
	ProvisioningNetwork     string
	ProvisioningNetworkCIDR netip.Prefix
	ExternalBridge          string
	ProvisioningBridge      string
	// ProvisioningNetworkInterface is the hosts' NIC on the provisioning
	// network; ProvisioningDHCPRange the installer's DHCP range there
	// (written with Managed only: with Unmanaged the site's DHCP server
	// hands out the addresses). BootstrapProvisioningIP and
	// ClusterProvisioningIP are the provisioning services' addresses (on
	// the machine network with Disabled).
	ProvisioningNetworkInterface string
	ProvisioningDHCPRange        netaddr.Range
	BootstrapProvisioningIP      netip.Addr
	ClusterProvisioningIP        netip.Addr
	// BMCUsername and BMCPassword are every host's BMC credentials;
	// BMCInsecure turns certificate verification off (vbmcd's certificate
	// is self-signed).
	BMCUsername string
	BMCPassword string
	BMCInsecure bool
	// BMCVerifyCA is the CA (PEM) that issued the BMCs' certificate:
	// platform.baremetal.bmcVerifyCA, which the installer and Ironic verify
	// the BMCs with.
	BMCVerifyCA string
	// Arbiters is the arbiter pool's size (0 or 1, with 2 masters).
	Arbiters int
	// ControlPlaneArch, ComputeArch and ArbiterArch are the pools'
	// architectures as the lab names them (x86_64, aarch64; Architecture
	// gives the installer's words).
	ControlPlaneArch, ComputeArch, ArbiterArch string
	// Fencing gives a two-node control plane each master's BMC as its
	// fencing credential.
	Fencing bool
	// PlatformNone writes platform none (a single node of the agent-based
	// installer): no VIPs, no hosts.
	PlatformNone bool
	// Secondary is a dual-stack cluster's second family (IPv6 after the
	// IPv4 above); the zero Family for a single stack. An IPv6-only
	// cluster has IPv6 above.
	Secondary netaddr.Family
}

// Generate builds the install-config for the lab's cluster and nodes. It
// fails only on what the caller got wrong (a role it does not know, a node
// without a BMC address); what the installer would refuse is Validate's to
// report.
func Generate(k Cluster, nodes []Node, pullSecret, sshKey string) (*InstallConfig, error) {
	bm := &BareMetal{
		APIVIPs:             vips(k.APIVIP, k.Secondary.APIVIP),
		IngressVIPs:         vips(k.IngressVIP, k.Secondary.IngressVIP),
		ProvisioningNetwork: k.ProvisioningNetwork,
		ExternalBridge:      k.ExternalBridge,
		BMCVerifyCA:         k.BMCVerifyCA,
		Hosts:               []Host{},
	}
	if k.ProvisioningNetwork != ocp.ProvisioningDisabled {
		bm.ProvisioningBridge = k.ProvisioningBridge
		if k.ProvisioningNetworkCIDR.IsValid() {
			bm.ProvisioningNetworkCIDR = k.ProvisioningNetworkCIDR.String()
		}
		bm.ProvisioningNetworkInterface = k.ProvisioningNetworkInterface
		if r := k.ProvisioningDHCPRange; r.Start.IsValid() && k.ProvisioningNetwork == ocp.ProvisioningManaged {
			bm.ProvisioningDHCPRange = r.Start.String() + "," + r.End.String()
		}
	}
	if k.BootstrapProvisioningIP.IsValid() {
		bm.BootstrapProvisioningIP = k.BootstrapProvisioningIP.String()
	}
	if k.ClusterProvisioningIP.IsValid() {
		bm.ClusterProvisioningIP = k.ClusterProvisioningIP.String()
	}
	var fencing *Fencing
	if k.Fencing {
		fencing = &Fencing{Credentials: []FencingCredential{}}
	}
	for _, n := range nodes {
		if n.Role != ocp.RoleMaster && n.Role != ocp.RoleWorker && n.Role != ocp.RoleArbiter {
			return nil, fmt.Errorf("node %q: role %q is not %s, %s or %s", n.Name, n.Role, ocp.RoleMaster, ocp.RoleArbiter, ocp.RoleWorker)
		}
		addr := n.BMCAddress
		if addr == "" {
			return nil, fmt.Errorf("node %q: no BMC address (the lab plan gives every node one)", n.Name)
		}
		root := n.RootDevice
		if root == "" {
			root = DefaultRootDevice
		}
		user, pass := k.BMCUsername, k.BMCPassword
		if n.BMCUsername != "" {
			user, pass = n.BMCUsername, n.BMCPassword
		}
		if fencing != nil && n.Role == ocp.RoleMaster {
			verify := CertificateVerificationEnabled
			if k.BMCInsecure {
				verify = CertificateVerificationDisabled
			}
			fencing.Credentials = append(fencing.Credentials, FencingCredential{
				HostName: n.Name, Address: FencingAddress(addr), Username: user, Password: pass,
				CertificateVerification: verify,
			})
		}
		bm.Hosts = append(bm.Hosts, Host{
			Name: n.Name,
			Role: n.Role,
			BMC: BMC{
				Address:                        addr,
				Username:                       user,
				Password:                       pass,
				DisableCertificateVerification: k.BMCInsecure,
			},
			BootMACAddress:  n.BootMAC,
			BootMode:        BootModeUEFI,
			RootDeviceHints: &RootDeviceHints{DeviceName: root},
			NetworkConfig:   n.NetworkConfig,
		})
	}
	ic := &InstallConfig{
		APIVersion:   "v1",
		BaseDomain:   k.BaseDomain,
		Metadata:     Metadata{Name: k.Name},
		Networking:   ClusterNetworking(k.MachineNetwork, k.Secondary.MachineNetwork),
		Compute:      []MachinePool{{Name: ocp.RoleWorker, Replicas: k.Workers, Architecture: Architecture(k.ComputeArch)}},
		ControlPlane: MachinePool{Name: ocp.RoleMaster, Replicas: k.Masters, Fencing: fencing, Architecture: Architecture(k.ControlPlaneArch)},
		Platform:     Platform{BareMetal: bm},
		PullSecret:   pullSecret,
		SSHKey:       sshKey,
	}
	if k.Arbiters > 0 {
		ic.Arbiter = &MachinePool{Name: ocp.RoleArbiter, Replicas: k.Arbiters, Architecture: Architecture(cmp.Or(k.ArbiterArch, k.ControlPlaneArch))}
	}
	if k.PlatformNone {
		ic.Platform = Platform{None: &None{}}
	}
	return ic, nil
}

// CPU architectures as install-config names them (pkg/types
// Architecture: Go's GOARCH names).
const (
	ArchAMD64 = "amd64"
	ArchARM64 = "arm64"
	// ArchMulti is a release payload's architecture when it holds several
	// (`openshift-install version`: "release architecture multi").
	ArchMulti = "multi"
)

// Architecture is install-config's name for an architecture as libvirt,
// qemu and the RPMs name it (x86_64, aarch64); "" stays "" (the
// installer's default, amd64), a name it does not know stays as it is
// for Validate to report.
func Architecture(arch string) string {
	switch arch {
	case "x86_64":
		return ArchAMD64
	case "aarch64":
		return ArchARM64
	}
	return arch
}

// RPMArch is the other way: the name the agent installer gives its ISOs
// and nodes-config.yaml's cpuArchitecture (x86_64, aarch64).
func RPMArch(arch string) string {
	switch arch {
	case ArchAMD64, "":
		return "x86_64"
	case ArchARM64:
		return "aarch64"
	}
	return arch
}

// vips lists a VIP of each family, the valid ones in order.
func vips(a ...netip.Addr) []string {
	var out []string
	for _, v := range a {
		if v.IsValid() {
			out = append(out, v.String())
		}
	}
	return out
}

// FencingAddress is a BMC address as the fence agent takes it: Redfish
// power control, whatever the kind Ironic uses (redfish-virtualmedia+https
// becomes redfish+https).
func FencingAddress(bmcAddress string) string {
	for _, vm := range []string{ocp.BMCRedfishVirtualMedia, ocp.BMCIDRACVirtualMedia} {
		if rest, ok := strings.CutPrefix(bmcAddress, vm+"+"); ok {
			return ocp.BMCRedfish + "+" + rest
		}
	}
	return bmcAddress
}
