package ipi

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/bmlab/bmlab/internal/netaddr"
	"github.com/bmlab/bmlab/internal/ocp"
)

// The rules below restate the OpenShift installer's (openshift/installer,
// read at its main branch): the facts and the messages, not its code.
// Each rule names the file it comes from; rules marked "lab" are this
// project's own, for mistakes the installer would only find an hour later
// or never.

// ErrorType is the kind of a FieldError, worded as
// k8s.io/apimachinery/pkg/util/validation/field words it.
type ErrorType string

// The error types the installer's rules use.
const (
	ErrorInvalid     ErrorType = "Invalid value"
	ErrorRequired    ErrorType = "Required value"
	ErrorDuplicate   ErrorType = "Duplicate value"
	ErrorUnsupported ErrorType = "Unsupported value"
	ErrorTooMany     ErrorType = "Too many"
)

// FieldError is one problem with one field of an install-config.
type FieldError struct {
	Type   ErrorType
	Field  string // e.g. platform.baremetal.hosts[1].bootMACAddress
	Value  any    // the bad value (never a secret: those are redacted)
	Detail string
}

// redacted stands for a value that must not reach a terminal or a log.
const redacted = "<redacted>"

// Error prints the error as the installer does: `FIELD: TYPE: VALUE: DETAIL`.
func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.Field + ": " + string(e.Type))
	if e.Type != ErrorRequired {
		b.WriteString(": ")
		switch v := e.Value.(type) {
		case string:
			fmt.Fprintf(&b, "%q", v)
		case int, int64, bool:
			fmt.Fprintf(&b, "%v", v)
		default:
			j, _ := json.Marshal(v)
			b.Write(j)
		}
	}
	if e.Detail != "" {
		b.WriteString(": " + e.Detail)
	}
	return b.String()
}

// ErrorList is every problem Validate found; as an error it is the
// installer's one-line list.
type ErrorList []*FieldError

func (l ErrorList) Error() string {
	msgs := make([]string, len(l))
	for i, e := range l {
		msgs[i] = e.Error()
	}
	if len(msgs) == 1 {
		return `invalid "install-config.yaml" file: ` + msgs[0]
	}
	return `invalid "install-config.yaml" file: [` + strings.Join(msgs, ", ") + "]"
}

type checker struct{ errs ErrorList }

func (c *checker) add(t ErrorType, field string, value any, detail string) {
	c.errs = append(c.errs, &FieldError{Type: t, Field: field, Value: value, Detail: detail})
}

func (c *checker) invalid(field string, value any, detail string) {
	c.add(ErrorInvalid, field, value, detail)
}

func (c *checker) required(field, detail string) { c.add(ErrorRequired, field, nil, detail) }

func (c *checker) unsupported(field string, value any, supported ...string) {
	q := make([]string, len(supported))
	for i, s := range supported {
		q[i] = fmt.Sprintf("%q", s)
	}
	c.add(ErrorUnsupported, field, value, "supported values: "+strings.Join(q, ", "))
}

// Validate returns every problem the installer would report for ic, and
// the lab's own: dhcpRanges (zero ones unchecked) are the machine
// networks' DHCP ranges, one per family, which the VIPs must stay out of.
func Validate(ic *InstallConfig, dhcpRanges ...netaddr.Range) ErrorList {
	c := &checker{}
	if ic.APIVersion != "v1" {
		// pkg/types/validation/installconfig.go: nothing else is checked.
		if ic.APIVersion == "" {
			c.required("apiVersion", "install-config version required")
		} else {
			c.invalid("apiVersion", ic.APIVersion, `install-config version must be "v1"`)
		}
		return c.errs
	}
	machine := c.names(ic)
	c.networking(ic.Networking)
	bm := ic.Platform.BareMetal
	switch {
	case bm != nil && ic.Platform.None != nil:
		c.invalid("platform", "", "must only specify a single type of platform; cannot use both \"baremetal\" and \"none\"")
	case ic.Platform.None != nil:
		// platform none: the installer checks names, networks, pools and
		// the pull secret only.
	case bm == nil:
		c.invalid("platform", "", "must specify one of the platforms (baremetal, none)")
	default:
		c.vips(bm, machine, dhcpRanges)
		c.platform(bm, ic)
		c.provisioning(bm, machine)
		c.provisioningIPs(bm, machine, dhcpRanges)
	}
	c.pools(ic)
	c.pullSecret(ic.PullSecret)
	return c.errs
}

