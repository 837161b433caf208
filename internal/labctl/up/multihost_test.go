package up_test

import (
	"context"
	"encoding/json"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/digitalocean/go-libvirt"
	"github.com/digitalocean/go-libvirt/socket/dialers"

	"github.com/bmlab/bmlab/internal/labvirt"
	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/netplumb/netnstest"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virttest"
)

// TestMultiHostUpDown: a lab spread over two libvirt hosts (each a libvirtd
// of its own in a network namespace, on one underlay segment, reached over
// qemu+tcp). beta is another machine as far as labctl can tell: its own
// network namespace, and its own directory at the lab's path (its
// libvirtd's mount namespace); its exec: enters both, as ssh would. `labctl
// up --until bmcs` on the hub (alpha) alone builds both hosts: beta's links,
// pool, volumes and domains through labctl run there. Then each host's
// libvirt has exactly the nodes the plan placed there, beta's pool directory
// is beta's (its mark lists beta's volumes only), the lab's one vbmcd
// answers for the nodes of both hosts, a namespace on alpha's baremetal
// bridge pings one on beta's over the VXLAN link, `net check` and `status`
// on the hub report both hosts clean, a VXLAN link deleted on beta is
// reported by the hub's `net check` and recreated by its `net repair`, and
// `labctl down` on the hub leaves nothing of the lab on either host: no
// domain, libvirt network, pool, link, nor directory on beta.
func TestMultiHostUpDown(t *testing.T) {
	dir := testenv.QemuDir(t)
	ua := virttest.NewUnderlay(t, "alpha", 0)
	ub := virttest.NewUnderlay(t, "beta", 1, dir)
	cfg := labFile(t, dir, "mhlab", 18790)
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	exec, _ := json.Marshal(ub.Exec())
	f.WriteString("hosts:\n- {name: alpha, libvirtURI: '" + ua.URI + "', underlay: " + ua.Addr + "}\n" +
		"- {name: beta, libvirtURI: '" + ub.URI + "', underlay: " + ub.Addr + ", exec: " + string(exec) +
		", labctl: " + testenv.Binary(t, "labctl") + "}\n")
	f.Close()
	alpha := []string{"--profile", "tiny", "-f", cfg, "--netns", ua.Netns, "--vbmcd", testenv.Binary(t, "vbmcd")}
	onBeta := func(args ...string) (string, error) {
		out, err := osexec.Command(ub.Exec()[0], append(ub.Exec()[1:], args...)...).CombinedOutput()
		return string(out), err
	}

	t.Cleanup(func() { _, _ = labctlRun(t, append([]string{"down"}, alpha...)...) })
	out, err := labctlRun(t, append([]string{"up", "--until", "bmcs"}, alpha...)...)
	if err != nil || !strings.Contains(out, "✓ hosts") || !strings.Contains(out, "✓ nodes") || !strings.Contains(out, "✓ bmcs") {
		t.Fatalf("up --until bmcs: %v\n%s", err, out)
	}
	if !strings.Contains(strings.Join(strings.Fields(out), " "), "mhlab-master-1 beta master Off") {
		t.Errorf("up's node table does not show mhlab-master-1 on beta, off:\n%s", out)
	}
	// tiny: 3 masters, 2 workers, round-robin from the hub.
	want := map[string][]string{
		ua.URI: {"mhlab-master-0", "mhlab-master-2", "mhlab-worker-1"},
		ub.URI: {"mhlab-master-1", "mhlab-worker-0"},
	}
	for uri, names := range want {
		if got := marked(t, uri, "domain"); !slices.Equal(got, names) {
			t.Errorf("%s has the lab's domains %v, want %v", uri, got, names)
		}
	}
	// beta's pool directory and serial logs' directory are beta's own.
	mark := filepath.Join(dir, ".bmlab", "disks", labvirt.PoolMarkFile)
	if m, err := onBeta("cat", mark); err != nil || !strings.Contains(m, "mhlab-master-1") || strings.Contains(m, "mhlab-master-0") {
		t.Errorf("beta's pool mark %s = %v:\n%s\nwant beta's volumes only", mark, err, m)
	}
	if m, err := os.ReadFile(mark); err != nil || strings.Contains(string(m), "mhlab-master-1") {
		t.Errorf("alpha's pool mark = %v:\n%s\nwant alpha's volumes only", err, m)
	}
	if ls, err := onBeta("ls", filepath.Join(dir, ".bmlab", "logs")); err != nil {
		t.Errorf("beta has no serial logs' directory: %v\n%s", err, ls)
	}

	// A "machine" on each host's baremetal bridge.
	clientA := netnstest.Machine(t, ua.Netns, "baremetal", "nodea", "10.255.0.1/24")
	netnstest.Machine(t, ub.Netns, "baremetal", "nodeb", "10.255.0.2/24")
	pingB := func() error { return netnstest.Ping(t, clientA, "10.255.0.2") }
	if err := pingB(); err != nil {
		t.Fatalf("a node on alpha's baremetal does not reach one on beta's: %v", err)
	}

	check := append([]string{"net", "check", "--host", "alpha"}, alpha[:6]...)
	if out, err := labctlRun(t, check...); err != nil || !strings.Contains(out, "here and on beta") {
		t.Errorf("net check on the hub: %v\n%s", err, out)
	}
	if out, err := labctlRun(t, append([]string{"status"}, alpha...)...); err != nil || !strings.Contains(out, "host beta: network in sync") {
		t.Errorf("status: %v\n%s", err, out)
	}

	netnstest.IP(t, "-n", ub.Netns, "link", "del", "vxb-alpha")
	out, err = labctlRun(t, append(check, "-o", "json")...)
	var rep struct {
		Differences []struct{ Object, Kind string }
	}
	if jerr := json.Unmarshal([]byte(out), &rep); err == nil || jerr != nil || len(rep.Differences) != 1 ||
		rep.Differences[0].Object != "beta: vxb-alpha" || rep.Differences[0].Kind != "missing" {
		t.Fatalf("net check on the hub after deleting beta's vxb-alpha = %v, %+v:\n%s", err, rep, out)
	}
	if err := pingB(); err == nil {
		t.Fatalf("the ping crossed with the VXLAN link deleted: something else joins the bridges")
	}
	repair := append([]string{"net", "repair", "--host", "alpha"}, alpha[:6]...)
	if out, err := labctlRun(t, repair...); err != nil || !strings.Contains(out, "✓ host beta: network in sync") {
		t.Fatalf("net repair on the hub: %v\n%s", err, out)
	}
	if err := pingB(); err != nil {
		t.Fatalf("after the repair: %v", err)
	}
	netnstest.IP(t, "-n", ua.Netns, "link", "del", "nodea")
	netnstest.IP(t, "-n", ub.Netns, "link", "del", "nodeb")

	if out, err = labctlRun(t, append([]string{"down"}, alpha...)...); err != nil || !strings.Contains(out, "✓ remove hosts") {
		t.Fatalf("down: %v\n%s", err, out)
	}
	for _, uri := range []string{ua.URI, ub.URI} {
		for _, kind := range []string{"domain", "network", "pool"} {
			if left := marked(t, uri, kind); len(left) > 0 {
				t.Errorf("after down, %s still has the lab's %ss %v", uri, kind, left)
			}
		}
		if pools := allPools(t, uri); slices.Contains(pools, "mhlab-disks") {
			t.Errorf("after down, %s still has pool mhlab-disks", uri)
		}
	}
	for _, ns := range []string{ua.Netns, ub.Netns} {
		h, err := netplumb.OpenNamespace(ns)
		if err != nil {
			t.Fatal(err)
		}
		left, err := netplumb.New(h, "mhlab", nil).Owned()
		h.Close()
		if err != nil || len(left) > 0 {
			t.Errorf("after down, namespace %s still has the lab's links %v (%v)", ns, left, err)
		}
	}
	if ls, err := onBeta("ls", "-A", dir); err != nil || strings.TrimSpace(ls) != "" {
		t.Errorf("after down, beta's lab directory holds %q (%v), want nothing", ls, err)
	}
}

