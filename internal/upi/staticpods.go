package upi

// The static pods that give a hybrid cluster its own VIPs (keepalived), DNS
// (coredns) and ingress load balancer (haproxy), with their daemons'
// configuration files. kcli's facts, typed: the pods are pods, the
// configurations pure functions of the cluster, every one run by the real
// daemon in the tests.

import (
	"crypto/sha256"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/bmlab/bmlab/internal/netaddr"
	"github.com/bmlab/bmlab/internal/ocp"
	"github.com/bmlab/bmlab/internal/yamljson"
)

// Where the static pods and their configurations go on a node.
const (
	ManifestsDir  = "/etc/kubernetes/manifests"
	ResourcesDir  = "/etc/kubernetes/static-pod-resources/bmlab"
	SysctlFile    = "/etc/sysctl.d/90-bmlab-nonlocal-bind.conf"
	PodNamespace  = "kube-system"
	ReadyzURL     = "https://localhost:6443/readyz"
	interfaceMark = "@INTERFACE@"
)

// IngressHealthPort is haproxy's own health endpoint on the masters, on
// localhost, when there are workers: ready while at least one worker's
// router is.
const IngressHealthPort = 1937

// IngressHealthURL is what a master's keepalived checks before it holds
// the ingress VIP: the router on the master itself (no workers: the
// routers run on the masters), else the master's haproxy, which is ready
// while it has a ready worker's router to send to. It is on the loopback
// address of the cluster's first family: [::1] for an IPv6-only cluster,
// whose routers listen on IPv6 (the kubelet probes them at the node's
// IPv6 address).
func IngressHealthURL(c Cluster) string {
	port := RouterHealthPort
	if len(nodesWith(c, ocp.RoleWorker)) > 0 {
		port = IngressHealthPort
	}
	return "http://" + netip.AddrPortFrom(loopback(c), uint16(port)).String() + "/healthz/ready"
}

// loopback is the loopback address of the cluster's first family.
func loopback(c Cluster) netip.Addr {
	if c.APIVIP.Is6() {
		return netip.IPv6Loopback()
	}
	return netip.AddrFrom4([4]byte{127, 0, 0, 1})
}

// Keepalived priorities: the bootstrap holds the API VIP while it lives.
const (
	BootstrapPriority = 150
	MasterPriority    = 100
)

// StaticPodFiles returns the static pods of node n and their
// configurations:
//   - every node: coredns (api, api-int, *.apps, node names, upstream);
//   - bootstrap and masters: keepalived (the API VIP; masters also hold the
//     ingress VIP), and ip_nonlocal_bind;
//   - masters, when the cluster has workers: haproxy, 80 and 443 on the
//     ingress VIP to the workers' routers.
func StaticPodFiles(c Cluster, n Node) ([]File, error) {
	if err := checkCluster(c); err != nil {
		return nil, err
	}
	corefile := Corefile(c)
	files := []File{{Path: ResourcesDir + "/coredns/Corefile", Mode: 0o644, Contents: []byte(corefile)}}
	pod, err := podYAML(corednsPod(c))
	if err != nil {
		return nil, err
	}
	files = append(files, File{Path: ManifestsDir + "/coredns.yaml", Mode: 0o644, Contents: pod})
	if n.Role == ocp.RoleBootstrap || n.Role == ocp.RoleMaster {
		conf, err := KeepalivedConf(c, n)
		if err != nil {
			return nil, err
		}
		pod, err := podYAML(keepalivedPod(c))
		if err != nil {
			return nil, err
		}
		files = append(files,
			File{Path: ResourcesDir + "/keepalived/keepalived.conf.tmpl", Mode: 0o644, Contents: []byte(conf)},
			File{Path: ResourcesDir + "/keepalived/render.sh", Mode: 0o755, Contents: []byte(RenderScript(n.IP))},
			File{Path: ManifestsDir + "/keepalived.yaml", Mode: 0o644, Contents: pod},
			File{Path: SysctlFile, Mode: 0o644, Contents: []byte("# bmlab: keepalived and haproxy bind the VIPs before they hold them\nnet.ipv4.ip_nonlocal_bind = 1\n")},
		)
	}
	if n.Role == ocp.RoleMaster && len(nodesWith(c, ocp.RoleWorker)) > 0 {
		pod, err := podYAML(haproxyPod(c))
		if err != nil {
			return nil, err
		}
		files = append(files,
			File{Path: ResourcesDir + "/haproxy/haproxy.cfg", Mode: 0o644, Contents: []byte(HAProxyConf(c))},
			File{Path: ManifestsDir + "/haproxy.yaml", Mode: 0o644, Contents: pod})
	}
	return files, nil
}