// names: pkg/types/validation/installconfig.go (metadata.name through
// validate.OnPremClusterName on baremetal, baseDomain and the cluster
// domain through validate.DomainName, sshKey through validate.SSHPublicKey).
// It returns the parsed machine networks for the rules that need them.
func (c *checker) names(ic *InstallConfig) []netip.Prefix {
	if ic.SSHKey != "" {
		if _, _, _, _, err := ssh.ParseAuthorizedKey([]byte(ic.SSHKey)); err != nil {
			c.invalid("sshKey", ic.SSHKey, err.Error())
		}
	}
	nameErr := onPremClusterName(ic.Metadata.Name)
	if nameErr != nil {
		c.invalid("metadata.name", ic.Metadata.Name, nameErr.Error())
	}
	domainErr := domainName(ic.BaseDomain)
	if domainErr != nil {
		c.invalid("baseDomain", ic.BaseDomain, domainErr.Error())
	}
	if nameErr == nil && domainErr == nil {
		cd := ic.Metadata.Name + "." + ic.BaseDomain
		if err := domainName(cd); err != nil {
			c.invalid("baseDomain", cd, err.Error())
		}
	}
	var machine []netip.Prefix
	for _, m := range ic.Networking.MachineNetwork {
		if p, err := netip.ParsePrefix(m.CIDR); err == nil {
			machine = append(machine, p)
		}
	}
	return machine
}

// OVN-Kubernetes' default internal subnets, which no network of the
// cluster may overlap (pkg/validate: OVNIPv4JoinSubnet and the others).
var ovnSubnets = []struct {
	name   string
	prefix netip.Prefix
}{
	{"internal", netip.MustParsePrefix("100.64.0.0/16")},
	{"transit", netip.MustParsePrefix("100.88.0.0/16")},
	{"masquerade", netip.MustParsePrefix("169.254.0.0/17")},
	{"internal", netip.MustParsePrefix("fd98::/64")},
	{"transit", netip.MustParsePrefix("fd97::/64")},
	{"masquerade", netip.MustParsePrefix("fd69::/112")},
}

// networking: pkg/types/validation/installconfig.go (validateNetworking,
// validateMachineNetwork, validateServiceNetwork, validateClusterNetwork,
// validateNetworkNotOverlapDefaultOVNSubnets), for each family; the
// dual-stack rules are dualStack's.
func (c *checker) networking(n Networking) {
	if n.NetworkType == "" {
		c.required("networking.networkType", "network provider type required")
	} else if strings.EqualFold(n.NetworkType, "OpenShiftSDN") {
		c.invalid("networking.networkType", n.NetworkType, "networkType OpenShiftSDN is not supported, please use OVNKubernetes")
	}
	if len(n.MachineNetwork) == 0 {
		c.required("networking.machineNetwork", "at least one machine network is required")
	}
	var machine []netip.Prefix
	for i, m := range n.MachineNetwork {
		f := fmt.Sprintf("networking.machineNetwork[%d]", i)
		p, ok := c.networkSubnet(f, m.CIDR, n.NetworkType)
		if !ok {
			continue
		}
		for j, o := range machine {
			if p.Overlaps(o) {
				c.invalid(f, m.CIDR, fmt.Sprintf("machine network must not overlap with machine network %d", j))
			}
		}
		machine = append(machine, p)
	}
	overlapsMachine := func(p netip.Prefix) bool {
		return slices.ContainsFunc(machine, p.Overlaps)
	}
	if len(n.ServiceNetwork) == 0 {
		c.required("networking.serviceNetwork", "a service network is required")
	}
	var service []netip.Prefix
	for i, s := range n.ServiceNetwork {
		f := fmt.Sprintf("networking.serviceNetwork[%d]", i)
		p, ok := c.networkSubnet(f, s, n.NetworkType)
		if !ok {
			continue
		}
		if overlapsMachine(p) {
			c.invalid(f, s, "service network must not overlap with any of the machine networks")
		}
		service = append(service, p)
	}
	if len(n.ClusterNetwork) == 0 {
		c.required("networking.clusterNetwork", "cluster network required")
	}
	c.dualStack(n)
	for i, cn := range n.ClusterNetwork {
		f := fmt.Sprintf("networking.clusterNetwork[%d].cidr", i)
		p, ok := c.networkSubnet(f, cn.CIDR, n.NetworkType)
		if !ok {
			continue
		}
		if overlapsMachine(p) {
			c.invalid(f, cn.CIDR, "cluster network must not overlap with any of the machine networks")
		}
		for j, s := range service {
			if p.Overlaps(s) {
				c.invalid(f, cn.CIDR, fmt.Sprintf("cluster network must not overlap with service network %d", j))
			}
		}
		if cn.HostPrefix < p.Bits() {
			c.invalid(fmt.Sprintf("networking.clusterNetwork[%d].hostPrefix", i), cn.HostPrefix,
				"cluster network host subnetwork prefix must not be larger size than CIDR "+cn.CIDR)
		}
	}
}

