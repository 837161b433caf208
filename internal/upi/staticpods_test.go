package upi

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/bmlab/bmlab/internal/netaddr"
	"github.com/bmlab/bmlab/internal/ocp"
)

// podCluster is a cluster of a bootstrap, three masters and n workers on
// 10.0.0.0/24.
func podCluster(workers int) Cluster {
	a := netip.MustParseAddr
	c := Cluster{
		Name: "ocp", BaseDomain: "lab.test",
		Family:      netaddr.Family{MachineNetwork: netip.MustParsePrefix("10.0.0.0/24"), APIVIP: a("10.0.0.5"), IngressVIP: a("10.0.0.4")},
		APIRouterID: 41, IngressRouterID: 42,
		Upstream: []netip.Addr{a("10.0.0.1")}, SSHKey: "ssh-ed25519 AAAA test",
		Images: Images{Keepalived: "example.invalid/keepalived:1", CoreDNS: "example.invalid/coredns:1", HAProxy: "example.invalid/haproxy:1"},
		Nodes:  []Node{{Name: "ocp-bootstrap", Role: ocp.RoleBootstrap, IP: a("10.0.0.20")}},
	}
	for i := range 3 {
		c.Nodes = append(c.Nodes, Node{Name: fmt.Sprintf("ocp-master-%d", i), Role: ocp.RoleMaster, IP: a(fmt.Sprintf("10.0.0.%d", 21+i))})
	}
	for i := range workers {
		c.Nodes = append(c.Nodes, Node{Name: fmt.Sprintf("ocp-worker-%d", i), Role: ocp.RoleWorker, IP: a(fmt.Sprintf("10.0.0.%d", 24+i))})
	}
	return c
}

// v6 is the IPv6 address of podCluster's IPv4 address a: 10.0.0.x is
// fd00:10::x (x in decimal digits).
func v6(a netip.Addr) netip.Addr {
	return netip.MustParseAddr(fmt.Sprintf("fd00:10::%d", a.As4()[3]))
}

// podCluster6 is podCluster in IPv6 only, on fd00:10::/64.
func podCluster6(workers int) Cluster {
	c := podCluster(workers)
	c.MachineNetwork = netip.MustParsePrefix("fd00:10::/64")
	c.APIVIP, c.IngressVIP = v6(c.APIVIP), v6(c.IngressVIP)
	c.Upstream = []netip.Addr{v6(c.Upstream[0])}
	for i := range c.Nodes {
		c.Nodes[i].IP = v6(c.Nodes[i].IP)
	}
	return c
}

// podClusterDual is podCluster dual-stack: IPv4 first, fd00:10::/64 second.
func podClusterDual(workers int) Cluster {
	c := podCluster(workers)
	c.Secondary = netaddr.Family{MachineNetwork: netip.MustParsePrefix("fd00:10::/64"), APIVIP: v6(c.APIVIP), IngressVIP: v6(c.IngressVIP)}
	for i := range c.Nodes {
		c.Nodes[i].SecondaryIP = v6(c.Nodes[i].IP)
	}
	return c
}

// TestStaticPodsGolden pins every file of every node, with and without
// workers, in IPv4, IPv6 and dual-stack; each pod re-parses into a
// corev1.Pod with what a static pod of the cluster needs.
func TestStaticPodsGolden(t *testing.T) {
	for _, tt := range []struct {
		name    string
		cluster func(int) Cluster
		workers int
	}{
		{"with-workers", podCluster, 2}, {"compact", podCluster, 0},
		{"v6-with-workers", podCluster6, 2}, {"v6-compact", podCluster6, 0},
		{"dual-with-workers", podClusterDual, 2}, {"dual-compact", podClusterDual, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.cluster(tt.workers)
			var got strings.Builder
			for _, n := range c.Nodes {
				files, err := StaticPodFiles(c, n)
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range files {
					fmt.Fprintf(&got, "=== %s %s %#o\n%s", n.Name, f.Path, f.Mode, f.Contents)
					if strings.HasPrefix(f.Path, ManifestsDir) {
						checkPod(t, f)
					}
				}
			}
			golden(t, "staticpods-"+tt.name+".txt", []byte(got.String()))
		})
	}
}