func checkCluster(c Cluster) error {
	switch {
	case c.Name == "" || c.BaseDomain == "":
		return fmt.Errorf("static pods: the cluster needs a name and a base domain")
	case !c.APIVIP.IsValid():
		return fmt.Errorf("static pods: the cluster has no API VIP")
	case c.APIRouterID < 1 || c.APIRouterID > 255 || (c.IngressVIP.IsValid() && (c.IngressRouterID < 1 || c.IngressRouterID > 255 || c.IngressRouterID == c.APIRouterID)):
		return fmt.Errorf("static pods: router IDs %d and %d: want two distinct IDs in 1-255", c.APIRouterID, c.IngressRouterID)
	case len(c.Upstream) == 0:
		return fmt.Errorf("static pods: coredns needs an upstream DNS server")
	}
	for _, n := range c.Nodes {
		if !n.IP.IsValid() {
			return fmt.Errorf("static pods: node %s has no IP", n.Name)
		}
	}
	return checkFamilies(c)
}

// checkFamilies: every address of a family is of that family. The first
// family is APIVIP's (IPv4, or IPv6 for an IPv6-only cluster); a
// dual-stack cluster's Secondary is IPv6 after IPv4, with an API VIP, an
// ingress VIP exactly when the first family has one, and every node's
// SecondaryIP.
func checkFamilies(c Cluster) error {
	name := func(a netip.Addr) string {
		if a.Is4() {
			return "IPv4"
		}
		return "IPv6"
	}
	first := name(c.APIVIP)
	same := func(field string, a netip.Addr, want string) error {
		switch {
		case !a.IsValid():
			return nil
		case a.Is4In6():
			return fmt.Errorf("static pods: %s %s is an IPv4-mapped IPv6 address: give it as IPv4 or IPv6", field, a)
		case name(a) != want && want == first:
			return fmt.Errorf("static pods: %s %s is %s but APIVIP %s is %s: a family's addresses are all of it (a dual-stack cluster's IPv6 goes in Secondary)", field, a, name(a), c.APIVIP, first)
		case name(a) != want:
			return fmt.Errorf("static pods: %s %s is %s: a dual-stack cluster's Secondary is its IPv6 family, after IPv4", field, a, name(a))
		}
		return nil
	}
	dual := isDual(c)
	if err := same("APIVIP", c.APIVIP, first); err != nil {
		return err
	}
	if err := same("MachineNetwork", c.MachineNetwork.Addr(), first); err != nil {
		return err
	}
	if err := same("IngressVIP", c.IngressVIP, first); err != nil {
		return err
	}
	if dual {
		s := c.Secondary
		switch {
		case first != "IPv4":
			return fmt.Errorf("static pods: APIVIP %s is IPv6 and Secondary is set: a dual-stack cluster has IPv4 first and IPv6 in Secondary", c.APIVIP)
		case !s.APIVIP.IsValid():
			return fmt.Errorf("static pods: Secondary.APIVIP is missing: a dual-stack cluster has an API VIP in each family")
		case s.IngressVIP.IsValid() != c.IngressVIP.IsValid():
			return fmt.Errorf("static pods: IngressVIP %v and Secondary.IngressVIP %v: give an ingress VIP in both families or in neither", c.IngressVIP, s.IngressVIP)
		}
		for _, f := range []struct {
			field string
			a     netip.Addr
		}{{"Secondary.MachineNetwork", s.MachineNetwork.Addr()}, {"Secondary.APIVIP", s.APIVIP}, {"Secondary.IngressVIP", s.IngressVIP}} {
			if err := same(f.field, f.a, "IPv6"); err != nil {
				return err
			}
		}
	}
	for _, n := range c.Nodes {
		if err := same("node "+n.Name+"'s IP", n.IP, first); err != nil {
			return err
		}
		switch {
		case dual && !n.SecondaryIP.IsValid():
			return fmt.Errorf("static pods: node %s has no SecondaryIP: every node of a dual-stack cluster has an address in each family", n.Name)
		case !dual && n.SecondaryIP.IsValid():
			return fmt.Errorf("static pods: node %s has SecondaryIP %s but the cluster has no Secondary family: set Secondary or drop it", n.Name, n.SecondaryIP)
		}
		if err := same("node "+n.Name+"'s SecondaryIP", n.SecondaryIP, "IPv6"); err != nil {
			return err
		}
	}
	return nil
}