// dualStack: pkg/types/validation/installconfig.go
// (validateNetworkingIPVersion) as it applies to bare metal: networks of
// both families, in any list, make the cluster dual-stack, and then every
// list has one network of each family, in the same order (IPv4 first or
// IPv6 first, the same everywhere).
func (c *checker) dualStack(n Networking) {
	type list struct {
		field, what string
		cidrs       []string
	}
	lists := []list{{"networking.machineNetwork", "machine networks", nil}, {"networking.clusterNetwork", "cluster networks", nil}, {"networking.serviceNetwork", "service networks", nil}}
	for _, m := range n.MachineNetwork {
		lists[0].cidrs = append(lists[0].cidrs, m.CIDR)
	}
	for _, cn := range n.ClusterNetwork {
		lists[1].cidrs = append(lists[1].cidrs, cn.CIDR)
	}
	lists[2].cidrs = n.ServiceNetwork
	// families is "4", "6", "46" or "64": the families in order of first
	// appearance; "" when a CIDR does not parse (reported elsewhere).
	families := func(cidrs []string) string {
		var f string
		for _, s := range cidrs {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return ""
			}
			x := "4"
			if p.Addr().Is6() {
				x = "6"
			}
			if !strings.Contains(f, x) {
				f += x
			}
		}
		return f
	}
	var all []string
	for _, l := range lists {
		all = append(all, l.cidrs...)
	}
	if len(families(all)) != 2 {
		return
	}
	if !strings.EqualFold(n.NetworkType, NetworkType) {
		c.invalid("networking.networkType", n.NetworkType, "dual-stack IPv4/IPv6 requires OVNKubernetes network type")
	}
	order := ""
	for _, l := range lists {
		f := families(l.cidrs)
		switch {
		case f == "":
		case len(f) != 2 || len(l.cidrs) != 2:
			c.invalid(l.field, strings.Join(l.cidrs, ", "), "when installing dual-stack IPv4/IPv6 you must provide two "+l.what+", one for each IP address type")
		case order == "":
			order = f
		case f != order:
			c.invalid(l.field, strings.Join(l.cidrs, ", "), "IPv4 and IPv6 addresses must be listed in the same order in all networks")
		}
	}
}

// subnet parses a CIDR as pkg/validate.SubnetCIDR checks it.
func (c *checker) subnet(field, s string) (netip.Prefix, bool) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		c.invalid(field, s, "invalid CIDR address: "+s)
		return p, false
	}
	if p.Addr().IsUnspecified() {
		c.invalid(field, s, "address must be specified")
		return p, false
	}
	if p != p.Masked() {
		c.invalid(field, s, fmt.Sprintf("invalid network address. got %s, expecting %s", s, p.Masked()))
		return p, false
	}
	return p, true
}

// networkSubnet is subnet for an entry of networking's lists, which must
// not overlap OVNKubernetes' own subnets either (notOVN).
func (c *checker) networkSubnet(field, s, networkType string) (netip.Prefix, bool) {
	p, ok := c.subnet(field, s)
	if ok {
		c.notOVN(field, p, networkType)
	}
	return p, ok
}

func (c *checker) notOVN(field string, p netip.Prefix, networkType string) {
	if !strings.EqualFold(networkType, NetworkType) {
		return
	}
	for _, o := range ovnSubnets {
		if p.Overlaps(o.prefix) {
			c.invalid(field, p.String(), fmt.Sprintf("must not overlap with OVNKubernetes default %s subnet %s", o.name, o.prefix))
		}
	}
}

// vips: pkg/types/validation/installconfig.go (validateAPIAndIngressVIPs,
// ValidateIPinMachineCIDR), for one VIP of each; plus the lab's rule that
// a VIP outside the DHCP range cannot be leased to a node.
func (c *checker) vips(bm *BareMetal, machine []netip.Prefix, dhcp []netaddr.Range) {
	const api, ingress = "platform.baremetal.apiVIPs", "platform.baremetal.ingressVIPs"
	var cidrs []string
	for _, p := range machine {
		cidrs = append(cidrs, p.String())
	}
	check := func(field string, vips []string, what string) {
		switch {
		case len(vips) == 0:
			c.required(field, "must specify at least one VIP for the "+what)
			return
		case len(vips) > 2:
			c.add(ErrorTooMany, field, len(vips), "must have at most 2 items")
			return
		}
		for _, v := range vips {
			a, err := netip.ParseAddr(v)
			if err != nil {
				c.invalid(field, v, fmt.Sprintf("%q is not a valid IP", v))
			}
			if err != nil || !slices.ContainsFunc(machine, func(p netip.Prefix) bool { return p.Contains(a) }) {
				c.invalid(field, v, "IP expected to be in one of the machine networks: "+strings.Join(cidrs, ","))
			} else if i := slices.IndexFunc(dhcp, func(r netaddr.Range) bool { return r.Contains(a) }); i >= 0 { // lab
				c.invalid(field, v, fmt.Sprintf("IP is inside the machine network's DHCP range %s, where a node could lease it", dhcp[i]))
			}
		}
		// Dual stack: one VIP per family, the first of the primary's.
		if len(vips) == 2 {
			a, errA := netip.ParseAddr(vips[0])
			b, errB := netip.ParseAddr(vips[1])
			if errA == nil && errB == nil && a.Is4() == b.Is4() {
				c.invalid(field, vips, fmt.Sprintf("If two %s VIPs are given, one must be an IPv4 address, the other an IPv6", what))
			}
			if errA == nil && len(machine) > 1 && machine[0].Addr().Is4() != a.Is4() {
				c.invalid(field, vips[0], fmt.Sprintf("VIP for %s must be of the same IP family with machine network's primary IP Family for dual-stack IPv4/IPv6", what))
			}
		}
	}
	check(api, bm.APIVIPs, "API")
	check(ingress, bm.IngressVIPs, "Ingress")
	for _, a := range bm.APIVIPs {
		for _, i := range bm.IngressVIPs {
			x, errA := netip.ParseAddr(a)
			y, errI := netip.ParseAddr(i)
			if errA == nil && errI == nil && x == y {
				c.invalid(api, a, "VIP for API must not be one of the Ingress VIPs")
			}
		}
	}
}

