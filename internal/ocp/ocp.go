package ocp

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Machine roles, as install-config spells them (bootstrap: the
// installer's temporary control plane, whose ignition is bootstrap.ign, in
// no install-config). The lab file, the plan and the hybrid flow speak of
// roles in these words.
const (
	RoleBootstrap = "bootstrap"
	RoleMaster    = "master"
	RoleWorker    = "worker"
	RoleArbiter   = "arbiter"
)

// BMC kinds, as the schemes of install-config's bmc.address spell them
// (and the lab file's cluster.bmc.kind).
const (
	// BMCRedfishVirtualMedia boots the discovery and install images from
	// virtual media; the only kind that works with a Disabled provisioning
	// network.
	BMCRedfishVirtualMedia = "redfish-virtualmedia"
	// BMCRedfish is Redfish power and boot control with PXE on the
	// provisioning network.
	BMCRedfish = "redfish"
	// BMCIPMI is IPMI lanplus, one UDP port per node, with PXE on the
	// provisioning network.
	BMCIPMI = "ipmi"
	// BMCIDRACVirtualMedia is a Dell iDRAC's redfish-virtualmedia: the
	// baremetal-operator's idrac driver (Ironic's idrac hardware type).
	BMCIDRACVirtualMedia = "idrac-virtualmedia"
	// BMCILO5 is an HPE iLO 5 or 6 booted from the provisioning network:
	// the baremetal-operator's ilo5 driver (Ironic's ilo5 hardware type,
	// ilo-ipxe), HTTPS only, its address the BMC's host alone.
	BMCILO5 = "ilo5"
)

// Provisioning network modes, as platform.baremetal.provisioningNetwork
// spells them (and the lab file's network.provisioningNetwork).
const (
	ProvisioningManaged   = "Managed"
	ProvisioningUnmanaged = "Unmanaged"
	ProvisioningDisabled  = "Disabled"
)

// BondName is the bond of a lab host whose NICs on the machine network
// are bonded.
const BondName = "bond0"

// BondModes a lab's bond may have (the kernel bonding driver's, as
// dev-scripts' BOND_CONFIG offers them): the ones a Linux bridge, the
// lab's switch, carries. 802.3ad needs a switch that speaks LACP.
var BondModes = []string{"active-backup", "balance-rr", "balance-xor", "broadcast", "balance-tlb", "balance-alb"}

// Files in the installer's directory.
const (
	// InstallConfigFile is the name the installer reads in its asset
	// directory.
	InstallConfigFile = "install-config.yaml"
	// InstallerLogName is the installer's own log (debug level), which it
	// writes in its directory.
	InstallerLogName = ".openshift_install.log"
	// OutputLogName is our copy of what the installer printed, every run
	// appended.
	OutputLogName = "openshift-install.out"
)

// AgentISOName is the agent ISO `agent create image` writes for the
// control plane's architecture (x86_64, aarch64: InfraEnv's
// cpuArchitecture, as the RPMs name it): agent.<arch>.iso.
func AgentISOName(arch string) string { return "agent." + cmp.Or(arch, "x86_64") + ".iso" }

// BMCEndpoint is where the lab's BMCs answer.
type BMCEndpoint struct {
	Kind        string
	Host        string
	RedfishPort int
	TLS         bool
	// OwnAddress: Host is the node's BMC's own address (a BMC network),
	// with Redfish and IPMI at their usual ports (443 or 80, 623), which
	// the address leaves out.
	OwnAddress bool
}

// BMCAddress is a node's bmc.address for the lab's BMC kind, its System
// named system (the node's UUID, or at a BMC of its own the vendor's id,
// such as an iDRAC's System.Embedded.1):
//
//	redfish-virtualmedia+https://HOST:PORT/redfish/v1/Systems/SYSTEM
//	redfish+https://HOST:PORT/redfish/v1/Systems/SYSTEM
//	idrac-virtualmedia+https://HOST:PORT/redfish/v1/Systems/SYSTEM
//	ipmi://HOST:PORT
//	ilo5://HOST:PORT
//
// (http instead of https when the lab's BMC has TLS off; without :PORT for
// a BMC of its own, OwnAddress). ilo5 takes HTTPS only (the
// baremetal-operator registers it so) and names no System: the iLO's
// driver finds its one System itself.
func BMCAddress(b BMCEndpoint, system string, ipmiPort int) (string, error) {
	switch b.Kind {
	case BMCIPMI:
		if b.OwnAddress {
			return "ipmi://" + urlHost(b.Host), nil
		}
		if ipmiPort < 1 || ipmiPort > 65535 {
			return "", fmt.Errorf("bmc address: IPMI port %d is not a port", ipmiPort)
		}
		return "ipmi://" + net.JoinHostPort(b.Host, strconv.Itoa(ipmiPort)), nil
	case BMCILO5:
		if !b.TLS {
			return "", errors.New("bmc address: ilo5 is HTTPS only; the lab's BMC has TLS off")
		}
		if b.OwnAddress {
			return "ilo5://" + urlHost(b.Host), nil
		}
		return "ilo5://" + net.JoinHostPort(b.Host, strconv.Itoa(b.RedfishPort)), nil
	case BMCRedfish, BMCRedfishVirtualMedia, BMCIDRACVirtualMedia:
		if system == "" {
			return "", errors.New("bmc address: a Redfish BMC needs the node's System id")
		}
		scheme := "http"
		if b.TLS {
			scheme = "https"
		}
		host := net.JoinHostPort(b.Host, strconv.Itoa(b.RedfishPort))
		if b.OwnAddress {
			host = urlHost(b.Host)
		}
		return fmt.Sprintf("%s+%s://%s/redfish/v1/Systems/%s", b.Kind, scheme, host, system), nil
	}
	return "", fmt.Errorf("bmc address: unknown BMC kind %q", b.Kind)
}

// urlHost is a host as a URL's: an IPv6 address in brackets.
func urlHost(h string) string {
	if strings.Contains(h, ":") {
		return "[" + h + "]"
	}
	return h
}
