package up_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/digitalocean/go-libvirt"
	"github.com/digitalocean/go-libvirt/socket/dialers"

	"github.com/bmlab/bmlab/internal/labvirt"
	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virt/virttest"
)

// TestMultiHostUpDown: a lab spread over two libvirt hosts (each a libvirtd
// of its own in a network namespace, on one underlay segment, reached over
// qemu+tcp). After `labctl net repair --host beta` on beta and `labctl up
// --until bmcs` on the hub (alpha), each host's libvirt has exactly the
// nodes the plan placed there, the lab's one vbmcd (in the hub's namespace)
// answers for the nodes of both hosts (the bmcs step checks every node's
// System URL), `net check` is clean on both hosts, and `labctl down` (then
// `net down --host beta` for beta's links) leaves nothing of the lab on
// either host.
func TestMultiHostUpDown(t *testing.T) {
	ua := virttest.NewUnderlay(t, "alpha", 0)
	ub := virttest.NewUnderlay(t, "beta", 1)
	dir := testenv.QemuDir(t)
	cfg := labFile(t, dir, "mhlab", 18790)
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("hosts:\n- {name: alpha, libvirtURI: '" + ua.URI + "', underlay: " + ua.Addr + "}\n" +
		"- {name: beta, libvirtURI: '" + ub.URI + "', underlay: " + ub.Addr + "}\n")
	f.Close()
	alpha := []string{"-f", cfg, "--netns", ua.Netns, "--vbmcd", testenv.Binary(t, "vbmcd")}
	beta := []string{"-f", cfg, "--netns", ub.Netns}

	if out, err := labctlRun(t, append([]string{"net", "repair", "--host", "beta"}, beta...)...); err != nil {
		t.Fatalf("net repair --host beta: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = labctlRun(t, append([]string{"down", "--profile", "tiny"}, alpha...)...) })
	out, err := labctlRun(t, append([]string{"up", "--profile", "tiny", "--until", "bmcs"}, alpha...)...)
	if err != nil || !strings.Contains(out, "✓ nodes") || !strings.Contains(out, "✓ bmcs") {
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
	for _, c := range [][]string{append([]string{"net", "check", "--host", "alpha"}, alpha[:4]...), append([]string{"net", "check", "--host", "beta"}, beta...)} {
		if out, err := labctlRun(t, c...); err != nil {
			t.Errorf("%v: %v\n%s", c, err, out)
		}
	}

	if out, err = labctlRun(t, append([]string{"down", "--profile", "tiny"}, alpha...)...); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	if out, err := labctlRun(t, append([]string{"net", "down", "--host", "beta"}, beta...)...); err != nil {
		t.Fatalf("net down --host beta: %v\n%s", err, out)
	}
	for _, uri := range []string{ua.URI, ub.URI} {
		for _, kind := range []string{"domain", "network", "pool"} {
			if left := marked(t, uri, kind); len(left) > 0 {
				t.Errorf("after down, %s still has the lab's %ss %v", uri, kind, left)
			}
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
}

// marked lists, sorted, the objects of a kind that bear lab mhlab's mark on
// the libvirt at uri, asking it directly.
func marked(t *testing.T, uri, kind string) []string {
	t.Helper()
	d, _, err := virtDialer(uri)
	if err != nil {
		t.Fatal(err)
	}
	l := libvirt.NewWithDialer(d)
	if err := l.ConnectToURI(libvirt.QEMUSystem); err != nil {
		t.Fatalf("connect to %s: %v", uri, err)
	}
	defer l.Disconnect()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var names []string
	switch kind {
	case "domain":
		names, err = labvirt.MarkedDomains(ctx, l, "mhlab")
	case "network":
		names, err = labvirt.MarkedNetworks(ctx, l, "mhlab")
	case "pool":
		names, _, err = labvirt.MarkedPools(ctx, l, "mhlab")
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