// platform: pkg/types/baremetal/validation/platform.go (ValidatePlatform,
// ValidateHosts: validateHostsCount, validateHostsWithoutBMC via
// pkg/types/common ValidateUniqueAndRequiredFields, validateBootMode,
// validateRootDeviceHints, validateHostsName).
func (c *checker) platform(bm *BareMetal, ic *InstallConfig) {
	const hosts = "platform.baremetal.hosts"
	switch bm.ProvisioningNetwork {
	case ocp.ProvisioningManaged, ocp.ProvisioningUnmanaged, ocp.ProvisioningDisabled:
	default:
		c.unsupported("platform.baremetal.provisioningNetwork", bm.ProvisioningNetwork,
			ocp.ProvisioningDisabled, ocp.ProvisioningManaged, ocp.ProvisioningUnmanaged)
	}
	if bm.Hosts == nil {
		c.invalid(hosts, nil, "bare metal hosts are missing")
	}
	c.hostsCount(bm.Hosts, ic)
	names, macs := map[string]bool{}, map[string]bool{}
	for i, h := range bm.Hosts {
		f := fmt.Sprintf("%s[%d]", hosts, i)
		unique(c, f+".name", "Name", h.Name, names)
		unique(c, f+".bootMACAddress", "BootMACAddress", h.BootMACAddress, macs)
	}
	for i, h := range bm.Hosts {
		f := fmt.Sprintf("%s[%d]", hosts, i)
		switch h.BootMode {
		case "", BootModeUEFI, BootModeLegacy:
		case BootModeUEFISecureBoot:
			if d, err := parseBMC(h.BMC.Address); err == nil && !d.secureBoot {
				c.invalid(f+".bootMode", h.BootMode, fmt.Sprintf("driver %s does not support UEFI secure boot", d.driver))
			}
		default:
			c.unsupported(f+".bootMode", h.BootMode, BootModeUEFI, BootModeUEFISecureBoot, BootModeLegacy)
		}
	}
	for i, h := range bm.Hosts {
		if h.RootDeviceHints == nil || h.RootDeviceHints.DeviceName == "" {
			continue
		}
		f, dev := fmt.Sprintf("%s[%d].rootDeviceHints.deviceName", hosts, i), h.RootDeviceHints.DeviceName
		sub := strings.TrimPrefix(dev, "/dev/")
		if sub == dev {
			c.invalid(f, dev, "Device Name of root device hint must be a /dev/ path")
		}
		if strings.Contains(strings.TrimPrefix(sub, "disk/by-path/"), "/") {
			c.invalid(f, dev, "Device Name of root device hint must be path in /dev/ or /dev/disk/by-path/")
		}
	}
	for i, h := range bm.Hosts {
		if msgs := dns1123Subdomain(h.Name); len(msgs) > 0 {
			c.invalid(fmt.Sprintf("%s[%d].name", hosts, i), h.Name, strings.Join(msgs, "\n"))
		}
	}
}

// unique reports a missing or repeated value of a host field tagged
// `validate:"required,uniqueField"` in the installer's types.
func unique(c *checker, field, goName, value string, seen map[string]bool) {
	switch {
	case value == "":
		c.required(field, "missing "+goName)
	case seen[value]:
		c.add(ErrorDuplicate, field, value, "")
	}
	seen[value] = true
}

