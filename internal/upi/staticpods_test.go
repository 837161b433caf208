package upi

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// podCluster is a cluster of a bootstrap, three masters and n workers on
// 10.0.0.0/24.
func podCluster(workers int) Cluster {
	a := netip.MustParseAddr
	c := Cluster{
		Name: "ocp", BaseDomain: "lab.test", MachineNetwork: netip.MustParsePrefix("10.0.0.0/24"),
		APIVIP: a("10.0.0.5"), IngressVIP: a("10.0.0.4"), APIRouterID: 41, IngressRouterID: 42,
		Upstream: []netip.Addr{a("10.0.0.1")}, SSHKey: "ssh-ed25519 AAAA test",
		Images: Images{Keepalived: "example.invalid/keepalived:1", CoreDNS: "example.invalid/coredns:1", HAProxy: "example.invalid/haproxy:1"},
		Nodes:  []Node{{Name: "ocp-bootstrap", Role: RoleBootstrap, IP: a("10.0.0.20")}},
	}
	for i := range 3 {
		c.Nodes = append(c.Nodes, Node{Name: fmt.Sprintf("ocp-master-%d", i), Role: RoleMaster, IP: a(fmt.Sprintf("10.0.0.%d", 21+i))})
	}
	for i := range workers {
		c.Nodes = append(c.Nodes, Node{Name: fmt.Sprintf("ocp-worker-%d", i), Role: RoleWorker, IP: a(fmt.Sprintf("10.0.0.%d", 24+i))})
	}
	return c
}

// TestStaticPodsGolden pins every file of every node, with and without
// workers; each pod re-parses into a corev1.Pod with what a static pod of
// the cluster needs.
func TestStaticPodsGolden(t *testing.T) {
	for _, tt := range []struct {
		name    string
		workers int
	}{{"with-workers", 2}, {"compact", 0}} {
		t.Run(tt.name, func(t *testing.T) {
			c := podCluster(tt.workers)
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
			path := filepath.Join("testdata", "staticpods-"+tt.name+".txt")
			if *update {
				if err := os.WriteFile(path, []byte(got.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(string(want), got.String()); d != "" {
				t.Errorf("static pods differ from %s (-want +got; -update rewrites):\n%s", path, d)
			}
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
