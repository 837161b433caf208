package ipi

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/ocp"
)

// validLab is the seed lab's install-config, which passes every rule.
func validLab(t *testing.T) *InstallConfig {
	t.Helper()
	ic, err := Generate(seed(), labNodes(seed(), seedBMC), testPullSecret, testSSHKey)
	if err != nil {
		t.Fatal(err)
	}
	return ic
}

var seedDHCP = seed().DHCPRange

// TestValidateRules is the table of rules: for each, an install-config
// that passes it and one that fails it with the installer's message. src
// is where the rule comes from in openshift/installer (or "lab" for this
// project's own rules).
func TestValidateRules(t *testing.T) {
	const rf = "redfish-virtualmedia+https://192.168.111.1:8000/redfish/v1/Systems/7d2bd0a4-5a4e-4c9b-9d0e-000000000000"
	managed := func(ic *InstallConfig) {
		bm := ic.Platform.BareMetal
		bm.ProvisioningNetwork = "Managed"
		bm.ProvisioningBridge = "provisioning"
		bm.ProvisioningNetworkCIDR = "172.22.0.0/24"
	}
	hosts := func(ic *InstallConfig) []Host { return ic.Platform.BareMetal.Hosts }
	d62 := strings.Repeat("d", 62)
	long := strings.Repeat(d62+".", 3) + d62 // 251 characters: seed.LONG has 256
	tests := []struct {
		rule, src  string
		pass, fail func(*InstallConfig)
		want       []string
	}{{
		rule: "apiVersion is v1", src: "pkg/types/validation/installconfig.go",
		fail: func(ic *InstallConfig) { ic.APIVersion = "v2" },
		want: []string{`apiVersion: Invalid value: "v2": install-config version must be "v1"`},
	}, {
		rule: "cluster name has no dot (on-prem platforms)", src: "pkg/types/validation/installconfig.go, pkg/validate",
		pass: func(ic *InstallConfig) { ic.Metadata.Name = "lab-2" },
		fail: func(ic *InstallConfig) { ic.Metadata.Name = "lab.2" },
		want: []string{`metadata.name: Invalid value: "lab.2": cluster name must not contain '.'`},
	}, {
		rule: "cluster name is at most 54 characters", src: "pkg/validate ClusterName",
		pass: func(ic *InstallConfig) { ic.Metadata.Name = strings.Repeat("a", 54) },
		fail: func(ic *InstallConfig) { ic.Metadata.Name = strings.Repeat("a", 55) },
		want: []string{`metadata.name: Invalid value: "` + strings.Repeat("a", 55) + `": must be no more than 54 characters`},
	}, {
		rule: "cluster name is a DNS-1123 subdomain", src: "pkg/validate ClusterName",
		fail: func(ic *InstallConfig) { ic.Metadata.Name = "Lab_2" },
		want: []string{`metadata.name: Invalid value: "Lab_2": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
	}, {
		rule: "base domain is a domain name (a trailing dot is fine)", src: "pkg/types/validation/installconfig.go, pkg/validate DomainName",
		pass: func(ic *InstallConfig) { ic.BaseDomain = "example.com." },
		fail: func(ic *InstallConfig) { ic.BaseDomain = "example..com" },
		want: []string{`baseDomain: Invalid value: "example..com": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
	}, {
		rule: "cluster domain is at most 253 characters", src: "pkg/types/validation/installconfig.go",
		pass: func(ic *InstallConfig) { ic.BaseDomain = strings.Repeat("d", 63) + "." + strings.Repeat("d", 63) },
		fail: func(ic *InstallConfig) { ic.BaseDomain = long },
		want: []string{`baseDomain: Invalid value: "seed.` + long + `": must be no more than 253 characters`},
	}, {
		rule: "sshKey is an authorized_keys line", src: "pkg/types/validation/installconfig.go, pkg/validate SSHPublicKey",
		pass: func(ic *InstallConfig) { ic.SSHKey = "" },
		fail: func(ic *InstallConfig) { ic.SSHKey = "ssh-rsa not-a-key" },
		want: []string{`sshKey: Invalid value: "ssh-rsa not-a-key": ssh: no key found; last parsing error for ignored line: illegal base64 data at input byte 3`},
	}, {
		rule: "networkType is set and not OpenShiftSDN", src: "pkg/types/validation/installconfig.go validateNetworking",
		fail: func(ic *InstallConfig) { ic.Networking.NetworkType = "OpenShiftSDN" },
		want: []string{`networking.networkType: Invalid value: "OpenShiftSDN": networkType OpenShiftSDN is not supported, please use OVNKubernetes`},
	}, {
		rule: "machine network is a network address", src: "pkg/validate SubnetCIDR",
		fail: func(ic *InstallConfig) {
			ic.Networking.MachineNetwork[0].CIDR = "192.168.111.1/24"
		},
		// The installer's ipnet keeps the host bits but Contains ignores
		// them: the VIPs still count as inside.
		want: []string{`networking.machineNetwork[0]: Invalid value: "192.168.111.1/24": invalid network address. got 192.168.111.1/24, expecting 192.168.111.0/24`},
	}, {
		rule: "machine network avoids OVN-Kubernetes' internal subnets", src: "pkg/types/validation/installconfig.go validateNetworkNotOverlapDefaultOVNSubnets",
		pass: func(ic *InstallConfig) { retarget(ic, "100.66.0.0/24") },
		fail: func(ic *InstallConfig) { retarget(ic, "100.64.1.0/24") },
		want: []string{`networking.machineNetwork[0]: Invalid value: "100.64.1.0/24": must not overlap with OVNKubernetes default internal subnet 100.64.0.0/16`},
	}, {
		rule: "an IPv6 machine network avoids OVN-Kubernetes' IPv6 internal subnets", src: "pkg/types/validation/installconfig.go validateNetworkNotOverlapDefaultOVNSubnets",
		pass: func(ic *InstallConfig) { retargetV6(ic, "fd2e:6f44:5dd8:c956::/120") },
		fail: func(ic *InstallConfig) { retargetV6(ic, "fd97::/120") },
		want: []string{`networking.machineNetwork[0]: Invalid value: "fd97::/120": must not overlap with OVNKubernetes default transit subnet fd97::/64`},
	}, {
		rule: "service network does not overlap the machine network", src: "pkg/types/validation/installconfig.go validateServiceNetwork",
		pass: func(ic *InstallConfig) { ic.Networking.ServiceNetwork = []string{"172.31.0.0/16"} },
		fail: func(ic *InstallConfig) { retarget(ic, "172.30.8.0/24") },
		want: []string{`networking.serviceNetwork[0]: Invalid value: "172.30.0.0/16": service network must not overlap with any of the machine networks`},
	}, {
		rule: "cluster network does not overlap the machine network", src: "pkg/types/validation/installconfig.go validateClusterNetwork",
		fail: func(ic *InstallConfig) { retarget(ic, "10.130.0.0/24") },
		want: []string{`networking.clusterNetwork[0].cidr: Invalid value: "10.128.0.0/14": cluster network must not overlap with any of the machine networks`},
	}, {
		rule: "API VIP is an IP", src: "pkg/types/validation/installconfig.go validateAPIAndIngressVIPs",
		fail: func(ic *InstallConfig) { ic.Platform.BareMetal.APIVIPs = []string{"192.168.111.256"} },
		want: []string{
			`platform.baremetal.apiVIPs: Invalid value: "192.168.111.256": "192.168.111.256" is not a valid IP`,
			`platform.baremetal.apiVIPs: Invalid value: "192.168.111.256": IP expected to be in one of the machine networks: 192.168.111.0/24`,
		},
	}, {
		rule: "API VIP is in a machine network", src: "pkg/types/validation/installconfig.go ValidateIPinMachineCIDR",
		pass: func(ic *InstallConfig) { ic.Platform.BareMetal.APIVIPs = []string{"192.168.111.254"} },
		fail: func(ic *InstallConfig) { ic.Platform.BareMetal.APIVIPs = []string{"192.168.112.5"} },
		want: []string{`platform.baremetal.apiVIPs: Invalid value: "192.168.112.5": IP expected to be in one of the machine networks: 192.168.111.0/24`},
	}, {
		rule: "Ingress VIP is in a machine network", src: "pkg/types/validation/installconfig.go ValidateIPinMachineCIDR",
		fail: func(ic *InstallConfig) { ic.Platform.BareMetal.IngressVIPs = []string{"10.0.0.4"} },
		want: []string{`platform.baremetal.ingressVIPs: Invalid value: "10.0.0.4": IP expected to be in one of the machine networks: 192.168.111.0/24`},
	}, {
		rule: "an API VIP is required", src: "pkg/types/validation/installconfig.go validateAPIAndIngressVIPs",
		fail: func(ic *InstallConfig) { ic.Platform.BareMetal.APIVIPs = nil },
		want: []string{`platform.baremetal.apiVIPs: Required value: must specify at least one VIP for the API`},
	}, {
		rule: "API and Ingress VIPs differ", src: "pkg/types/validation/installconfig.go validateAPIAndIngressVIPs",
		fail: func(ic *InstallConfig) { ic.Platform.BareMetal.IngressVIPs = []string{"192.168.111.5"} },
		want: []string{`platform.baremetal.apiVIPs: Invalid value: "192.168.111.5": VIP for API must not be one of the Ingress VIPs`},
	}, {
		rule: "VIPs are outside the DHCP range", src: "lab",
		pass: func(ic *InstallConfig) { ic.Platform.BareMetal.APIVIPs = []string{"192.168.111.61"} },
		fail: func(ic *InstallConfig) { ic.Platform.BareMetal.IngressVIPs = []string{"192.168.111.20"} },
		want: []string{`platform.baremetal.ingressVIPs: Invalid value: "192.168.111.20": IP is inside the machine network's DHCP range 192.168.111.20-192.168.111.60, where a node could lease it`},
	}, {
		rule: "provisioningNetwork is Managed, Unmanaged or Disabled", src: "pkg/types/baremetal/validation/platform.go ValidatePlatform",
		pass: managed,
		fail: func(ic *InstallConfig) { ic.Platform.BareMetal.ProvisioningNetwork = "disabled" },
		want: []string{`platform.baremetal.provisioningNetwork: Unsupported value: "disabled": supported values: "Disabled", "Managed", "Unmanaged"`},
	}, {
		rule: "enough master hosts for the control plane", src: "pkg/types/baremetal/validation/platform.go validateHostsCount",
		fail: func(ic *InstallConfig) { ic.ControlPlane.Replicas = 4 },
		want: []string{`platform.baremetal.hosts: Required value: not enough hosts found (3) to support all the configured ControlPlane replicas (4)`},
	}, {
		rule: "enough worker hosts for compute (hosts without role fill in)", src: "pkg/types/baremetal/validation/platform.go validateHostsCount",
		pass: func(ic *InstallConfig) { hosts(ic)[4].Role = "" },
		fail: func(ic *InstallConfig) { ic.Compute[0].Replicas = 3 },
		want: []string{`platform.baremetal.hosts: Required value: not enough hosts found (2) to support all the configured Compute replicas (3)`},
	}, {
		rule: "fewer compute replicas than worker hosts is fine; every master host is a replica", src: "lab",
		pass: func(ic *InstallConfig) { ic.Compute[0].Replicas = 1 },
		fail: func(ic *InstallConfig) { ic.ControlPlane.Replicas = 1 },
		want: []string{`controlPlane.replicas: Invalid value: 1: must equal the number of hosts with role master (3)`},
	}, {
		rule: "two control-plane nodes need fencing or an arbiter", src: "pkg/types/validation (two-node topologies, 4.19+)",
		pass: func(ic *InstallConfig) {
			ic.ControlPlane.Replicas = 2
			hosts(ic)[2].Role = ocp.RoleArbiter
			ic.Arbiter = &MachinePool{Name: ocp.RoleArbiter, Replicas: 1}
		},
		fail: func(ic *InstallConfig) {
			ic.ControlPlane.Replicas = 2
			hosts(ic)[2].Role = ocp.RoleWorker
		},
		want: []string{`controlPlane.replicas: Invalid value: 2: 2 control plane replicas require fencing credentials (controlPlane.fencing) or an arbiter (arbiter)`},
	}, {
		rule: "a fencing credential per control-plane node, Redfish, with a user", src: "pkg/types/validation (two-node fencing)",
		pass: func(ic *InstallConfig) {
			ic.ControlPlane.Replicas = 2
			hosts(ic)[2].Role = ocp.RoleWorker
			ic.ControlPlane.Fencing = &Fencing{Credentials: []FencingCredential{
				{HostName: "m0", Address: "redfish+https://10.0.0.1/redfish/v1/Systems/a", Username: "u", Password: "p", CertificateVerification: "Disabled"},
				{HostName: "m1", Address: "redfish+https://10.0.0.1/redfish/v1/Systems/b", Username: "u", Password: "p"}}}
		},
		fail: func(ic *InstallConfig) {
			ic.ControlPlane.Replicas = 2
			hosts(ic)[2].Role = ocp.RoleWorker
			ic.ControlPlane.Fencing = &Fencing{Credentials: []FencingCredential{
				{HostName: "m0", Address: "ipmi://10.0.0.1:623", Username: "u", Password: "p", CertificateVerification: "Maybe"},
				{HostName: "m0", Address: "redfish+https://10.0.0.1/redfish/v1/Systems/b"}}}
		},
		want: []string{
			`controlPlane.fencing.credentials[0].address: Invalid value: "ipmi://10.0.0.1:623": must be a Redfish address (redfish+https://…)`,
			`controlPlane.fencing.credentials[0].certificateVerification: Unsupported value: "Maybe": supported values: "Enabled", "Disabled"`,
			`controlPlane.fencing.credentials[1].hostname: Duplicate value: "m0"`,
			`controlPlane.fencing.credentials[1].username: Required value: missing Username`,
			`controlPlane.fencing.credentials[1].password: Required value: missing Password`,
		},
	}, {
		rule: "control plane replicas are positive", src: "pkg/types/validation/installconfig.go validateControlPlane",
		fail: func(ic *InstallConfig) {
			ic.ControlPlane.Replicas = 0
			for i := range 3 {
				hosts(ic)[i].Role = ocp.RoleWorker
			}
			ic.Compute[0].Replicas = 5
		},
		want: []string{`controlPlane.replicas: Invalid value: 0: number of control plane replicas must be positive`},
	}, {
		rule: "host names are unique", src: "pkg/types/baremetal/platform.go (uniqueField), pkg/types/common",
		fail: func(ic *InstallConfig) { hosts(ic)[1].Name = hosts(ic)[0].Name },
		want: []string{`platform.baremetal.hosts[1].name: Duplicate value: "seed-master-0"`},
	}, {
		rule: "host names are set", src: "pkg/types/baremetal/platform.go (required), pkg/types/common",
		fail: func(ic *InstallConfig) { hosts(ic)[2].Name = "" },
		want: []string{
			`platform.baremetal.hosts[2].name: Required value: missing Name`,
			`platform.baremetal.hosts[2].name: Invalid value: "": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		},
	}, {
		rule: "host names are DNS-1123 subdomains", src: "pkg/types/baremetal/validation/platform.go validateHostsName",
		pass: func(ic *InstallConfig) { hosts(ic)[0].Name = "master-0.lab" },
		fail: func(ic *InstallConfig) { hosts(ic)[0].Name = "Master_0" },
		want: []string{`platform.baremetal.hosts[0].name: Invalid value: "Master_0": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
	}, {
		rule: "boot MAC addresses are unique", src: "pkg/types/baremetal/platform.go (uniqueField), pkg/types/common",
		fail: func(ic *InstallConfig) { hosts(ic)[4].BootMACAddress = hosts(ic)[3].BootMACAddress },
		want: []string{`platform.baremetal.hosts[4].bootMACAddress: Duplicate value: "52:54:00:6b:3c:13"`},
	}, {
		rule: "boot MAC addresses are set", src: "pkg/types/baremetal/platform.go (required), pkg/types/common",
		fail: func(ic *InstallConfig) { hosts(ic)[3].BootMACAddress = "" },
		want: []string{`platform.baremetal.hosts[3].bootMACAddress: Required value: missing BootMACAddress`},
	}, {
		rule: "BMC addresses are unique", src: "pkg/types/baremetal/platform.go (uniqueField), validateHostsBMCOnly",
		fail: func(ic *InstallConfig) { hosts(ic)[1].BMC.Address = rf },
		want: []string{`platform.baremetal.hosts[1].bmc.address: Duplicate value: "` + rf + `"`},
	}, {
		rule: "BMC credentials are set", src: "pkg/types/baremetal/platform.go (required), validateHostsBMCOnly",
		fail: func(ic *InstallConfig) { hosts(ic)[0].BMC.Password = "" },
		want: []string{`platform.baremetal.hosts[0].bmc.password: Required value: missing Password`},
	}, {
		rule: "a Disabled provisioning network takes only virtual-media BMCs", src: "pkg/types/baremetal/validation/platform.go validateProvisioningNetworkDisabledSupported",
		pass: func(ic *InstallConfig) {
			hosts(ic)[0].BMC.Address = "idrac-virtualmedia://10.1.1.1/redfish/v1/Systems/System.Embedded.1"
		},
		fail: func(ic *InstallConfig) {
			hosts(ic)[0].BMC.Address = "ipmi://192.168.111.1:6230"
			hosts(ic)[1].BMC.Address = "redfish+https://192.168.111.1:8000/redfish/v1/Systems/x"
		},
		want: []string{
			`platform.baremetal.hosts[0].bmc: Invalid value: "ipmi://192.168.111.1:6230": driver ipmi requires provisioning network`,
			`platform.baremetal.hosts[1].bmc: Invalid value: "redfish+https://192.168.111.1:8000/redfish/v1/Systems/x": driver redfish requires provisioning network`,
		},
	}, {
		rule: "a Managed provisioning network takes any BMC", src: "pkg/types/baremetal/validation/platform.go ValidateProvisioningNetworking",
		pass: func(ic *InstallConfig) { managed(ic); hosts(ic)[0].BMC.Address = "192.168.111.1:6230" },
		fail: func(ic *InstallConfig) { managed(ic); hosts(ic)[0].BMC.Address = "racadm://10.1.1.1" },
		want: []string{`platform.baremetal.hosts[0].bmc: Invalid value: "racadm://10.1.1.1": Unknown BMC type 'racadm' for address racadm://10.1.1.1`},
	}, {
		rule: "Managed needs a provisioning bridge and CIDR", src: "lab (the installer defaults them)",
		pass: managed,
		fail: func(ic *InstallConfig) {
			managed(ic)
			ic.Platform.BareMetal.ProvisioningBridge = ""
			ic.Platform.BareMetal.ProvisioningNetworkCIDR = ""
		},
		want: []string{
			`platform.baremetal.provisioningBridge: Required value: a provisioning bridge is required when provisioningNetwork is Managed`,
			`platform.baremetal.provisioningNetworkCIDR: Required value: a provisioning network CIDR is required when provisioningNetwork is Managed`,
		},
	}, {
		rule: "provisioning network does not overlap the machine network", src: "pkg/types/baremetal/validation/platform.go validateNoOverlapMachineCIDR",
		fail: func(ic *InstallConfig) { managed(ic); ic.Platform.BareMetal.ProvisioningNetworkCIDR = "192.168.0.0/16" },
		want: []string{`platform.baremetal.provisioningNetworkCIDR: Invalid value: "192.168.0.0/16": cannot overlap with machine network: 192.168.0.0/16 overlaps with 192.168.111.0/24`},
	}, {
		rule: "provisioning network has no host bits", src: "pkg/types/baremetal/validation/platform.go ValidateProvisioningNetworking",
		fail: func(ic *InstallConfig) { managed(ic); ic.Platform.BareMetal.ProvisioningNetworkCIDR = "172.22.0.1/24" },
		want: []string{`platform.baremetal.provisioningNetworkCIDR: Invalid value: "172.22.0.1/24": provisioningNetworkCIDR has host bits set, expected 172.22.0.0/24`},
	}, {
		rule: "provisioning IPs are in the provisioning network, the bootstrap's outside the machine networks", src: "pkg/types/baremetal/validation/platform.go ValidateProvisioning",
		pass: func(ic *InstallConfig) {
			managed(ic)
			ic.Platform.BareMetal.BootstrapProvisioningIP, ic.Platform.BareMetal.ClusterProvisioningIP = "172.22.0.2", "172.22.0.3"
		},
		fail: func(ic *InstallConfig) {
			managed(ic)
			ic.Platform.BareMetal.BootstrapProvisioningIP, ic.Platform.BareMetal.ClusterProvisioningIP = "192.168.111.7", "172.22.1.3"
		},
		want: []string{
			`platform.baremetal.bootstrapProvisioningIP: Invalid value: "192.168.111.7": "192.168.111.7" is not in the provisioning network`,
			`platform.baremetal.bootstrapProvisioningIP: Invalid value: "192.168.111.7": the IP must not be in one of the machine networks`,
			`platform.baremetal.clusterProvisioningIP: Invalid value: "172.22.1.3": "172.22.1.3" is not in the provisioning network`,
		},
	}, {
		rule: "the provisioning DHCP range is START,END in the provisioning network, the provisioning IPs outside it", src: "pkg/types/baremetal/validation/platform.go validateDHCPRange",
		pass: func(ic *InstallConfig) {
			managed(ic)
			ic.Platform.BareMetal.ProvisioningDHCPRange = "172.22.0.10,172.22.0.253"
			ic.Platform.BareMetal.BootstrapProvisioningIP = "172.22.0.2"
		},
		fail: func(ic *InstallConfig) {
			managed(ic)
			ic.Platform.BareMetal.ProvisioningDHCPRange = "172.22.0.2,172.22.0.253"
			ic.Platform.BareMetal.BootstrapProvisioningIP = "172.22.0.2"
		},
		want: []string{`platform.baremetal.bootstrapProvisioningIP: Invalid value: "172.22.0.2": "172.22.0.2" overlaps with the allocated DHCP range`},
	}, {
		rule: "the provisioning DHCP range's ends are in the provisioning network", src: "pkg/types/baremetal/validation/platform.go validateDHCPRange",
		fail: func(ic *InstallConfig) {
			managed(ic)
			ic.Platform.BareMetal.ProvisioningDHCPRange = "172.22.0.10,172.23.0.10"
		},
		want: []string{`platform.baremetal.provisioningDHCPRange: Invalid value: "172.22.0.10,172.23.0.10": "172.23.0.10" is not in the provisioning network`},
	}, {
		rule: "the provisioning DHCP range has two ends", src: "pkg/types/baremetal/validation/platform.go validateDHCPRange",
		fail: func(ic *InstallConfig) {
			managed(ic)
			ic.Platform.BareMetal.ProvisioningDHCPRange = "172.22.0.10-172.22.0.20"
		},
		want: []string{`platform.baremetal.provisioningDHCPRange: Invalid value: "172.22.0.10-172.22.0.20": provisioning DHCP range should be in format: start_ip,end_ip`},
	}, {
		rule: "with Disabled the provisioning IPs are in a machine network, outside its DHCP range, not a VIP", src: "pkg/types/baremetal/validation/platform.go ValidateProvisioning; lab",
		pass: func(ic *InstallConfig) {
			ic.Platform.BareMetal.BootstrapProvisioningIP, ic.Platform.BareMetal.ClusterProvisioningIP = "192.168.111.7", "192.168.111.8"
		},
		fail: func(ic *InstallConfig) {
			ic.Platform.BareMetal.BootstrapProvisioningIP, ic.Platform.BareMetal.ClusterProvisioningIP = "172.22.0.2", "192.168.111.30"
			ic.Platform.BareMetal.APIVIPs = []string{"192.168.111.5"}
		},
		want: []string{
			`platform.baremetal.bootstrapProvisioningIP: Invalid value: "172.22.0.2": provisioning network is disabled, IP expected to be in one of the machine networks: 192.168.111.0/24`,
			`platform.baremetal.clusterProvisioningIP: Invalid value: "192.168.111.30": IP is inside the machine network's DHCP range, where a node could lease it`,
		},
	}, {
		rule: "with Disabled a provisioning IP is not a VIP", src: "lab",
		fail: func(ic *InstallConfig) {
			ic.Platform.BareMetal.ClusterProvisioningIP = ic.Platform.BareMetal.IngressVIPs[0]
		},
		want: []string{`platform.baremetal.clusterProvisioningIP: Invalid value: "192.168.111.4": IP is one of the VIPs`},
	}, {
		rule: "boot mode is UEFI, UEFISecureBoot or legacy", src: "pkg/types/baremetal/validation/platform.go validateBootMode",
		pass: func(ic *InstallConfig) { hosts(ic)[0].BootMode = "legacy" },
		fail: func(ic *InstallConfig) { hosts(ic)[0].BootMode = "bios" },
		want: []string{`platform.baremetal.hosts[0].bootMode: Unsupported value: "bios": supported values: "UEFI", "UEFISecureBoot", "legacy"`},
	}, {
		rule: "secure boot needs a driver that supports it", src: "pkg/types/baremetal/validation/platform.go validateBootMode",
		pass: func(ic *InstallConfig) { hosts(ic)[0].BootMode = "UEFISecureBoot" },
		fail: func(ic *InstallConfig) {
			managed(ic)
			hosts(ic)[0].BootMode = "UEFISecureBoot"
			hosts(ic)[0].BMC.Address = "ipmi://10.1.1.1"
		},
		want: []string{`platform.baremetal.hosts[0].bootMode: Invalid value: "UEFISecureBoot": driver ipmi does not support UEFI secure boot`},
	}, {
		rule: "root device hint is a /dev path", src: "pkg/types/baremetal/validation/platform.go ValidateHostRootDeviceHints",
		pass: func(ic *InstallConfig) {
			hosts(ic)[0].RootDeviceHints.DeviceName = "/dev/disk/by-path/pci-0000:04:00.0"
		},
		fail: func(ic *InstallConfig) { hosts(ic)[0].RootDeviceHints.DeviceName = "vda" },
		want: []string{`platform.baremetal.hosts[0].rootDeviceHints.deviceName: Invalid value: "vda": Device Name of root device hint must be a /dev/ path`},
	}, {
		rule: "pool names are master and worker", src: "pkg/types/validation/installconfig.go validateControlPlane, validateCompute",
		fail: func(ic *InstallConfig) { ic.Compute[0].Name = "workers" },
		want: []string{`compute[0].name: Unsupported value: "workers": supported values: "worker", "edge"`},
	}, {
		rule: "pull secret is JSON", src: "pkg/validate ImagePullSecret",
		fail: func(ic *InstallConfig) { ic.PullSecret = "auths: {}" },
		want: []string{`pullSecret: Invalid value: "<redacted>": invalid character 'a' looking for beginning of value`},
	}, {
		rule: "pull secret has auths", src: "pkg/validate ImagePullSecret",
		pass: func(ic *InstallConfig) { ic.PullSecret = `{"auths":{"r.io":{"credsStore":"pass"}}}` },
		fail: func(ic *InstallConfig) { ic.PullSecret = `{"credHelpers":{}}` },
		want: []string{`pullSecret: Invalid value: "<redacted>": auths required`},
	}, {
		rule: "every registry has auth or credsStore", src: "pkg/validate ImagePullSecret",
		fail: func(ic *InstallConfig) { ic.PullSecret = `{"auths":{"b.io":{"email":"x"},"a.io":{}}}` },
		want: []string{`pullSecret: Invalid value: "<redacted>": ["a.io" requires either auth or credsStore, "b.io" requires either auth or credsStore]`},
	}, {
		rule: "dual stack: every network list has one network of each family", src: "pkg/types/validation/installconfig.go validateNetworkingIPVersion",
		pass: dual,
		fail: func(ic *InstallConfig) { dual(ic); ic.Networking.ServiceNetwork = ic.Networking.ServiceNetwork[:1] },
		want: []string{`networking.serviceNetwork: Invalid value: "172.30.0.0/16": when installing dual-stack IPv4/IPv6 you must provide two service networks, one for each IP address type`},
	}, {
		rule: "networks of two families make a dual-stack cluster", src: "pkg/types/validation/installconfig.go validateNetworkingIPVersion",
		pass: func(ic *InstallConfig) { retargetV6(ic, "fd2e:6f44:5dd8:c956::/120") },
		fail: func(ic *InstallConfig) { retarget(ic, "fd2e:6f44:5dd8:c956::/120") },
		want: []string{
			`networking.machineNetwork: Invalid value: "fd2e:6f44:5dd8:c956::/120": when installing dual-stack IPv4/IPv6 you must provide two machine networks, one for each IP address type`,
			`networking.clusterNetwork: Invalid value: "10.128.0.0/14": when installing dual-stack IPv4/IPv6 you must provide two cluster networks, one for each IP address type`,
			`networking.serviceNetwork: Invalid value: "172.30.0.0/16": when installing dual-stack IPv4/IPv6 you must provide two service networks, one for each IP address type`,
		},
	}, {
		rule: "dual stack: the families in the same order everywhere", src: "pkg/types/validation/installconfig.go validateNetworkingIPVersion",
		fail: func(ic *InstallConfig) {
			dual(ic)
			n := &ic.Networking
			n.ClusterNetwork[0], n.ClusterNetwork[1] = n.ClusterNetwork[1], n.ClusterNetwork[0]
		},
		want: []string{`networking.clusterNetwork: Invalid value: "fd01::/48, 10.128.0.0/14": IPv4 and IPv6 addresses must be listed in the same order in all networks`},
	}, {
		rule: "dual stack: two VIPs are of two families, the primary's first", src: "pkg/types/validation/installconfig.go validateAPIAndIngressVIPs",
		fail: func(ic *InstallConfig) {
			dual(ic)
			bm := ic.Platform.BareMetal
			bm.APIVIPs = []string{bm.APIVIPs[1], bm.APIVIPs[0]}
			bm.IngressVIPs = []string{bm.IngressVIPs[0], "192.168.111.6"}
		},
		want: []string{
			`platform.baremetal.apiVIPs: Invalid value: "fd2e:6f44:5dd8:c956::5": VIP for API must be of the same IP family with machine network's primary IP Family for dual-stack IPv4/IPv6`,
			`platform.baremetal.ingressVIPs: Invalid value: ["192.168.111.4","192.168.111.6"]: If two Ingress VIPs are given, one must be an IPv4 address, the other an IPv6`,
		},
	}, {
		rule: "a pool's architecture is one the installer knows", src: "pkg/types/validation/machinepools.go",
		pass: func(ic *InstallConfig) {
			ic.ControlPlane.Architecture, ic.Compute[0].Architecture = ArchARM64, ArchARM64
		},
		fail: func(ic *InstallConfig) { ic.ControlPlane.Architecture, ic.Compute[0].Architecture = "x86_64", "x86_64" },
		want: []string{
			`controlPlane.architecture: Unsupported value: "x86_64": supported values: "amd64", "arm64", "ppc64le", "s390x"`,
			`compute[0].architecture: Unsupported value: "x86_64": supported values: "amd64", "arm64", "ppc64le", "s390x"`,
		},
	}, {
		rule: "multi-arch bare metal: an amd64 control plane with arm64 compute", src: "pkg/types/validation/installconfig.go validateCompute",
		pass: func(ic *InstallConfig) {
			ic.ControlPlane.Architecture, ic.Compute[0].Architecture = ArchAMD64, ArchARM64
		},
		fail: func(ic *InstallConfig) {
			ic.ControlPlane.Architecture, ic.Compute[0].Architecture = ArchARM64, ArchAMD64
		},
		want: []string{
			`compute[0].architecture: Invalid value: "arm64": on multi-arch baremetal, the control plane must be amd64`,
			`compute[0].architecture: Invalid value: "amd64": on baremetal with amd64 control plane, compute must be amd64 or arm64`,
		},
	}, {
		rule: "platform none has no mixed architectures", src: "pkg/types/validation/installconfig.go validateCompute",
		fail: func(ic *InstallConfig) {
			ic.Platform = Platform{None: &None{}}
			ic.ControlPlane.Architecture, ic.Compute[0].Architecture = ArchAMD64, ArchARM64
		},
		want: []string{`compute[0].architecture: Invalid value: "arm64": heteregeneous multi-arch is not supported; compute pool architecture must match control plane`},
	}}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			if tt.pass != nil {
				ic := validLab(t)
				tt.pass(ic)
				if errs := Validate(ic, seedDHCP); len(errs) > 0 {
					t.Errorf("passing case (rule from %s): %v", tt.src, errs)
				}
			}
			ic := validLab(t)
			tt.fail(ic)
			var got []string
			for _, e := range Validate(ic, seedDHCP) {
				got = append(got, e.Error())
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("failing case (rule from %s) (-want +got):\n%s", tt.src, d)
			}
		})
	}
}