func checkPod(t *testing.T, f File) {
	t.Helper()
	var p corev1.Pod
	if err := yaml.UnmarshalStrict(f.Contents, &p); err != nil {
		t.Fatalf("%s does not parse as a Pod: %v", f.Path, err)
	}
	s := p.Spec
	if p.Kind != "Pod" || !s.HostNetwork || s.PriorityClassName != "system-node-critical" ||
		len(s.Tolerations) != 1 || s.Tolerations[0].Operator != corev1.TolerationOpExists || s.Tolerations[0].Key != "" {
		t.Errorf("%s: not a host-network, node-critical pod tolerating everything: %+v", f.Path, s)
	}
	for _, c := range s.Containers {
		if c.Image == "" {
			t.Errorf("%s: container %s has no image", f.Path, c.Name)
		}
	}
}

func TestStaticPodsRoles(t *testing.T) {
	names := func(c Cluster, n Node) []string {
		files, err := StaticPodFiles(c, n)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, f := range files {
			if strings.HasPrefix(f.Path, ManifestsDir) {
				out = append(out, filepath.Base(f.Path))
			}
		}
		return out
	}
	c := podCluster(2)
	for _, tt := range []struct {
		node int
		want []string
	}{{0, []string{"coredns.yaml", "keepalived.yaml"}}, {1, []string{"coredns.yaml", "keepalived.yaml", "haproxy.yaml"}}, {4, []string{"coredns.yaml"}}} {
		if d := cmp.Diff(tt.want, names(c, c.Nodes[tt.node])); d != "" {
			t.Errorf("%s (-want +got):\n%s", c.Nodes[tt.node].Name, d)
		}
	}
	if got := names(podCluster(0), podCluster(0).Nodes[1]); strings.Contains(strings.Join(got, " "), "haproxy") {
		t.Errorf("a compact cluster's master runs haproxy: %v", got)
	}
	bad := podCluster(1)
	bad.IngressRouterID = bad.APIRouterID
	if _, err := StaticPodFiles(bad, bad.Nodes[0]); err == nil || !strings.Contains(err.Error(), "two distinct IDs") {
		t.Errorf("same router IDs: %v", err)
	}
	bad = podCluster(1)
	bad.Upstream = nil
	if _, err := StaticPodFiles(bad, bad.Nodes[0]); err == nil || !strings.Contains(err.Error(), "upstream") {
		t.Errorf("no upstream: %v", err)
	}
}