// hostsCount: enough hosts of each role for the replicas; hosts without a
// role fill the control plane first (validateHostsCount). The lab adds that
// every master host is a control plane replica: the installer would leave
// the extra ones unused.
func (c *checker) hostsCount(hosts []Host, ic *InstallConfig) {
	wantMasters, wantWorkers := ic.ControlPlane.Replicas, 0
	for _, p := range ic.Compute {
		wantWorkers += p.Replicas
	}
	masters, workers, roleMasters := 0, 0, 0
	for _, h := range hosts {
		switch {
		case h.Role == ocp.RoleMaster:
			masters++
			roleMasters++
		case h.Role == ocp.RoleWorker:
			workers++
		case masters < wantMasters:
			masters++
		case workers < wantWorkers:
			workers++
		}
	}
	const f = "platform.baremetal.hosts"
	switch {
	case masters < wantMasters:
		c.required(f, fmt.Sprintf("not enough hosts found (%d) to support all the configured ControlPlane replicas (%d)", masters, wantMasters))
	case workers < wantWorkers:
		c.required(f, fmt.Sprintf("not enough hosts found (%d) to support all the configured Compute replicas (%d)", workers, wantWorkers))
	}
	if wantMasters > 0 && roleMasters > wantMasters { // lab
		c.invalid("controlPlane.replicas", wantMasters, fmt.Sprintf("must equal the number of hosts with role master (%d)", roleMasters))
	}
	arbiters := 0
	for _, h := range hosts {
		if h.Role == ocp.RoleArbiter {
			arbiters++
		}
	}
	if ic.Arbiter != nil && arbiters < ic.Arbiter.Replicas {
		c.required(f, fmt.Sprintf("not enough hosts found (%d) to support all the configured Arbiter replicas (%d)", arbiters, ic.Arbiter.Replicas))
	}
}

// provisioning: pkg/types/baremetal/validation/platform.go
// (ValidateProvisioningNetworking, validateProvisioningNetworkDisabledSupported,
// validateHostsBMCOnly) and the BMC drivers of
// metal3-io/baremetal-operator pkg/hardwareutils/bmc.
func (c *checker) provisioning(bm *BareMetal, machine []netip.Prefix) {
	const hosts = "platform.baremetal.hosts"
	addrs := map[string]bool{}
	for i, h := range bm.Hosts {
		f := fmt.Sprintf("%s[%d].bmc", hosts, i)
		// A missing address is reported once, by unique.
		if d, err := parseBMC(h.BMC.Address); err != nil && h.BMC.Address != "" {
			// The installer reports this only with a Disabled provisioning
			// network; the lab everywhere (Ironic would refuse it later).
			c.invalid(f, h.BMC.Address, err.Error())
		} else if err == nil && d.needsProvisioning && bm.ProvisioningNetwork == ocp.ProvisioningDisabled {
			c.invalid(f, h.BMC.Address, fmt.Sprintf("driver %s requires provisioning network", d.driver))
		}
		unique(c, f+".address", "Address", h.BMC.Address, addrs)
		if h.BMC.Username == "" {
			c.required(f+".username", "missing Username")
		}
		if h.BMC.Password == "" {
			c.required(f+".password", "missing Password")
		}
	}
	if bm.ProvisioningNetwork != ocp.ProvisioningManaged && bm.ProvisioningNetwork != ocp.ProvisioningUnmanaged {
		return
	}
	// The installer defaults these two; the lab writes them out and
	// requires them, so the file says which bridge and subnet it means.
	if bm.ProvisioningBridge == "" { // lab
		c.required("platform.baremetal.provisioningBridge", "a provisioning bridge is required when provisioningNetwork is "+bm.ProvisioningNetwork)
	}
	const f = "platform.baremetal.provisioningNetworkCIDR"
	if bm.ProvisioningNetworkCIDR == "" { // lab
		c.required(f, "a provisioning network CIDR is required when provisioningNetwork is "+bm.ProvisioningNetwork)
		return
	}
	p, err := netip.ParsePrefix(bm.ProvisioningNetworkCIDR)
	if err != nil {
		c.invalid(f, bm.ProvisioningNetworkCIDR, "invalid CIDR address: "+bm.ProvisioningNetworkCIDR)
		return
	}
	if p.Addr().Is6() && p.Bits() < 64 {
		c.invalid(f, p.String(), "provisioningNetworkCIDR mask must be greater than or equal to 64 for IPv6 networks")
	}
	for _, m := range machine {
		if m.Addr().Is4() == p.Addr().Is4() && p.Overlaps(m) {
			c.invalid(f, p.String(), fmt.Sprintf("cannot overlap with machine network: %s overlaps with %s", p.Masked(), m))
		}
	}
	if p != p.Masked() {
		c.invalid(f, p.String(), fmt.Sprintf("provisioningNetworkCIDR has host bits set, expected %s", p.Masked()))
	}
}