// allPools lists every storage pool on the libvirt at uri.
func allPools(t *testing.T, uri string) []string {
	t.Helper()
	l := connect(t, uri)
	defer l.Disconnect()
	pools, _, err := l.ConnectListAllStoragePools(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pools {
		names = append(names, p.Name)
	}
	return names
}

// marked lists, sorted, the objects of a kind that bear lab mhlab's mark on
// the libvirt at uri, asking it directly.
func marked(t *testing.T, uri, kind string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := labvirt.Dial(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var names []string
	switch kind {
	case "domain":
		names, err = c.MarkedDomains(ctx, "mhlab")
	case "network":
		names, err = c.MarkedNetworks(ctx, "mhlab")
	case "pool":
		names, _, err = c.MarkedPools(ctx, "mhlab")
	}
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

func virtDialer(uri string) (*dialers.Remote, string, error) {
	host := strings.TrimSuffix(strings.TrimPrefix(uri, "qemu+tcp://"), "/system")
	return dialers.NewRemote(host, dialers.WithRemoteTimeout(5*time.Second)), host, nil
}

// connect connects to the libvirt at uri.
func connect(t *testing.T, uri string) *libvirt.Libvirt {
	t.Helper()
	d, _, err := virtDialer(uri)
	if err != nil {
		t.Fatal(err)
	}
	l := libvirt.NewWithDialer(d)
	if err := l.ConnectToURI(libvirt.QEMUSystem); err != nil {
		t.Fatalf("connect to %s: %v", uri, err)
	}
	return l
}