// isDual reports whether c is dual-stack (has a Secondary family).
func isDual(c Cluster) bool { return !c.Secondary.IsZero() }

// hasIPv6 reports whether c has IPv6 addresses (IPv6-only or dual-stack).
func hasIPv6(c Cluster) bool { return c.APIVIP.Is6() || isDual(c) }

// stack is one of the cluster's address families as the static pods use
// it: its VIPs and each node's address in it.
type stack struct {
	netaddr.Family
	secondary bool
}

func (s stack) ip(n Node) netip.Addr {
	if s.secondary {
		return n.SecondaryIP
	}
	return n.IP
}

// ingressVIP is the family's ingress VIP, else its API VIP.
func (s stack) ingressVIP() netip.Addr {
	if s.IngressVIP.IsValid() {
		return s.IngressVIP
	}
	return s.APIVIP
}

// stacks are the cluster's families, the first first: one for a
// single-stack cluster, IPv4 and IPv6 for a dual-stack one.
func stacks(c Cluster) []stack {
	out := []stack{{Family: c.Family}}
	if isDual(c) {
		out = append(out, stack{Family: c.Secondary, secondary: true})
	}
	return out
}

func nodesWith(c Cluster, roles ...string) []Node {
	var out []Node
	for _, n := range c.Nodes {
		if slices.Contains(roles, n.Role) {
			out = append(out, n)
		}
	}
	return out
}

func domain(c Cluster) string { return c.Name + "." + c.BaseDomain }

// ingressVIP is the ingress VIP of the first family, else its API VIP.
func ingressVIP(c Cluster) netip.Addr { return stacks(c)[0].ingressVIP() }