// provisioningIPs: pkg/types/baremetal/validation/platform.go
// (ValidatePlatform's IP checks, ValidateProvisioning, validateDHCPRange):
// with a provisioning network the provisioning services' addresses are in
// it, the bootstrap's outside the machine networks, and neither inside the
// provisioning DHCP range, whose two ends are in the provisioning network;
// with Disabled they are in a machine network. The lab adds, with
// Disabled, that neither is in a machine network's DHCP range nor a VIP:
// DHCP would lease it to a node, or keepalived would move it.
func (c *checker) provisioningIPs(bm *BareMetal, machine []netip.Prefix, dhcp []netaddr.Range) {
	const base = "platform.baremetal."
	var cidrs []string
	for _, p := range machine {
		cidrs = append(cidrs, p.String())
	}
	inMachine := func(a netip.Addr) bool {
		return slices.ContainsFunc(machine, func(p netip.Prefix) bool { return p.Contains(a) })
	}
	ips := []struct {
		field, value string
		ip           netip.Addr
		ok           bool
	}{{field: "bootstrapProvisioningIP", value: bm.BootstrapProvisioningIP}, {field: "clusterProvisioningIP", value: bm.ClusterProvisioningIP}}
	for i := range ips {
		if ips[i].value == "" {
			continue
		}
		a, err := netip.ParseAddr(ips[i].value)
		if err != nil {
			c.invalid(base+ips[i].field, ips[i].value, fmt.Sprintf("%q is not a valid IP", ips[i].value))
			continue
		}
		ips[i].ip, ips[i].ok = a, true
	}
	if bm.ProvisioningNetwork == ocp.ProvisioningDisabled {
		for _, f := range ips {
			switch {
			case !f.ok:
			case !inMachine(f.ip):
				c.invalid(base+f.field, f.value, "provisioning network is disabled, IP expected to be in one of the machine networks: "+strings.Join(cidrs, ","))
			case slices.ContainsFunc(dhcp, func(r netaddr.Range) bool { return r.Contains(f.ip) }): // lab
				c.invalid(base+f.field, f.value, "IP is inside the machine network's DHCP range, where a node could lease it")
			case slices.Contains(bm.APIVIPs, f.value) || slices.Contains(bm.IngressVIPs, f.value): // lab
				c.invalid(base+f.field, f.value, "IP is one of the VIPs")
			}
		}
		return
	}
	if bm.ProvisioningNetwork != ocp.ProvisioningManaged && bm.ProvisioningNetwork != ocp.ProvisioningUnmanaged {
		return
	}
	p, err := netip.ParsePrefix(bm.ProvisioningNetworkCIDR)
	if err != nil {
		return // reported by provisioning
	}
	for _, f := range ips {
		if !f.ok {
			continue
		}
		if !p.Contains(f.ip) {
			c.invalid(base+f.field, f.value, fmt.Sprintf("%q is not in the provisioning network", f.value))
		}
		if f.field == "bootstrapProvisioningIP" && inMachine(f.ip) {
			c.invalid(base+f.field, f.value, "the IP must not be in one of the machine networks")
		}
	}
	if bm.ProvisioningDHCPRange == "" {
		return
	}
	const rf = base + "provisioningDHCPRange"
	ends := strings.Split(bm.ProvisioningDHCPRange, ",")
	if len(ends) != 2 {
		c.invalid(rf, bm.ProvisioningDHCPRange, "provisioning DHCP range should be in format: start_ip,end_ip")
		return
	}
	var r netaddr.Range
	for i, e := range ends {
		a, err := netip.ParseAddr(e)
		if err != nil {
			c.invalid(rf, bm.ProvisioningDHCPRange, fmt.Sprintf("%s: %q is not a valid IP", e, e))
			return
		}
		if !p.Contains(a) {
			c.invalid(rf, bm.ProvisioningDHCPRange, fmt.Sprintf("%q is not in the provisioning network", e))
			return
		}
		if i == 0 {
			r.Start = a
		} else {
			r.End = a
		}
	}
	for _, f := range ips {
		if f.ok && r.Contains(f.ip) {
			c.invalid(base+f.field, f.value, fmt.Sprintf("%q overlaps with the allocated DHCP range", f.value))
		}
	}
}

// pools: pkg/types/validation/installconfig.go (validateControlPlane,
// validateCompute).
func (c *checker) pools(ic *InstallConfig) {
	if ic.ControlPlane.Name != ocp.RoleMaster {
		c.unsupported("controlPlane.name", ic.ControlPlane.Name, ocp.RoleMaster)
	}
	if ic.ControlPlane.Replicas <= 0 {
		c.invalid("controlPlane.replicas", ic.ControlPlane.Replicas, "number of control plane replicas must be positive")
	}
	c.twoNode(ic)
	c.architecture("controlPlane.architecture", ic.ControlPlane.Architecture)
	if ic.Arbiter != nil {
		c.architecture("arbiter.architecture", ic.Arbiter.Architecture)
	}
	control := cmp.Or(ic.ControlPlane.Architecture, ArchAMD64)
	// Multi-arch is enabled by default on AWS, GCP and bare metal, the
	// only platforms that take it (validateCompute); of this lab's, bare
	// metal.
	multiArch := ic.Platform.BareMetal != nil
	seen := map[string]bool{}
	for i, p := range ic.Compute {
		f := fmt.Sprintf("compute[%d].name", i)
		if p.Name != ocp.RoleWorker {
			c.unsupported(f, p.Name, ocp.RoleWorker, "edge")
		}
		if seen[p.Name] {
			c.add(ErrorDuplicate, f, p.Name, "")
		}
		seen[p.Name] = true
		af := fmt.Sprintf("compute[%d].architecture", i)
		c.architecture(af, p.Architecture)
		arch := cmp.Or(p.Architecture, ArchAMD64)
		if arch == control {
			continue
		}
		if !multiArch {
			c.invalid(af, p.Architecture, "heteregeneous multi-arch is not supported; compute pool architecture must match control plane")
			continue
		}
		// On bare metal, only an amd64 control plane with arm64 compute.
		if control != ArchAMD64 {
			c.invalid(af, control, "on multi-arch baremetal, the control plane must be amd64")
		}
		if arch != ArchARM64 {
			c.invalid(af, p.Architecture, "on baremetal with amd64 control plane, compute must be amd64 or arm64")
		}
	}
}

