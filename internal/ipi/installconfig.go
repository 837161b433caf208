package ipi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/bmlab/bmlab/internal/ocp"
	"github.com/bmlab/bmlab/internal/yamljson"
)

// Boot modes, as install-config spells them (the roles are ocp's).
const (
	BootModeUEFI           = "UEFI"
	BootModeUEFISecureBoot = "UEFISecureBoot"
	BootModeLegacy         = "legacy"
)

// InstallConfig mirrors the parts of the installer's install-config v1
// (pkg/types/installconfig.go) that a bare-metal IPI lab sets. Addresses
// and CIDRs are strings, as a user may have typed them, so that Validate
// can report a malformed one the way the installer does.
type InstallConfig struct {
	APIVersion   string        `json:"apiVersion"`
	BaseDomain   string        `json:"baseDomain"`
	Metadata     Metadata      `json:"metadata"`
	Networking   Networking    `json:"networking"`
	Compute      []MachinePool `json:"compute"`
	ControlPlane MachinePool   `json:"controlPlane"`
	// Arbiter is the arbiter pool of a two-node control plane.
	Arbiter    *MachinePool `json:"arbiter,omitempty"`
	Platform   Platform     `json:"platform"`
	PullSecret string       `json:"pullSecret"`
	SSHKey     string       `json:"sshKey,omitempty"`
	// BootstrapInPlace makes a single node its own bootstrap (`create
	// single-node-ignition-config`): the live ISO installs onto
	// InstallationDisk.
	BootstrapInPlace *BootstrapInPlace `json:"bootstrapInPlace,omitempty"`
}

// BootstrapInPlace is install-config's bootstrapInPlace section.
type BootstrapInPlace struct {
	InstallationDisk string `json:"installationDisk"`
}

// Metadata holds the cluster's name.
type Metadata struct {
	Name string `json:"name"`
}

// Networking is install-config's networking section.
type Networking struct {
	NetworkType    string                `json:"networkType"`
	MachineNetwork []MachineNetworkEntry `json:"machineNetwork"`
	ClusterNetwork []ClusterNetworkEntry `json:"clusterNetwork"`
	ServiceNetwork []string              `json:"serviceNetwork"`
}

// MachineNetworkEntry is one machine network.
type MachineNetworkEntry struct {
	CIDR string `json:"cidr"`
}

// ClusterNetworkEntry is one pod network.
type ClusterNetworkEntry struct {
	CIDR       string `json:"cidr"`
	HostPrefix int    `json:"hostPrefix"`
}

// MachinePool is a control plane or compute pool; only its size matters
// on bare metal, the hosts themselves are platform.baremetal.hosts.
type MachinePool struct {
	Name     string `json:"name"`
	Replicas int    `json:"replicas"`
	// Architecture is the pool's CPU architecture in the installer's
	// words (ArchAMD64, ArchARM64; the installer's default is amd64).
	Architecture string `json:"architecture,omitempty"`
	// Fencing is a two-node control plane's: how each node is powered off
	// through its BMC when the other must take over.
	Fencing *Fencing `json:"fencing,omitempty"`
}

// Fencing is controlPlane.fencing (pkg/types/machinepools.go).
type Fencing struct {
	Credentials []FencingCredential `json:"credentials"`
}

// FencingCredential is one control-plane node's BMC, as the fence agent
// (fence_redfish) reaches it.
type FencingCredential struct {
	HostName string `json:"hostname"`
	Address  string `json:"address"`
	Username string `json:"username"`
	Password string `json:"password"`
	// CertificateVerification is Enabled or Disabled.
	CertificateVerification string `json:"certificateVerification,omitempty"`
}

// Certificate verification policies of a fencing credential.
const (
	CertificateVerificationEnabled  = "Enabled"
	CertificateVerificationDisabled = "Disabled"
)

// Platform holds the one platform a lab uses.
type Platform struct {
	BareMetal *BareMetal `json:"baremetal,omitempty"`
	// None is platform none, the UPI flow's: the installer creates no
	// machines and the cluster brings its own VIPs, DNS and load balancer.
	None *None `json:"none,omitempty"`
}

// None is platform.none: it has no fields.
type None struct{}