// KeepalivedConf is node n's keepalived.conf, with @INTERFACE@ where the
// interface that carries n's IP goes (RenderScript fills it in on the
// node, whose NIC name is not known in advance).
//
// VRRP runs unicast between the bootstrap and the masters: an overloaded
// host drops multicast and lets a master take the API VIP too early. The
// API instance tracks the API's readyz, so a node whose API is not ready
// never holds the VIP (a failing tracked script puts the instance in
// FAULT); the bootstrap has the higher priority while it lives. The ingress
// instance runs on the masters only (routers or haproxy are there) and
// tracks IngressHealthURL the same way.
//
// A dual-stack cluster has each instance twice, one per family (as
// OpenShift's on-prem keepalived has): the IPv6 one (_v6) with the IPv6
// VIP, unicast between the nodes' IPv6 addresses, the same
// virtual_router_id (VRRP's IPv4 and IPv6 virtual routers are apart, and
// keepalived takes one ID in both families on one interface) and the same
// checks. The families elect apart, so each VIP is on a node whose check
// passes, not necessarily the same node. An IPv6-only cluster has its
// instances in IPv6. IPv6 instances run VRRPv3, which has no
// authentication (keepalived ignores it, and its config check fails):
// check_unicast_src takes adverts only from the peers instead. IPv6 VIPs
// are /128, IPv4 ones /32.
func KeepalivedConf(c Cluster, n Node) (string, error) {
	if n.Role != ocp.RoleBootstrap && n.Role != ocp.RoleMaster {
		return "", fmt.Errorf("keepalived runs on the bootstrap and the masters, not on %s (%s)", n.Name, n.Role)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# bmlab: keepalived for %s of cluster %s\n", n.Name, domain(c))
	fmt.Fprintf(&b, "global_defs {\n    router_id %s\n    enable_script_security\n    script_user root\n    vrrp_garp_master_refresh 10\n}\n\n", n.Name)
	// init_fail: a node is no candidate before its first check passes.
	fmt.Fprintf(&b, "vrrp_script chk_api {\n    script \"/usr/bin/curl -o /dev/null -kfs --max-time 1 %s\"\n    interval 1\n    fall 2\n    rise 2\n    init_fail\n}\n", ReadyzURL)
	prio := MasterPriority
	if n.Role == ocp.RoleBootstrap {
		prio = BootstrapPriority
	}
	ingress := c.IngressVIP.IsValid() && n.Role == ocp.RoleMaster
	if ingress {
		// The ingress VIP is tracked as the API VIP is: a master whose
		// router (or, with workers, whose haproxy) is not ready lets go.
		fmt.Fprintf(&b, "\nvrrp_script chk_ingress {\n    script \"/usr/bin/curl -o /dev/null -fs --max-time 1 %s\"\n    interval 1\n    fall 2\n    rise 2\n    init_fail\n}\n", IngressHealthURL(c))
	}
	for _, s := range stacks(c) {
		suffix := ""
		if s.secondary {
			suffix = "_v6"
		}
		instance(&b, c, n, s, "api"+suffix, s.APIVIP, c.APIRouterID, prio, nodesWith(c, ocp.RoleBootstrap, ocp.RoleMaster), "chk_api")
		if ingress {
			instance(&b, c, n, s, "ingress"+suffix, s.IngressVIP, c.IngressRouterID, MasterPriority, nodesWith(c, ocp.RoleMaster), "chk_ingress")
		}
	}
	return b.String(), nil
}

func instance(b *strings.Builder, c Cluster, n Node, s stack, what string, vip netip.Addr, id, prio int, members []Node, script string) {
	fmt.Fprintf(b, "\nvrrp_instance %s_%s {\n    state BACKUP\n    interface %s\n    virtual_router_id %d\n    priority %d\n    advert_int 1\n", strings.ReplaceAll(c.Name, "-", "_"), what, interfaceMark, id, prio)
	fmt.Fprintf(b, "    unicast_src_ip %s\n", s.ip(n))
	if vip.Is6() {
		b.WriteString("    check_unicast_src\n")
	}
	b.WriteString("    unicast_peer {\n")
	for _, m := range members {
		if m.Name != n.Name {
			fmt.Fprintf(b, "        %s\n", s.ip(m))
		}
	}
	b.WriteString("    }\n")
	if vip.Is4() {
		fmt.Fprintf(b, "    authentication {\n        auth_type PASS\n        auth_pass %s\n    }\n", authPass(c, what))
	}
	fmt.Fprintf(b, "    virtual_ipaddress {\n        %s dev %s\n    }\n", netip.PrefixFrom(vip, vip.BitLen()), interfaceMark)
	if script != "" {
		fmt.Fprintf(b, "    track_script {\n        %s\n    }\n", script)
	}
	b.WriteString("}\n")
}

// authPass is VRRP's (8-character) password of one of the cluster's
// instances: not a secret against anyone on the network, but it keeps
// clusters that share a segment from taking each other's adverts.
func authPass(c Cluster, what string) string {
	h := sha256.Sum256([]byte(domain(c) + "/" + what))
	return fmt.Sprintf("%x", h[:4])
}

// RenderScript writes keepalived.conf from its template, with the
// interface that carries ip, IPv4 or IPv6 (found with `ip -o addr`, which
// writes IPv6 addresses as netip does, RFC 5952). Arguments: template,
// output.
func RenderScript(ip netip.Addr) string {
	return `#!/bin/sh
# bmlab: fill in the interface that carries this node's IP (` + ip.String() + `).
set -eu
in=${1:-/config/keepalived.conf.tmpl}
out=${2:-/etc/keepalived/keepalived.conf}
iface=$(ip -o addr show | awk -v ip="` + ip.String() + `" '{split($4, a, "/"); if (a[1] == ip) {print $2; exit}}')
if [ -z "$iface" ]; then
    echo "no interface has ` + ip.String() + `" >&2
    exit 1
fi
sed "s/` + interfaceMark + `/$iface/g" "$in" >"$out.tmp"
mv "$out.tmp" "$out"
`
}

// Corefile is coredns's configuration on every node: api and api-int to
// the API VIP, *.apps to the ingress VIP (else the API VIP), every node's
// name (short and in the cluster's domain) to its IP, everything else to
// the upstream servers. Each family answers its record type (A, AAAA;
// both for a dual-stack cluster); a type the cluster has no address of
// gets an empty NOERROR answer, not a question to the upstream.
func Corefile(c Cluster) string {
	d := domain(c)
	var b strings.Builder
	fmt.Fprintf(&b, "# bmlab: coredns of cluster %s\n.:53 {\n    errors\n    hosts {\n", d)
	for _, s := range stacks(c) {
		fmt.Fprintf(&b, "        %s api.%s api-int.%s\n", s.APIVIP, d, d)
	}
	for _, n := range c.Nodes {
		for _, s := range stacks(c) {
			fmt.Fprintf(&b, "        %s %s %s.%s\n", s.ip(n), n.Name, n.Name, d)
		}
	}
	b.WriteString("        fallthrough\n    }\n")
	for _, rr := range []string{"A", "AAAA"} {
		var vip netip.Addr
		for _, s := range stacks(c) {
			if v := s.ingressVIP(); v.Is6() == (rr == "AAAA") {
				vip = v
			}
		}
		if vip.IsValid() {
			fmt.Fprintf(&b, "    template IN %s apps.%s {\n        answer \"{{ .Name }} 60 IN %s %s\"\n    }\n", rr, d, rr, vip)
		} else {
			fmt.Fprintf(&b, "    template IN %s apps.%s {\n        rcode NOERROR\n    }\n", rr, d)
		}
	}
	b.WriteString("    forward .")
	for _, u := range c.Upstream {
		fmt.Fprintf(&b, " %s", u)
	}
	b.WriteString("\n    cache 30\n    reload\n}\n")
	return b.String()
}

// RouterHealthPort serves the OpenShift router's /healthz/ready.
const RouterHealthPort = 1936

// HAProxyConf balances 80 and 443 on the ingress VIP, TCP mode, to the
// workers' routers; a worker whose router is not ready (its
// /healthz/ready on RouterHealthPort fails) gets nothing. It answers
// IngressHealthURL on localhost for the master's keepalived.
//
// A cluster with IPv6 (IPv6-only or dual-stack) binds 80 and 443 on every
// address of both families ([::]:80 v4v6, as OpenShift's on-prem haproxy
// binds its API port): the masters serve nothing else there, and it takes
// both VIPs of a dual-stack cluster with no non-local bind of an IPv6 VIP.
// An IPv4-only cluster keeps the bind on its VIP (a host may have IPv6
// off). The routers are reached at the workers' first-family addresses,
// [addr]:port in IPv6.
func HAProxyConf(c Cluster) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# bmlab: haproxy of cluster %s: the ingress VIP to the workers' routers\n", domain(c))
	b.WriteString("global\n    maxconn 4000\n\ndefaults\n    mode tcp\n    timeout connect 5s\n    timeout client 1m\n    timeout server 1m\n")
	// What the master's keepalived checks (IngressHealthURL): 200 while
	// both backends have a ready router, else 503.
	fmt.Fprintf(&b, "\nfrontend ingress-health\n    mode http\n    bind %s\n    acl no_http nbsrv(ingress-80) lt 1\n    acl no_https nbsrv(ingress-443) lt 1\n    monitor-uri /healthz/ready\n    monitor fail if no_http || no_https\n", netip.AddrPortFrom(loopback(c), IngressHealthPort))
	for _, port := range []int{80, 443} {
		name := "ingress-" + strconv.Itoa(port)
		bind := netip.AddrPortFrom(ingressVIP(c), uint16(port)).String()
		if hasIPv6(c) {
			bind = netip.AddrPortFrom(netip.IPv6Unspecified(), uint16(port)).String() + " v4v6"
		}
		fmt.Fprintf(&b, "\nfrontend %s\n    bind %s\n    default_backend %s\n", name, bind, name)
		fmt.Fprintf(&b, "\nbackend %s\n    balance roundrobin\n    option httpchk GET /healthz/ready\n", name)
		for _, w := range nodesWith(c, ocp.RoleWorker) {
			fmt.Fprintf(&b, "    server %s %s check port %d inter 2s\n", w.Name, netip.AddrPortFrom(w.IP, uint16(port)), RouterHealthPort)
		}
	}
	return b.String()
}

