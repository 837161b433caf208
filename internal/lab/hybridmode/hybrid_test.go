package hybridmode

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/lab/labtest"
	"github.com/bmlab/bmlab/internal/lab/steps"
	"github.com/bmlab/bmlab/internal/labconfig"
	"github.com/bmlab/bmlab/internal/ocp"
	"github.com/bmlab/bmlab/internal/plan"
	"github.com/bmlab/bmlab/internal/plan/plantest"
)

func hybridPlan(t *testing.T, name, extra string) *plan.Plan {
	t.Helper()
	cfg, err := labconfig.Parse([]byte("name: " + name + "\ncluster: {image: /img/rhcos.qcow2" + extra + "}\n"))
	labtest.Must(t, err)
	p, err := plan.Resolve(cfg, plan.Options{Modes: plantest.Modes(), Dir: "/labs/" + name, Mode: Name})
	labtest.Must(t, err)
	return p
}

// markedHost is a fake host whose domains carry other labs' cluster marks.
func markedHost(marks map[string]map[string]string) *labtest.Host {
	h := labtest.NewHost()
	h.Marks = marks
	return h
}

func TestSegmentClashes(t *testing.T) {
	p := hybridPlan(t, "one", "")
	other := hybridPlan(t, "two", ", apiVIP: 192.168.111.6, ingressVIP: 192.168.111.7")
	mark := func(q *plan.Plan, segment string) map[string]string {
		k := q.Cluster
		return map[string]string{"name": q.Lab, "segment": segment, "apiVIP": k.APIVIP.String(), "ingressVIP": k.IngressVIP.String(),
			"apiRouterID": itoa(q.Hybrid.APIRouterID), "ingressRouterID": itoa(q.Hybrid.IngressRouterID)}
	}
	if p.Hybrid.APIRouterID == other.Hybrid.APIRouterID {
		t.Fatalf("two cluster names drew the same router ID %d", p.Hybrid.APIRouterID)
	}
	e := &lab.Env{Plan: p}
	// Another lab on another segment: no clash whatever it holds.
	e.Host = markedHost(map[string]map[string]string{"x-master-0": mark(p, "elsewhere")})
	if msgs, err := segmentClashes(context.Background(), e); err != nil || len(msgs) != 0 {
		t.Errorf("other segment: %v %v", msgs, err)
	}
	// Same segment, distinct VIPs and IDs: no clash.
	e.Host = markedHost(map[string]map[string]string{"two-master-0": mark(other, p.Hybrid.Segment)})
	if msgs, err := segmentClashes(context.Background(), e); err != nil || len(msgs) != 0 {
		t.Errorf("distinct: %v %v", msgs, err)
	}
	// Same segment, same VIPs and router IDs: every one named.
	same := mark(p, p.Hybrid.Segment)
	same["name"] = "three"
	e.Host = markedHost(map[string]map[string]string{"three-master-0": same, "three-master-1": same})
	msgs, err := segmentClashes(context.Background(), e)
	labtest.Must(t, err)
	if len(msgs) != 4 || !strings.Contains(strings.Join(msgs, "\n"), `lab "three" on the same network bmnat-one holds apiVIP 192.168.111.5: give this lab another (cluster.apiVIP)`) ||
		!strings.Contains(strings.Join(msgs, "\n"), "(cluster.hybrid.ingressRouterID)") {
		t.Errorf("clashes:\n%s", strings.Join(msgs, "\n"))
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestHostsBlock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	labtest.Must(t, os.WriteFile(path, []byte("127.0.0.1 localhost\n# bmlab other begin\n10.0.0.1 api.other\n# bmlab other end\n"), 0o644))
	lines := []string{"10.0.0.5 api.c.x", "10.0.0.4 console.apps.c.x"}
	for i, want := range []bool{true, false} {
		changed, err := ensureHosts(path, "mine", lines)
		labtest.Must(t, err)
		if changed != want {
			t.Errorf("round %d: changed %v", i, changed)
		}
	}
	b, _ := os.ReadFile(path)
	if string(b) != "127.0.0.1 localhost\n# bmlab other begin\n10.0.0.1 api.other\n# bmlab other end\n# bmlab mine begin\n10.0.0.5 api.c.x\n10.0.0.4 console.apps.c.x\n# bmlab mine end\n" {
		t.Errorf("hosts:\n%s", b)
	}
	_, err := ensureHosts(path, "mine", nil)
	labtest.Must(t, err)
	if b, _ := os.ReadFile(path); string(b) != "127.0.0.1 localhost\n# bmlab other begin\n10.0.0.1 api.other\n# bmlab other end\n" {
		t.Errorf("after removal:\n%s", b)
	}
}

// TestDownByNameCleansTheMarkedHostsFile: down --lab (no lab file: the
// plan knows only the default hosts file) removes the lab's entries from
// the custom hosts file its domains name in their mark, and no other
// lab's.
func TestDownByNameCleansTheMarkedHostsFile(t *testing.T) {
	dir := t.TempDir()
	custom, def := filepath.Join(dir, "hosts"), filepath.Join(dir, "etc-hosts")
	p := hybridPlan(t, "hf", ", hybrid: {hostsFile: "+custom+"}")
	if got := markAttrs(p); !slices.Contains(got, custom) {
		t.Fatalf("the domains' mark does not name the hosts file: %q", got)
	}
	labtest.Must(t, os.WriteFile(custom, []byte("127.0.0.1 localhost\n"), 0o644))
	if _, err := ensureHosts(custom, "hf", hostsEntries(p)); err != nil {
		t.Fatal(err)
	}
	if _, err := ensureHosts(custom, "other", []string{"10.9.9.9 api.other"}); err != nil {
		t.Fatal(err)
	}
	attrs := func(q *plan.Plan) map[string]string {
		a := markAttrs(q)
		m := map[string]string{"name": q.Lab}
		for i := 0; i+1 < len(a); i += 2 {
			m[a[i]] = a[i+1]
		}
		return m
	}
	bare, err := plan.Resolve(mustParse(t, "name: hf\n"), plan.Options{Modes: plantest.Modes(), Dir: dir, Mode: plantest.IPI})
	labtest.Must(t, err)
	bare.Paths.HostsFile = def // what /etc/hosts is to down --lab
	e := &lab.Env{Plan: bare, Host: markedHost(map[string]map[string]string{"hf-master-0": attrs(p)})}
	if err := (installComplete{}).Delete(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(custom)
	if want := "127.0.0.1 localhost\n# bmlab other begin\n10.9.9.9 api.other\n# bmlab other end\n"; string(b) != want {
		t.Errorf("the custom hosts file after down --lab hf:\n%s\nwant:\n%s", b, want)
	}
}

// TestUpLeavesShutOffNodesOff: a node up started and someone shut off
// since stays off on the next up, which says so; --start-stopped starts
// it; a node up never started is started.
func TestUpLeavesShutOffNodesOff(t *testing.T) {
	dir := t.TempDir()
	cfg, err := labconfig.Parse([]byte("name: so\ncluster: {image: /img/rhcos.qcow2, workers: {count: 1}}\n"))
	labtest.Must(t, err)
	p, err := plan.Resolve(cfg, plan.Options{Modes: plantest.Modes(), Dir: dir, Mode: Name})
	labtest.Must(t, err)
	for _, n := range p.Nodes {
		labtest.Must(t, os.MkdirAll(filepath.Dir(n.Ignition), 0o755))
		labtest.Must(t, os.WriteFile(n.Ignition, []byte("{}"), 0o644))
	}
	f := labtest.NewHost()
	rec := &labtest.Recorder{}
	e := &lab.Env{Plan: p, Host: f, Rep: rec}
	workers := nodesOf(p, ocp.RoleWorker)
	if _, err := startNodes(context.Background(), e, "workers", workers); err != nil {
		t.Fatal(err)
	}
	w := workers[0].Name
	if pw, _ := f.Power(context.Background(), w); pw != "On" {
		t.Fatalf("%s after the first up: %s", w, pw)
	}
	delete(f.Objs["running"], w) // shut off by someone
	if _, err := startNodes(context.Background(), e, "workers", workers); err != nil {
		t.Fatal(err)
	}
	if pw, _ := f.Power(context.Background(), w); pw != "Off" {
		t.Errorf("up started %s, which was shut off on purpose", w)
	}
	if notes := strings.Join(rec.Lines, "\n"); !strings.Contains(notes, "left "+w+" off: it was shut off after up started it; `labctl up --start-stopped` starts it") {
		t.Errorf("up did not say it left %s off:\n%s", w, notes)
	}
	e.StartStopped = true
	if _, err := startNodes(context.Background(), e, "workers", workers); err != nil {
		t.Fatal(err)
	}
	if pw, _ := f.Power(context.Background(), w); pw != "On" {
		t.Errorf("up --start-stopped left %s %s", w, pw)
	}
	// The list goes with the nodes.
	e.StartStopped = false
	labtest.Must(t, (controlPlane{}).Delete(context.Background(), e))
	if _, err := os.Stat(p.Paths.Started); !os.IsNotExist(err) {
		t.Errorf("down left the list of started nodes: %v", err)
	}
}

// TestHybridClusterFamilies: the static pods' view of a dual-stack cluster
// carries the IPv6 family beside the IPv4 one (upi.Cluster.Secondary, each
// node's SecondaryIP, coredns' upstream of each family); an IPv6-only one
// has IPv6 in the primary fields and no second family.
func TestHybridClusterFamilies(t *testing.T) {
	c := Cluster(hybridPlan(t, "hd", ", ipFamily: dual"), "key")
	s := c.Secondary
	if c.MachineNetwork.String() != "192.168.111.0/24" || s.MachineNetwork.String() != "fd2e:6f44:5dd8:c956::/120" ||
		s.APIVIP.String() != "fd2e:6f44:5dd8:c956::5" || s.IngressVIP.String() != "fd2e:6f44:5dd8:c956::4" {
		t.Errorf("dual: %s, second family %+v", c.MachineNetwork, s)
	}
	if n := c.Nodes[0]; n.IP.String() != "192.168.111.20" || n.SecondaryIP.String() != "fd2e:6f44:5dd8:c956::20" {
		t.Errorf("dual: bootstrap %+v", n)
	}
	if len(c.Upstream) != 2 || c.Upstream[1].String() != "fd2e:6f44:5dd8:c956::1" {
		t.Errorf("dual: upstream %v", c.Upstream)
	}
	c = Cluster(hybridPlan(t, "h6", ", ipFamily: v6"), "key")
	if c.APIVIP.String() != "fd2e:6f44:5dd8:c956::5" || c.Secondary.MachineNetwork.IsValid() || c.Nodes[1].SecondaryIP.IsValid() ||
		c.Upstream[0].String() != "fd2e:6f44:5dd8:c956::1" {
		t.Errorf("v6: %+v", c)
	}
}

// TestDualStackClashes: preflight compares a dual-stack lab's IPv6 family
// too: another libvirt network on its IPv6 machine network (two dual-stack
// labs with the default fd2e:6f44:5dd8:c956::/120), and another hybrid
// cluster on its segment holding its IPv6 VIPs.
func TestDualStackClashes(t *testing.T) {
	p := hybridPlan(t, "dd", ", ipFamily: dual")
	h := labtest.NewHost() // another libvirt network's addresses
	h.Addresses = map[string][]netip.Prefix{
		"other-machine": {netip.MustParsePrefix("10.198.1.0/24"), netip.MustParsePrefix("fd2e:6f44:5dd8:c956::/120")}}
	e := &lab.Env{Plan: p, Host: h}
	err := steps.Clashes(context.Background(), e)
	if err == nil || !strings.Contains(err.Error(), "libvirt network other-machine has fd2e:6f44:5dd8:c956::/120, which overlaps the machine network fd2e:6f44:5dd8:c956::/120: give this lab another (cluster.machineNetworkV6") {
		t.Errorf("IPv6 network clash: %v", err)
	}
	other := hybridPlan(t, "de", ", ipFamily: dual, apiVIP: 192.168.111.6, ingressVIP: 192.168.111.7, hybrid: {apiRouterID: 201, ingressRouterID: 202}")
	m := map[string]string{"name": "de"}
	attrs := markAttrs(other)
	for i := 0; i+1 < len(attrs); i += 2 {
		m[attrs[i]] = attrs[i+1]
	}
	m["segment"] = p.Hybrid.Segment // both labs on one segment
	e.Host = markedHost(map[string]map[string]string{"de-master-0": m})
	msgs, err := segmentClashes(context.Background(), e)
	labtest.Must(t, err)
	if got := strings.Join(msgs, "\n"); len(msgs) != 2 || !strings.Contains(got, `holds apiVIPV6 fd2e:6f44:5dd8:c956::5: give this lab another (cluster.apiVIPV6)`) {
		t.Errorf("IPv6 VIP clashes:\n%s", got)
	}
}

// TestHybridInstallConfigDualStack: the hybrid mode's install-config
// (platform none) has a machine, cluster and service network per family,
// IPv4 first, and passes the installer's dual-stack rules.
func TestHybridInstallConfigDualStack(t *testing.T) {
	dir := t.TempDir()
	labtest.Must(t, os.WriteFile(filepath.Join(dir, "pull-secret.json"), []byte(`{"auths":{"registry.invalid":{"auth":"dXNlcjpwYXNz"}}}`), 0o600))
	cfg, err := labconfig.Parse([]byte("name: hic\ncluster: {ipFamily: dual, image: /img/rhcos.qcow2}\n"))
	labtest.Must(t, err)
	p, err := plan.Resolve(cfg, plan.Options{Modes: plantest.Modes(), Dir: dir, Mode: Name, SSHKey: "/dev/null"})
	labtest.Must(t, err)
	ic, err := HybridInstallConfig(&lab.Env{Plan: p})
	labtest.Must(t, err)
	n := ic.Networking
	got := []string{n.MachineNetwork[0].CIDR, n.MachineNetwork[1].CIDR, n.ClusterNetwork[0].CIDR, n.ClusterNetwork[1].CIDR, n.ServiceNetwork[0], n.ServiceNetwork[1]}
	want := []string{"192.168.111.0/24", "fd2e:6f44:5dd8:c956::/120", "10.128.0.0/14", "fd01::/48", "172.30.0.0/16", "fd02::/112"}
	if !slices.Equal(got, want) || ic.Platform.None == nil {
		t.Errorf("hybrid install-config networks %v, platform %+v; want %v, none", got, ic.Platform, want)
	}
}

// TestHostsEntriesDualStack: the lab host's hosts file gets a dual-stack
// cluster's names with each family's VIPs; an IPv4 one's with its VIPs only.
func TestHostsEntriesDualStack(t *testing.T) {
	got := strings.Join(hostsEntries(hybridPlan(t, "hd", ", ipFamily: dual")), "\n")
	for _, want := range []string{"192.168.111.5 api.", "fd2e:6f44:5dd8:c956::5 api.", "fd2e:6f44:5dd8:c956::4 console-openshift-console.apps."} {
		if !strings.Contains(got, want) {
			t.Errorf("dual-stack hosts entries lack %q:\n%s", want, got)
		}
	}
	if got := hostsEntries(hybridPlan(t, "h4", "")); len(got) != 2 || strings.Contains(strings.Join(got, "\n"), ":") {
		t.Errorf("IPv4 hosts entries: %q", got)
	}
}

func mustParse(t *testing.T, s string) *labconfig.Config {
	t.Helper()
	c, err := labconfig.Parse([]byte(s))
	labtest.Must(t, err)
	return c
}