// TestStaticPodsIPv6: what the golden files hold for IPv6 and dual-stack,
// said once: IPv6 keepalived instances (one per family in dual-stack, the
// same router IDs, /128 VIPs, unicast over IPv6, no VRRPv3
// authentication), AAAA records, haproxy on [::] to [addr]:port backends,
// health URLs in brackets.
func TestStaticPodsIPv6(t *testing.T) {
	file := func(c Cluster, node int, base string) string {
		t.Helper()
		files, err := StaticPodFiles(c, c.Nodes[node])
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if filepath.Base(f.Path) == base {
				return string(f.Contents)
			}
		}
		t.Fatalf("%s has no %s", c.Nodes[node].Name, base)
		return ""
	}
	has := func(what, text string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("%s lacks %q:\n%s", what, w, text)
			}
		}
	}
	hasNot := func(what, text string, unwanted ...string) {
		t.Helper()
		for _, w := range unwanted {
			if strings.Contains(text, w) {
				t.Errorf("%s has %q:\n%s", what, w, text)
			}
		}
	}

	c := podCluster6(2)
	ka := file(c, 1, "keepalived.conf.tmpl")
	has("v6 keepalived", ka, "vrrp_instance ocp_api {", "vrrp_instance ocp_ingress {", "unicast_src_ip fd00:10::21\n    check_unicast_src\n",
		"        fd00:10::20\n", "fd00:10::5/128 dev @INTERFACE@", "fd00:10::4/128 dev @INTERFACE@", "http://[::1]:1937/healthz/ready")
	hasNot("v6 keepalived", ka, "authentication", "/32", "10.0.0.", "_v6")
	has("v6 render.sh", file(c, 1, "render.sh"), "ip -o addr show", `ip="fd00:10::21"`)
	has("v6 Corefile", file(c, 4, "Corefile"), "fd00:10::5 api.ocp.lab.test api-int.ocp.lab.test\n", "fd00:10::24 ocp-worker-0 ocp-worker-0.ocp.lab.test\n",
		"template IN AAAA apps.ocp.lab.test {\n        answer \"{{ .Name }} 60 IN AAAA fd00:10::4\"", "template IN A apps.ocp.lab.test {\n        rcode NOERROR", "forward . fd00:10::1\n")
	hp := file(c, 1, "haproxy.cfg")
	has("v6 haproxy", hp, "bind [::1]:1937\n", "bind [::]:80 v4v6\n", "bind [::]:443 v4v6\n", "server ocp-worker-1 [fd00:10::25]:443 check port 1936")
	if got, want := IngressHealthURL(c), "http://[::1]:1937/healthz/ready"; got != want {
		t.Errorf("IngressHealthURL = %s, want %s", got, want)
	}
	if got, want := IngressHealthURL(podCluster6(0)), "http://[::1]:1936/healthz/ready"; got != want {
		t.Errorf("compact IngressHealthURL = %s, want %s", got, want)
	}

	c = podClusterDual(2)
	ka = file(c, 0, "keepalived.conf.tmpl")
	has("dual bootstrap keepalived", ka, "vrrp_instance ocp_api {", "vrrp_instance ocp_api_v6 {", "10.0.0.5/32 dev", "fd00:10::5/128 dev",
		"unicast_src_ip 10.0.0.20\n", "unicast_src_ip fd00:10::20\n", "priority 150")
	hasNot("dual bootstrap keepalived", ka, "ingress")
	ka = file(c, 1, "keepalived.conf.tmpl")
	for _, inst := range []string{"ocp_api", "ocp_api_v6", "ocp_ingress", "ocp_ingress_v6"} {
		if n := strings.Count(ka, "vrrp_instance "+inst+" {"); n != 1 {
			t.Errorf("dual master keepalived has instance %s %d times, want once", inst, n)
		}
	}
	if n := strings.Count(ka, "virtual_router_id 41\n"); n != 2 {
		t.Errorf("dual: the API router ID in %d instances, want 2 (one per family)", n)
	}
	if n := strings.Count(ka, "authentication {"); n != 2 {
		t.Errorf("dual: authentication in %d instances, want the 2 IPv4 ones", n)
	}
	has("dual Corefile", file(c, 4, "Corefile"), "10.0.0.5 api.ocp.lab.test", "fd00:10::5 api.ocp.lab.test", "10.0.0.21 ocp-master-0 ", "fd00:10::21 ocp-master-0 ",
		"IN A 10.0.0.4\"", "IN AAAA fd00:10::4\"", "forward . 10.0.0.1\n")
	hp = file(c, 1, "haproxy.cfg")
	has("dual haproxy", hp, "bind 127.0.0.1:1937\n", "bind [::]:80 v4v6\n", "server ocp-worker-0 10.0.0.24:80 check")
	if got, want := IngressHealthURL(c), "http://127.0.0.1:1937/healthz/ready"; got != want {
		t.Errorf("dual IngressHealthURL = %s, want %s", got, want)
	}
}