// retargetV6 moves the lab to an IPv6 machine network, with the IPv6
// cluster and service networks.
func retargetV6(ic *InstallConfig, cidr string) {
	retarget(ic, cidr)
	ic.Networking = ClusterNetworking(netip.MustParsePrefix(cidr))
}

// dual makes the seed's install-config dual-stack, IPv6 second.
func dual(ic *InstallConfig) {
	ic.Networking = ClusterNetworking(netip.MustParsePrefix("192.168.111.0/24"), netip.MustParsePrefix("fd2e:6f44:5dd8:c956::/120"))
	bm := ic.Platform.BareMetal
	bm.APIVIPs = append(bm.APIVIPs, "fd2e:6f44:5dd8:c956::5")
	bm.IngressVIPs = append(bm.IngressVIPs, "fd2e:6f44:5dd8:c956::4")
}

// retarget moves the lab to another machine network, VIPs included.
func retarget(ic *InstallConfig, cidr string) {
	p := netip.MustParsePrefix(cidr)
	ic.Networking.MachineNetwork[0].CIDR = cidr
	ic.Platform.BareMetal.APIVIPs = []string{p.Addr().Next().Next().String()}
	ic.Platform.BareMetal.IngressVIPs = []string{p.Addr().Next().Next().Next().String()}
}