// installerArchitectures are the architectures install-config takes
// (pkg/types/machinepools.go, Architecture's enum).
var installerArchitectures = []string{ArchAMD64, ArchARM64, "ppc64le", "s390x"}

// architecture: a pool's architecture is one the installer knows
// (ValidateMachinePool; empty is its default, amd64).
func (c *checker) architecture(field, arch string) {
	if arch != "" && !slices.Contains(installerArchitectures, arch) {
		c.unsupported(field, arch, installerArchitectures...)
	}
}

// ValidateRelease returns what the installer refuses in ic's pools given
// the architecture of its release payload (`openshift-install version`'s
// "release architecture"): a single-architecture payload installs its own
// architecture only, a multi one any (pkg/types/validation/installconfig.go,
// validateReleaseArchitecture). An unknown one is not checked, as the
// installer only warns.
func ValidateRelease(ic *InstallConfig, releaseArch string) ErrorList {
	c := &checker{}
	switch releaseArch {
	case ArchMulti, "", "unknown":
		return nil
	}
	if arch := cmp.Or(ic.ControlPlane.Architecture, ArchAMD64); arch != releaseArch {
		c.invalid("controlPlane.architecture", arch, fmt.Sprintf("cannot create %s controlPlane node from a single architecture %s release payload", arch, releaseArch))
	}
	for i, p := range ic.Compute {
		if p.Architecture != "" && p.Architecture != releaseArch {
			c.invalid(fmt.Sprintf("compute[%d].architecture", i), p.Architecture, fmt.Sprintf("cannot create %s compute node from a single architecture %s release payload", p.Architecture, releaseArch))
		}
	}
	return c.errs
}

// pullSecret: pkg/validate ImagePullSecret. The installer prints the
// secret as the bad value; the lab does not.
func (c *checker) pullSecret(secret string) {
	var s struct {
		Auths map[string]map[string]any `json:"auths"`
	}
	if err := json.Unmarshal([]byte(secret), &s); err != nil {
		c.invalid("pullSecret", redacted, err.Error())
		return
	}
	if len(s.Auths) == 0 {
		c.invalid("pullSecret", redacted, "auths required")
		return
	}
	var msgs []string
	for _, reg := range slices.Sorted(maps.Keys(s.Auths)) {
		a := s.Auths[reg]
		_, auth := a["auth"]
		_, store := a["credsStore"]
		if !auth && !store {
			msgs = append(msgs, fmt.Sprintf("%q requires either auth or credsStore", reg))
		}
	}
	if len(msgs) > 0 {
		c.invalid("pullSecret", redacted, aggregate(msgs))
	}
}

// aggregate joins messages as k8s.io/apimachinery's errors.NewAggregate.
func aggregate(msgs []string) string {
	if len(msgs) == 1 {
		return msgs[0]
	}
	return "[" + strings.Join(msgs, ", ") + "]"
}

// DNS names, as k8s.io/apimachinery/pkg/util/validation and pkg/validate
// check them.
var dns1123Subdomain1 = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

func dns1123Subdomain(v string) []string {
	var msgs []string
	if len(v) > 253 {
		msgs = append(msgs, "must be no more than 253 characters")
	}
	if !dns1123Subdomain1.MatchString(v) {
		msgs = append(msgs, `a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`)
	}
	return msgs
}

func subdomain(v string) error {
	if msgs := dns1123Subdomain(v); len(msgs) > 0 {
		return errors.New(aggregate(msgs))
	}
	return nil
}

// domainName accepts a trailing dot (validate.DomainName(v, true)).
func domainName(v string) error { return subdomain(strings.TrimSuffix(v, ".")) }

// onPremClusterName: validate.OnPremClusterName (vSphere, bare metal,
// OpenStack, Nutanix): no dots, then validate.ClusterName (at most 63-9
// characters, as *.apps.NAME must stay a DNS label, and a DNS subdomain).
func onPremClusterName(v string) error {
	if strings.Contains(v, ".") {
		return errors.New("cluster name must not contain '.'")
	}
	if len(v) > 54 {
		return errors.New("must be no more than 54 characters")
	}
	return subdomain(v)
}

// bmcDriver is what a bmc.address scheme means to the baremetal-operator.
type bmcDriver struct {
	driver            string
	needsProvisioning bool // RequiresProvisioningNetwork: boots over PXE
	secureBoot        bool
}