// TestStaticPodsFamilyErrors: an address of the wrong family is refused,
// naming its field.
func TestStaticPodsFamilyErrors(t *testing.T) {
	a := netip.MustParseAddr
	for _, tt := range []struct {
		name string
		edit func(*Cluster)
		want string
	}{
		{"v4 ingress VIP in a v6 cluster", func(c *Cluster) { c.IngressVIP = a("10.0.0.4") }, "IngressVIP 10.0.0.4 is IPv4 but APIVIP fd00:10::5 is IPv6"},
		{"v4 machine network in a v6 cluster", func(c *Cluster) { c.MachineNetwork = netip.MustParsePrefix("10.0.0.0/24") }, "MachineNetwork 10.0.0.0 is IPv4"},
		{"v4 node in a v6 cluster", func(c *Cluster) { c.Nodes[2].IP = a("10.0.0.22") }, "node ocp-master-1's IP 10.0.0.22 is IPv4"},
		{"mapped API VIP", func(c *Cluster) { c.APIVIP = a("::ffff:10.0.0.5") }, "APIVIP ::ffff:10.0.0.5 is an IPv4-mapped IPv6 address"},
		{"secondary on a v6 cluster", func(c *Cluster) { c.Secondary.APIVIP = a("fd00:10::6") }, "APIVIP fd00:10::5 is IPv6 and Secondary is set"},
		{"secondary IP without secondary", func(c *Cluster) { c.Nodes[0].SecondaryIP = a("fd00:10::20") }, "node ocp-bootstrap has SecondaryIP"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := podCluster6(1)
			tt.edit(&c)
			if _, err := StaticPodFiles(c, c.Nodes[1]); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error with %q", err, tt.want)
			}
		})
	}
	for _, tt := range []struct {
		name string
		edit func(*Cluster)
		want string
	}{
		{"v4 secondary API VIP", func(c *Cluster) { c.Secondary.APIVIP = a("10.0.0.6") }, "Secondary.APIVIP 10.0.0.6 is IPv4"},
		{"v4 secondary machine network", func(c *Cluster) { c.Secondary.MachineNetwork = netip.MustParsePrefix("10.1.0.0/24") }, "Secondary.MachineNetwork 10.1.0.0 is IPv4"},
		{"v6 first ingress VIP", func(c *Cluster) { c.IngressVIP = a("fd00:10::4") }, "IngressVIP fd00:10::4 is IPv6 but APIVIP 10.0.0.5 is IPv4"},
		{"no secondary API VIP", func(c *Cluster) { c.Secondary.APIVIP = netip.Addr{} }, "Secondary.APIVIP is missing"},
		{"ingress VIP in one family", func(c *Cluster) { c.Secondary.IngressVIP = netip.Addr{} }, "give an ingress VIP in both families or in neither"},
		{"node without secondary IP", func(c *Cluster) { c.Nodes[3].SecondaryIP = netip.Addr{} }, "node ocp-master-2 has no SecondaryIP"},
		{"v4 secondary IP", func(c *Cluster) { c.Nodes[3].SecondaryIP = a("10.0.1.23") }, "node ocp-master-2's SecondaryIP 10.0.1.23 is IPv4"},
	} {
		t.Run("dual/"+tt.name, func(t *testing.T) {
			c := podClusterDual(1)
			tt.edit(&c)
			if _, err := StaticPodFiles(c, c.Nodes[1]); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error with %q", err, tt.want)
			}
		})
	}
	// Without an ingress VIP in either family, a dual-stack cluster is
	// fine: *.apps goes to each family's API VIP.
	c := podClusterDual(0)
	c.IngressVIP, c.Secondary.IngressVIP = netip.Addr{}, netip.Addr{}
	files, err := StaticPodFiles(c, c.Nodes[1])
	if err != nil {
		t.Fatal(err)
	}
	if cf := string(files[0].Contents); !strings.Contains(cf, "IN A 10.0.0.5\"") || !strings.Contains(cf, "IN AAAA fd00:10::5\"") {
		t.Errorf("dual-stack without ingress VIPs: *.apps not on the API VIPs:\n%s", cf)
	}
}