func TestValidatePassesTheSeedAndWordsTheList(t *testing.T) {
	if errs := Validate(validLab(t), seedDHCP); len(errs) > 0 {
		t.Fatalf("Validate(seed) = %v", errs)
	}
	ic := validLab(t)
	ic.Platform.BareMetal.APIVIPs = []string{"10.0.0.5"}
	ic.Metadata.Name = "a.b"
	err := error(Validate(ic, seedDHCP))
	want := `invalid "install-config.yaml" file: [metadata.name: Invalid value: "a.b": cluster name must not contain '.', platform.baremetal.apiVIPs: Invalid value: "10.0.0.5": IP expected to be in one of the machine networks: 192.168.111.0/24]`
	if err.Error() != want {
		t.Errorf("error\n got %s\nwant %s", err, want)
	}
	ic.APIVersion = ""
	if got := Validate(ic, seedDHCP).Error(); got != `invalid "install-config.yaml" file: apiVersion: Required value: install-config version required` {
		t.Errorf("no apiVersion: %s", got)
	}
}

// TestValidateRelease: a single-architecture release payload installs its
// own architecture only, a multi one any; an unknown one is not checked
// (pkg/types/validation/installconfig.go validateReleaseArchitecture).
func TestValidateRelease(t *testing.T) {
	mixed := validLab(t)
	mixed.ControlPlane.Architecture, mixed.Compute[0].Architecture = ArchAMD64, ArchARM64
	for _, tt := range []struct {
		ic      *InstallConfig
		release string
		want    []string
	}{
		{validLab(t), ArchAMD64, nil},
		{mixed, ArchMulti, nil},
		{mixed, "unknown", nil},
		{mixed, ArchAMD64, []string{`compute[0].architecture: Invalid value: "arm64": cannot create arm64 compute node from a single architecture amd64 release payload`}},
		{mixed, ArchARM64, []string{`controlPlane.architecture: Invalid value: "amd64": cannot create amd64 controlPlane node from a single architecture arm64 release payload`}},
	} {
		var got []string
		for _, e := range ValidateRelease(tt.ic, tt.release) {
			got = append(got, e.Error())
		}
		if d := cmp.Diff(tt.want, got); d != "" {
			t.Errorf("release %s (-want +got):\n%s", tt.release, d)
		}
	}
}