// bmcSchemes lists metal3-io/baremetal-operator's BMC types
// (pkg/hardwareutils/bmc, one RegisterFactory each) with the scheme
// extensions each accepts.
var bmcSchemes = func() map[string]bmcDriver {
	m := map[string]bmcDriver{}
	reg := func(d bmcDriver, exts []string, names ...string) {
		for _, n := range names {
			m[n] = d
			for _, e := range exts {
				m[n+"+"+e] = d
			}
		}
	}
	web, tls := []string{"http", "https"}, []string{"https"}
	reg(bmcDriver{"ipmi", true, false}, nil, "ipmi", "libvirt")
	reg(bmcDriver{"redfish", true, true}, web, "redfish", "ilo5-redfish")
	reg(bmcDriver{"idrac", true, true}, web, "idrac-redfish")
	reg(bmcDriver{"redfish", false, true}, web, "redfish-virtualmedia", "ilo5-virtualmedia", "redfish-uefihttp")
	reg(bmcDriver{"idrac", false, true}, web, "idrac-virtualmedia")
	reg(bmcDriver{"ilo", true, true}, tls, "ilo4")
	reg(bmcDriver{"ilo", false, true}, tls, "ilo4-virtualmedia")
	reg(bmcDriver{"ilo5", true, true}, tls, "ilo5")
	reg(bmcDriver{"irmc", true, true}, nil, "irmc")
	reg(bmcDriver{"ibmc", true, false}, web, "ibmc")
	return m
}()

var bmcHostname = regexp.MustCompile(`^(([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9\-]{0,61}[a-zA-Z0-9])\.)*([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9\-]{0,61}[A-Za-z0-9])$`)

// parseBMC reads a bmc.address as bmc.NewAccessDetails does: an address
// without a scheme is IPMI.
func parseBMC(address string) (bmcDriver, error) {
	if address == "" {
		return bmcDriver{}, errors.New("missing BMC address")
	}
	if !strings.Contains(address, "://") {
		address = "ipmi://" + address
	}
	u, err := url.Parse(address)
	if err != nil {
		return bmcDriver{}, fmt.Errorf("failed to parse BMC address information: %w", err)
	}
	if h := u.Hostname(); h != "" && net.ParseIP(h) == nil && !bmcHostname.MatchString(h) {
		return bmcDriver{}, fmt.Errorf("failed to parse BMC address information: BMC address hostname/IP : [%s] is invalid", h)
	}
	d, ok := bmcSchemes[u.Scheme]
	if !ok {
		//lint:ignore ST1005 the BareMetalOperator's wording, which users search for
		return bmcDriver{}, fmt.Errorf("Unknown BMC type '%s' for address %s", u.Scheme, address)
	}
	return d, nil
}

// twoNode: a two-node control plane (pkg/types/validation: the arbiter and
// fencing rules of OpenShift 4.19 and later) has an arbiter or a fencing
// credential per control-plane node, never both; each credential names its
// node and a Redfish BMC with a user and password.
func (c *checker) twoNode(ic *InstallConfig) {
	cp := ic.ControlPlane
	const f = "controlPlane.fencing.credentials"
	switch {
	case cp.Replicas == 2 && cp.Fencing == nil && ic.Arbiter == nil:
		c.invalid("controlPlane.replicas", cp.Replicas, "2 control plane replicas require fencing credentials (controlPlane.fencing) or an arbiter (arbiter)")
	case cp.Fencing != nil && ic.Arbiter != nil:
		c.invalid("controlPlane.fencing", "", "fencing and an arbiter cannot both be set")
	case cp.Fencing != nil && cp.Replicas != 2:
		c.invalid("controlPlane.fencing", "", "fencing is only supported with 2 control plane replicas")
	case ic.Arbiter != nil && cp.Replicas != 2:
		c.invalid("arbiter.replicas", ic.Arbiter.Replicas, "an arbiter is only supported with 2 control plane replicas")
	}
	if cp.Fencing == nil {
		return
	}
	if len(cp.Fencing.Credentials) != cp.Replicas {
		c.invalid(f, len(cp.Fencing.Credentials), fmt.Sprintf("must have one credential per control plane replica (%d)", cp.Replicas))
	}
	names := map[string]bool{}
	for i, cr := range cp.Fencing.Credentials {
		cf := fmt.Sprintf("%s[%d]", f, i)
		unique(c, cf+".hostname", "HostName", cr.HostName, names)
		if !strings.Contains(cr.Address, "redfish") {
			c.invalid(cf+".address", cr.Address, "must be a Redfish address (redfish+https://…)")
		}
		if cr.Username == "" {
			c.required(cf+".username", "missing Username")
		}
		if cr.Password == "" {
			c.required(cf+".password", "missing Password")
		}
		switch cr.CertificateVerification {
		case "", CertificateVerificationEnabled, CertificateVerificationDisabled:
		default:
			c.unsupported(cf+".certificateVerification", cr.CertificateVerification, CertificateVerificationEnabled, CertificateVerificationDisabled)
		}
	}
}