// The pods.

func staticPod(name string, containers []container, init []container, volumes []volume) pod {
	return pod{
		typeMeta: typeMeta{APIVersion: "v1", Kind: "Pod"},
		Metadata: objectMeta{Name: "bmlab-" + name, Namespace: PodNamespace, Labels: map[string]string{"app": "bmlab-" + name}},
		Spec: podSpec{
			HostNetwork:       true,
			PriorityClassName: "system-node-critical",
			Tolerations:       []toleration{{Operator: "Exists"}},
			InitContainers:    init,
			Containers:        containers,
			Volumes:           volumes,
		},
	}
}

func hostDir(name, path string) volume {
	return volume{Name: name, HostPath: &hostPath{Path: path, Type: "Directory"}}
}

func privileged() *securityContext {
	yes := true
	return &securityContext{Privileged: &yes}
}

func keepalivedPod(c Cluster) pod {
	mounts := []volumeMount{{Name: "config", MountPath: "/config"}, {Name: "run", MountPath: "/etc/keepalived"}}
	return staticPod("keepalived",
		[]container{{
			Name: "keepalived", Image: c.Images.Keepalived,
			Command:         []string{"keepalived", "--dont-fork", "--log-console", "--log-detail", "--vrrp", "-f", "/etc/keepalived/keepalived.conf"},
			SecurityContext: privileged(), VolumeMounts: mounts,
		}},
		[]container{{
			Name: "render", Image: c.Images.Keepalived,
			Command:      []string{"/bin/sh", "/config/render.sh", "/config/keepalived.conf.tmpl", "/etc/keepalived/keepalived.conf"},
			VolumeMounts: mounts,
		}},
		[]volume{hostDir("config", ResourcesDir+"/keepalived"), {Name: "run", EmptyDir: &empty{}}},
	)
}

func corednsPod(c Cluster) pod {
	return staticPod("coredns",
		[]container{{
			Name: "coredns", Image: c.Images.CoreDNS,
			Args:         []string{"-conf", "/config/Corefile"},
			VolumeMounts: []volumeMount{{Name: "config", MountPath: "/config"}},
		}},
		nil,
		[]volume{hostDir("config", ResourcesDir+"/coredns")},
	)
}

func haproxyPod(c Cluster) pod {
	return staticPod("haproxy",
		[]container{{
			Name: "haproxy", Image: c.Images.HAProxy,
			Command:         []string{"haproxy", "-db", "-f", "/config/haproxy.cfg"},
			SecurityContext: privileged(),
			VolumeMounts:    []volumeMount{{Name: "config", MountPath: "/config"}},
		}},
		nil,
		[]volume{hostDir("config", ResourcesDir+"/haproxy")},
	)
}

func podYAML(p pod) ([]byte, error) {
	b, err := yamljson.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("pod %s: %w", p.Metadata.Name, err)
	}
	return b, nil
}