// BareMetal is platform.baremetal (pkg/types/baremetal/platform.go).
type BareMetal struct {
	APIVIPs                 []string `json:"apiVIPs"`
	IngressVIPs             []string `json:"ingressVIPs"`
	ProvisioningNetwork     string   `json:"provisioningNetwork"`
	ExternalBridge          string   `json:"externalBridge,omitempty"`
	ProvisioningBridge      string   `json:"provisioningBridge,omitempty"`
	ProvisioningNetworkCIDR string   `json:"provisioningNetworkCIDR,omitempty"`
	// ProvisioningNetworkInterface is the control-plane hosts' NIC on the
	// provisioning network (the guest's name, enp1s0 as dev-scripts'
	// CLUSTER_PRO_IF); ProvisioningDHCPRange the range the installer's
	// dnsmasq hands out there (Managed), "START,END".
	ProvisioningNetworkInterface string `json:"provisioningNetworkInterface,omitempty"`
	ProvisioningDHCPRange        string `json:"provisioningDHCPRange,omitempty"`
	// BootstrapProvisioningIP and ClusterProvisioningIP are where the
	// bootstrap VM's and then the cluster's provisioning services listen:
	// on the provisioning network, or with Disabled on the machine
	// network.
	BootstrapProvisioningIP string `json:"bootstrapProvisioningIP,omitempty"`
	ClusterProvisioningIP   string `json:"clusterProvisioningIP,omitempty"`
	// BMCVerifyCA is the CA (PEM) the BMCs' certificates are verified
	// with (OpenShift 4.21 and later).
	BMCVerifyCA string `json:"bmcVerifyCA,omitempty"`
	Hosts       []Host `json:"hosts"`
}

// Host is one bare-metal host the installer hands to Ironic.
type Host struct {
	Name            string           `json:"name"`
	Role            string           `json:"role"`
	BMC             BMC              `json:"bmc"`
	BootMACAddress  string           `json:"bootMACAddress"`
	BootMode        string           `json:"bootMode,omitempty"`
	RootDeviceHints *RootDeviceHints `json:"rootDeviceHints,omitempty"`
	// NetworkConfig is the host's nmstate state, which the installer
	// hands to the host (a bond of its NICs).
	NetworkConfig *NetworkConfig `json:"networkConfig,omitempty"`
}

// BMC is how Ironic reaches a host's BMC.
type BMC struct {
	Address                        string `json:"address"`
	Username                       string `json:"username"`
	Password                       string `json:"password"`
	DisableCertificateVerification bool   `json:"disableCertificateVerification,omitempty"`
}

// RootDeviceHints picks the disk the OS is installed on.
type RootDeviceHints struct {
	DeviceName string `json:"deviceName,omitempty"`
}

// Marshal renders ic as YAML with the fields in the order of the structs
// above (the installer's documentation order), not sorted: sigs.k8s.io/yaml
// sorts keys, so the JSON it would convert is re-read as an ordered YAML
// node tree and printed in block style instead.
func Marshal(ic *InstallConfig) ([]byte, error) {
	return MarshalOrdered(ic, "install-config")
}

// MarshalOrdered renders v as YAML with the fields in its structs' order;
// what names the file in errors.
func MarshalOrdered(v any, what string) ([]byte, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("marshal %s: %w", what, err)
	}
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(j, &doc); err != nil {
		return nil, fmt.Errorf("marshal %s: %w", what, err)
	}
	blockStyle(&doc)
	var buf bytes.Buffer
	enc := yamlv3.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, fmt.Errorf("marshal %s: %w", what, err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("marshal %s: %w", what, err)
	}
	return buf.Bytes(), nil
}

// blockStyle drops the flow and quoting styles JSON input leaves on every
// node; the encoder then quotes only the scalars that need it.
func blockStyle(n *yamlv3.Node) {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// Parse reads an install-config; unknown fields are errors, since a field
// this package does not know would be dropped by a Write.
func Parse(data []byte) (*InstallConfig, error) {
	ic := &InstallConfig{}
	if err := yamljson.UnmarshalStrict(data, ic); err != nil {
		msg := err.Error()
		return nil, fmt.Errorf("not an install-config this lab writes: %s", msg)
	}
	return ic, nil
}

// Write writes dir/install-config.yaml, mode 0600 (it holds the pull secret
// and the BMC passwords), replacing any previous one atomically.
func Write(dir string, ic *InstallConfig) error {
	data, err := Marshal(ic)
	if err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, ocp.InstallConfigFile), data)
}

// WriteFile writes a private file (0600) atomically.
func WriteFile(path string, data []byte) error { return writeFile(path, data) }

// writeFile writes a private file through a temporary one and a rename, so
// a reader never sees half of it and an old file's mode does not survive.
func writeFile(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(f.Name()) // after a successful rename: not found, ignored
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path) // CreateTemp made it 0600
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
