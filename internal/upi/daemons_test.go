package upi

// The generated configurations run in the real daemons (Debian's keepalived
// and haproxy, coredns built from its module by hack/build-coredns.sh), in
// throwaway network namespaces that stand for the nodes on one bridge.

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/netplumb/netnstest"
	"github.com/bmlab/bmlab/internal/testenv"
)

// segment is a bridge in a namespace of its own and the nodes plugged
// into it, each a namespace with eth0 at its IPs (IPv4 /24, IPv6 /64).
type segment struct {
	t      *testing.T
	suffix string
	sw     string
}

func newSegment(t *testing.T) *segment {
	t.Helper()
	testenv.Root(t)
	s := &segment{t: t, suffix: netnstest.Rand(3)}
	s.sw = "upsw-" + s.suffix
	s.ip("netns", "add", s.sw)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", s.sw).Run() })
	// No multicast snooping: IPv6 neighbour discovery reaches every port
	// whatever MLD reports the bridge has seen.
	s.ip("-n", s.sw, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0")
	s.ip("-n", s.sw, "link", "set", "br0", "up")
	return s
}

func (s *segment) ip(args ...string) {
	s.t.Helper()
	if out, err := exec.Command(testenv.Command(s.t, "ip"), args...).CombinedOutput(); err != nil {
		s.t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// node makes namespace name-<suffix> with eth0 at ips on the bridge and
// returns the namespace's name. With an IPv6 address, IPv6 is on in the
// namespace (whatever the host's default) and the node is returned once
// duplicate address detection is over: its addresses are added nodad,
// and eth0's link-local address is no longer tentative.
func (s *segment) node(name string, ips ...string) string {
	s.t.Helper()
	ns := name + "-" + s.suffix
	s.ip("netns", "add", ns)
	s.t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	v6 := slices.ContainsFunc(ips, func(ip string) bool { return netip.MustParseAddr(ip).Is6() })
	if v6 {
		s.sysctl(ns, "net.ipv6.conf.all.disable_ipv6=0", "net.ipv6.conf.default.disable_ipv6=0", "net.ipv6.conf.lo.disable_ipv6=0")
	}
	peer := "p" + strings.ReplaceAll(name, "-", "")
	if len(peer) > 15 {
		peer = peer[:15]
	}
	s.ip("-n", s.sw, "link", "add", peer, "type", "veth", "peer", "name", "eth0", "netns", ns)
	s.ip("-n", s.sw, "link", "set", peer, "master", "br0", "up")
	s.ip("-n", ns, "link", "set", "lo", "up")
	if v6 {
		s.sysctl(ns, "net.ipv6.conf.eth0.disable_ipv6=0")
	}
	s.ip("-n", ns, "link", "set", "eth0", "up")
	for _, ip := range ips {
		if netip.MustParseAddr(ip).Is6() {
			s.ip("-n", ns, "addr", "add", ip+"/64", "dev", "eth0", "nodad")
		} else {
			s.ip("-n", ns, "addr", "add", ip+"/24", "dev", "eth0")
		}
	}
	if v6 && !testenv.WaitFor(10*time.Second, func() bool {
		out, err := exec.Command("ip", "-n", ns, "-6", "addr", "show", "dev", "eth0", "tentative").Output()
		return err == nil && len(bytes.TrimSpace(out)) == 0
	}) {
		s.t.Fatalf("%s: eth0 still has tentative IPv6 addresses after 10 s", ns)
	}
	return ns
}

// sysctl sets kernel parameters in namespace ns.
func (s *segment) sysctl(ns string, settings ...string) {
	s.t.Helper()
	args := append([]string{"netns", "exec", ns, testenv.Command(s.t, "sysctl"), "-q", "-w"}, settings...)
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		s.t.Fatalf("sysctl in %s: %v\n%s", ns, err, out)
	}
}

// addrs are every address of node n, its first family's first.
func addrs(n Node) []string {
	out := []string{n.IP.String()}
	if n.SecondaryIP.IsValid() {
		out = append(out, n.SecondaryIP.String())
	}
	return out
}

// daemon is a running daemon and what it has written so far.
type daemon struct {
	cmd  *exec.Cmd
	out  testenv.Buffer
	once sync.Once
}

// stop ends the daemon as a pod's stop does (SIGTERM, then SIGKILL after
// 3 s) and waits for it; again is a no-op.
func (d *daemon) stop() {
	d.once.Do(func() {
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = d.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			_ = d.cmd.Process.Kill()
			<-done
		}
	})
}

// said reports whether the daemon's output has every one of lines in it.
func (d *daemon) said(lines ...string) bool {
	out := d.out.String()
	for _, l := range lines {
		if !strings.Contains(out, l) {
			return false
		}
	}
	return true
}

// run starts a daemon in a namespace and stops it at the end of the test.
func run(t *testing.T, ns string, name string, args ...string) *daemon {
	t.Helper()
	d := &daemon{cmd: exec.Command("ip", append([]string{"netns", "exec", ns, name}, args...)...)}
	cmd := d.cmd
	cmd.Stdout, cmd.Stderr = &d.out, &d.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.stop()
		if t.Failed() {
			t.Logf("%s in %s said:\n%s", name, ns, d.out.String())
		}
	})
	return d
}

// holds reports whether ns has vip on eth0, as keepalived adds it (/32,
// /128).
func holds(ns, vip string) bool {
	a := netip.MustParseAddr(vip)
	family := "-4"
	if a.Is6() {
		family = "-6"
	}
	out, err := exec.Command("ip", "-n", ns, family, "-o", "addr", "show", "dev", "eth0").Output()
	return err == nil && strings.Contains(string(out), " "+netip.PrefixFrom(a, a.BitLen()).String()+" ")
}

// readyz serves the API's readyz over HTTPS on localhost:6443 in ns; the
// returned func stops it.
func readyz(t *testing.T, ns string) func() {
	t.Helper()
	ln, err := netplumb.ListenIn(ns, "tcp", "127.0.0.1:6443")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))
	srv.Listener = ln
	srv.StartTLS()
	var once sync.Once
	stop := func() { once.Do(srv.Close) }
	t.Cleanup(stop)
	return stop
}

// routerHealth serves a router's /healthz/ready on RouterHealthPort of
// the loopback address of c's first family ([::1] for an IPv6-only
// cluster) in ns: 200 while ready holds true, else 503.
func routerHealth(t *testing.T, c Cluster, ns string, ready *atomic.Bool) {
	t.Helper()
	ln, err := netplumb.ListenIn(ns, "tcp", netip.AddrPortFrom(loopback(c), RouterHealthPort).String())
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			rw.WriteHeader(http.StatusServiceUnavailable)
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
}

// keepalived renders n's configuration on its namespace with the
// generated render script, as the pod's init container does, and runs it.
func keepalived(t *testing.T, c Cluster, n Node, ns string) *daemon {
	t.Helper()
	files, err := StaticPodFiles(c, n)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range files {
		if strings.Contains(f.Path, "/keepalived/") {
			if err := os.WriteFile(filepath.Join(dir, filepath.Base(f.Path)), f.Contents, os.FileMode(f.Mode)); err != nil {
				t.Fatal(err)
			}
		}
	}
	conf := filepath.Join(dir, "keepalived.conf")
	if out, err := exec.Command("ip", "netns", "exec", ns, "sh", filepath.Join(dir, "render.sh"), filepath.Join(dir, "keepalived.conf.tmpl"), conf).CombinedOutput(); err != nil {
		t.Fatalf("render.sh on %s: %v\n%s", n.Name, err, out)
	}
	b, _ := os.ReadFile(conf)
	if !strings.Contains(string(b), "interface eth0") || strings.Contains(string(b), interfaceMark) {
		t.Fatalf("render.sh did not find eth0 for %s:\n%s", n.IP, b)
	}
	return run(t, ns, testenv.Command(t, "keepalived"), "--dont-fork", "--log-console", "--vrrp", "-f", conf,
		"--pid="+filepath.Join(dir, "k.pid"), "--vrrp_pid="+filepath.Join(dir, "v.pid"), "--checkers_pid="+filepath.Join(dir, "c.pid"))
}

// TestKeepalivedMovesTheAPIVIP: the API VIP lands on the bootstrap; when
// the bootstrap dies it moves within seconds to the master whose API is
// ready, never to the one whose readyz fails (although that one would win
// on address), and it goes to that one as soon as its API is ready
// (keepalivedMovesVIPs, which TestKeepalivedMovesIPv6VIPs runs for IPv6).
func TestKeepalivedMovesTheAPIVIP(t *testing.T) {
	testenv.Integration(t)
	testenv.Command(t, "keepalived")
	testenv.Command(t, "curl")
	keepalivedMovesVIPs(t, podCluster(0))
}

// TestKeepalivedMovesTheIngressVIP: the ingress VIP is tracked as the API
// VIP is. A compact cluster's routers run on the masters: the VIP is on a
// master whose router is ready, leaves a master whose router goes
// unready (for the other, ready one), is held by nobody while no router
// is ready, and comes back when one is.
func TestKeepalivedMovesTheIngressVIP(t *testing.T) {
	testenv.Integration(t)
	testenv.Command(t, "keepalived")
	testenv.Command(t, "curl")
	s := newSegment(t)
	c := podCluster(0)
	c.Nodes = c.Nodes[1:3] // master-0 .21, master-1 .22
	m0, m1 := s.node("ocp-master-0", "10.0.0.21"), s.node("ocp-master-1", "10.0.0.22")
	var r0, r1 atomic.Bool
	r0.Store(true)
	routerHealth(t, c, m0, &r0)
	routerHealth(t, c, m1, &r1) // master-1's router is not ready yet
	keepalived(t, c, c.Nodes[0], m0)
	keepalived(t, c, c.Nodes[1], m1)
	vip := c.IngressVIP.String()
	// master-1 would win on address; its router keeps it out.
	if !testenv.WaitFor(15*time.Second, func() bool { return holds(m0, vip) }) {
		t.Fatal("the ingress VIP never landed on master-0, whose router is ready")
	}
	if testenv.WaitFor(4*time.Second, func() bool { return holds(m1, vip) }) {
		t.Fatal("master-1 holds the ingress VIP with its router unready")
	}
	// master-1's router becomes ready, master-0's dies: the VIP moves.
	r1.Store(true)
	r0.Store(false)
	dead := time.Now()
	if !testenv.WaitFor(15*time.Second, func() bool { return holds(m1, vip) && !holds(m0, vip) }) {
		t.Fatal("the ingress VIP stayed with master-0, whose router is dead")
	}
	t.Logf("ingress VIP moved %s after master-0's router died", time.Since(dead).Round(100*time.Millisecond))
	// No router ready: nobody holds it; one ready again: it comes back.
	r1.Store(false)
	if !testenv.WaitFor(10*time.Second, func() bool { return !holds(m0, vip) && !holds(m1, vip) }) {
		t.Fatal("a master holds the ingress VIP with no router ready")
	}
	r0.Store(true)
	if !testenv.WaitFor(15*time.Second, func() bool { return holds(m0, vip) }) {
		t.Error("master-0 did not take the ingress VIP back once its router was ready")
	}
}

// TestKeepalivedMovesIPv6VIPs: an IPv6-only cluster's API VIP, and both
// API VIPs of a dual-stack cluster (IPv4 and IPv6 instances with the same
// router IDs on one interface), move as TestKeepalivedMovesTheAPIVIP's
// does (keepalivedMovesVIPs).
func TestKeepalivedMovesIPv6VIPs(t *testing.T) {
	testenv.Integration(t)
	testenv.Command(t, "keepalived")
	testenv.Command(t, "curl")
	t.Run("v6", func(t *testing.T) { keepalivedMovesVIPs(t, podCluster6(0)) })
	t.Run("dual", func(t *testing.T) { keepalivedMovesVIPs(t, podClusterDual(0)) })
}

// keepalivedMovesVIPs: the cluster's API VIPs (one per family) land on
// the bootstrap, and the masters stay out while it is there; they move
// to the master whose API is ready when the bootstrap dies silently,
// away from it when its check fails (the unready master never takes
// them), to the other master once that one's API is ready, and back when
// that one's keepalived stops. The ingress VIPs are on a master
// meanwhile.
func keepalivedMovesVIPs(t *testing.T, c Cluster) {
	s := newSegment(t)
	c.Nodes = c.Nodes[:3] // bootstrap .20, master-0 .21, master-1 .22
	ns := map[string]string{}
	for _, n := range c.Nodes {
		ns[n.Name] = s.node(n.Name, addrs(n)...)
	}
	boot, m0, m1 := ns["ocp-bootstrap"], ns["ocp-master-0"], ns["ocp-master-1"]
	var api, ingress, apiBackup []string
	for _, st := range stacks(c) {
		api = append(api, st.APIVIP.String())
		ingress = append(ingress, st.IngressVIP.String())
		instance := "_api"
		if st.secondary {
			instance += "_v6"
		}
		apiBackup = append(apiBackup, instance+") Entering BACKUP STATE")
	}
	all := func(ns string, vips []string) bool {
		for _, v := range vips {
			if !holds(ns, v) {
				return false
			}
		}
		return true
	}
	anyOf := func(ns string, vips []string) bool {
		for _, v := range vips {
			if holds(ns, v) {
				return true
			}
		}
		return false
	}
	readyz(t, boot)
	stopM0 := readyz(t, m0)
	// master-1's API is not ready: nothing listens on its 6443. Both
	// masters' routers are ready (the ingress VIP's check).
	var routersReady atomic.Bool
	routersReady.Store(true)
	routerHealth(t, c, m0, &routersReady)
	routerHealth(t, c, m1, &routersReady)
	keepalived(t, c, c.Nodes[0], boot)
	kaM0 := keepalived(t, c, c.Nodes[1], m0)
	kaM1 := keepalived(t, c, c.Nodes[2], m1)

	if !testenv.WaitFor(20*time.Second, func() bool { return all(boot, api) }) {
		t.Fatalf("the API VIPs %v never all landed on the bootstrap", api)
	}
	// master-0 leaves FAULT (init_fail) for BACKUP once its check has
	// passed twice; from then on it would take a VIP if it stopped hearing
	// the bootstrap's adverts for Master_Down_Interval, 3 advert_int plus
	// a skew under 1 s (RFC 5798 §6.1): watch that long.
	if !testenv.WaitFor(15*time.Second, func() bool { return kaM0.said(apiBackup...) }) {
		t.Fatalf("master-0's API instances never all entered BACKUP (want %q in its log)", apiBackup)
	}
	if testenv.WaitFor(4*time.Second, func() bool { return anyOf(m0, api) || anyOf(m1, api) }) {
		t.Fatal("a master holds an API VIP beside the bootstrap")
	}
	if !testenv.WaitFor(20*time.Second, func() bool {
		for _, v := range ingress {
			if !holds(m0, v) && !holds(m1, v) {
				return false
			}
		}
		return true
	}) || anyOf(boot, ingress) {
		t.Errorf("the ingress VIPs %v are not each on a master (or one is on the bootstrap)", ingress)
	}

	// The bootstrap dies silently; master-1's API is not ready.
	s.ip("-n", boot, "link", "set", "eth0", "down")
	gone := time.Now()
	var m1Held bool
	if !testenv.WaitFor(20*time.Second, func() bool {
		m1Held = m1Held || anyOf(m1, api)
		return all(m0, api)
	}) {
		t.Fatalf("the API VIPs %v did not all move to the ready master-0", api)
	}
	t.Logf("API VIPs %v moved to the ready master %s after the bootstrap died", api, time.Since(gone).Round(100*time.Millisecond))
	if m1Held {
		t.Error("master-1, whose readyz fails, held an API VIP")
	}

	// master-0's check fails: it lets them go, and the unready master-1
	// does not take them.
	stopM0()
	if !testenv.WaitFor(10*time.Second, func() bool { return !anyOf(m0, api) }) {
		t.Fatal("master-0 kept an API VIP with its readyz failing")
	}
	if testenv.WaitFor(5*time.Second, func() bool { return anyOf(m1, api) }) {
		t.Fatal("the unready master-1 took an API VIP")
	}
	// master-1's API becomes ready: it takes them.
	readyz(t, m1)
	if !testenv.WaitFor(15*time.Second, func() bool { return all(m1, api) }) {
		t.Fatal("master-1 did not take the API VIPs once its API was ready")
	}
	// master-0's API is ready again and master-1's keepalived stops (its
	// pod goes): the VIPs come to master-0.
	readyz(t, m0)
	if testenv.WaitFor(3*time.Second, func() bool { return anyOf(m0, api) }) {
		t.Fatal("master-0 took an API VIP from master-1, which still holds it with the same priority")
	}
	stopped := time.Now()
	kaM1.stop()
	if !testenv.WaitFor(15*time.Second, func() bool { return all(m0, api) && !anyOf(m1, api) }) {
		t.Fatal("the API VIPs did not move to master-0 when master-1's keepalived stopped")
	}
	t.Logf("API VIPs moved to master-0 %s after master-1's keepalived stopped", time.Since(stopped).Round(100*time.Millisecond))
}

// TestHAProxyBalances: haproxy accepts the generated configuration and
// balances the ingress VIP's 80 and 443 to both workers; once a worker's
// router reports not ready, it gets nothing.
func TestHAProxyBalances(t *testing.T) {
	testenv.Integration(t)
	haproxyBalances(t, podCluster(2))
}

// TestHAProxyBalancesIPv6: the same with IPv6: haproxy on [::]:80 and
// [::]:443 balances an IPv6-only cluster's ingress VIP to the workers'
// IPv6 addresses ([addr]:port), a dual-stack cluster's IPv4 and IPv6
// ingress VIPs both to the workers, and answers keepalived's health URL
// on [::1] (IPv6-only).
func TestHAProxyBalancesIPv6(t *testing.T) {
	testenv.Integration(t)
	t.Run("v6", func(t *testing.T) { haproxyBalances(t, podCluster6(2)) })
	t.Run("dual", func(t *testing.T) { haproxyBalances(t, podClusterDual(2)) })
}

// haproxyBalances runs HAProxyConf(c) on master-0 with the node's sysctl
// file applied, as a master that does not hold the ingress VIPs yet; then
// master-0 takes every family's ingress VIP (keepalived's part, by hand).
// The workers' routers (HTTP servers answering their name) and their
// health endpoints are in namespaces; a client asks every ingress VIP.
func haproxyBalances(t *testing.T, c Cluster) {
	haproxy := testenv.Command(t, "haproxy")
	testenv.Command(t, "curl")
	s := newSegment(t)
	var vips, clientIPs []string
	for _, st := range stacks(c) {
		vips = append(vips, st.ingressVIP().String())
		client := netip.MustParseAddr("10.0.0.99")
		if st.APIVIP.Is6() {
			client = v6(client)
		}
		clientIPs = append(clientIPs, client.String())
	}
	m0 := s.node("ocp-master-0", addrs(c.Nodes[1])...)
	client := s.node("client", clientIPs...)
	files, err := StaticPodFiles(c, c.Nodes[1])
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Path == SysctlFile {
			p := filepath.Join(t.TempDir(), "sysctl.conf")
			if err := os.WriteFile(p, f.Contents, 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command("ip", "netns", "exec", m0, testenv.Command(t, "sysctl"), "-q", "-p", p).CombinedOutput(); err != nil {
				t.Fatalf("sysctl -p %s: %v\n%s", SysctlFile, err, out)
			}
		}
	}
	var ready sync.Map // worker name → bool
	for _, w := range c.Nodes[4:] {
		wns := s.node(w.Name, addrs(w)...)
		ready.Store(w.Name, true)
		hln, err := netplumb.ListenIn(wns, "tcp", net.JoinHostPort(w.IP.String(), "1936"))
		if err != nil {
			t.Fatal(err)
		}
		wname := w.Name
		health := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
			if ok, _ := ready.Load(wname); ok != true {
				rw.WriteHeader(http.StatusServiceUnavailable)
			}
		})}
		go func() { _ = health.Serve(hln) }()
		t.Cleanup(func() { health.Close() })
		for _, port := range []string{"80", "443"} {
			ln, err := netplumb.ListenIn(wns, "tcp", net.JoinHostPort(w.IP.String(), port))
			if err != nil {
				t.Fatal(err)
			}
			name := w.Name
			srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) { io.WriteString(rw, name) })}
			go func() { _ = srv.Serve(ln) }()
			t.Cleanup(func() { srv.Close() })
		}
	}
	conf := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(conf, []byte(HAProxyConf(c)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(haproxy, "-c", "-f", conf).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c rejects the configuration: %v\n%s", err, out)
	}
	hap := run(t, m0, haproxy, "-db", "-f", conf)
	// haproxy is up (it answers its health frontend, 503 with no
	// backend checked yet or 200) before master-0 holds the VIPs.
	if !testenv.WaitFor(10*time.Second, func() bool {
		out, _ := exec.Command("ip", "netns", "exec", m0, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "1", IngressHealthURL(c)).Output()
		return string(out) == "200" || string(out) == "503"
	}) {
		t.Fatalf("haproxy does not run on a master without the ingress VIPs")
	}
	for _, v := range vips {
		a := netip.MustParseAddr(v)
		s.ip("-n", m0, "addr", "add", netip.PrefixFrom(a, a.BitLen()).String(), "dev", "eth0", "nodad")
	}
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: netplumb.DialContextIn(client), DisableKeepAlives: true}}
	for _, vip := range vips {
		for _, port := range []string{"80", "443"} {
			seen := map[string]int{}
			ok := testenv.WaitFor(15*time.Second, func() bool {
				resp, err := hc.Get("http://" + net.JoinHostPort(vip, port) + "/")
				if err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					seen[string(b)]++
				}
				return seen["ocp-worker-0"] > 1 && seen["ocp-worker-1"] > 1
			})
			if !ok {
				t.Errorf("%s port %s: answers %v, want both workers", vip, port, seen)
			}
		}
	}
	// worker-1's router goes unready: once haproxy's check (every 2 s)
	// marks it DOWN and haproxy says so, every request goes to worker-0.
	ready.Store("ocp-worker-1", false)
	down := []string{"ingress-80/ocp-worker-1 is DOWN", "ingress-443/ocp-worker-1 is DOWN"}
	if !testenv.WaitFor(20*time.Second, func() bool { return hap.said(down...) }) {
		t.Fatalf("haproxy never said %q", down)
	}
	for _, vip := range vips {
		seen := map[string]int{}
		for range 10 {
			resp, err := hc.Get("http://" + net.JoinHostPort(vip, "80") + "/")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			seen[string(b)]++
		}
		if seen["ocp-worker-0"] != 10 {
			t.Errorf("%s with worker-1's router unready: answers %v, want all from worker-0", vip, seen)
		}
	}
	// The health endpoint keepalived checks (IngressHealthURL) is ready
	// while one router is, and fails when none is.
	health := func() int {
		out, _ := exec.Command("ip", "netns", "exec", m0, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "1", IngressHealthURL(c)).Output()
		code, _ := strconv.Atoi(string(out))
		return code
	}
	if got := health(); got != http.StatusOK {
		t.Errorf("%s with worker-0's router ready: %d, want 200", IngressHealthURL(c), got)
	}
	ready.Store("ocp-worker-0", false)
	if !testenv.WaitFor(20*time.Second, func() bool { return health() == http.StatusServiceUnavailable }) {
		t.Errorf("%s with no router ready: %d, want 503", IngressHealthURL(c), health())
	}
}

// coredns is the binary hack/build-coredns.sh builds from its module.
func coredns(t *testing.T) string {
	t.Helper()
	p := filepath.Join(testenv.RepoRoot(), "_out", "tools", "coredns")
	testenv.Require(t, fileExists(p), "coredns at "+p+" (hack/build-coredns.sh builds it)")
	return p
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// corednsWithUpstream runs coredns with c's generated Corefile in the
// namespace of c's node 1 (master-0, on a segment of its own), and its
// upstream (c.Upstream[0], standing for the lab network's DNS): another
// coredns that knows only only-upstream.example.test (10.9.9.9 and
// fd00:9::9). It returns the node and its namespace.
func corednsWithUpstream(t *testing.T, bin string, c Cluster) (Node, string) {
	t.Helper()
	s := newSegment(t)
	up := s.node("upstream", c.Upstream[0].String())
	upConf := filepath.Join(t.TempDir(), "Corefile")
	if err := os.WriteFile(upConf, []byte(".:53 {\n    hosts {\n        10.9.9.9 only-upstream.example.test\n        fd00:9::9 only-upstream.example.test\n    }\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, up, bin, "-conf", upConf)
	node := c.Nodes[1]
	nns := s.node(node.Name, addrs(node)...)
	conf := filepath.Join(t.TempDir(), "Corefile")
	if err := os.WriteFile(conf, []byte(Corefile(c)), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, nns, bin, "-conf", conf)
	return node, nns
}

// TestCorednsAnswers: the generated Corefile, in coredns v1.15.0, answers
// api, api-int, *.apps and the node names, and forwards the rest to the
// upstream (another coredns standing for the lab network's DNS).
func TestCorednsAnswers(t *testing.T) {
	testenv.Integration(t)
	bin := coredns(t)
	dig := testenv.Command(t, "dig")
	c := podCluster(1)
	node, nns := corednsWithUpstream(t, bin, c)
	query := func(name string) string {
		out, _ := exec.CommandContext(context.Background(), "ip", "netns", "exec", nns, dig, "+short", "+time=1", "+tries=1", "@"+node.IP.String(), name, "A").Output()
		return strings.TrimSpace(string(out))
	}
	for name, want := range map[string]string{
		"api.ocp.lab.test":                            "10.0.0.5",
		"api-int.ocp.lab.test":                        "10.0.0.5",
		"console-openshift-console.apps.ocp.lab.test": "10.0.0.4",
		"a.b.apps.ocp.lab.test":                       "10.0.0.4",
		"ocp-master-1":                                "10.0.0.22",
		"ocp-worker-0.ocp.lab.test":                   "10.0.0.24",
		"only-upstream.example.test":                  "10.9.9.9",
	} {
		var got string
		testenv.WaitFor(10*time.Second, func() bool { got = query(name); return got == want })
		if got != want {
			t.Errorf("%s: got %q, want %s", name, got, want)
		}
	}
	if got := query("nothing.apps.other.test"); got != "" {
		t.Errorf("a name nobody knows answered %q", got)
	}
}

// TestCorednsAnswersIPv6: in an IPv6-only cluster the generated Corefile
// answers AAAA for api, api-int, *.apps and the node names and an empty
// NOERROR for their A; in a dual-stack one it answers both, over either
// family; the rest goes to the upstream (IPv6 for the IPv6-only cluster).
func TestCorednsAnswersIPv6(t *testing.T) {
	testenv.Integration(t)
	bin := coredns(t)
	dig := testenv.Command(t, "dig")
	for _, tt := range []struct {
		name string
		c    Cluster
	}{{"v6", podCluster6(1)}, {"dual", podClusterDual(1)}} {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.c
			node, nns := corednsWithUpstream(t, bin, c)
			// query asks server for name's records of type rr: the
			// answer's addresses and the response's status.
			query := func(server, name, rr string) (string, string) {
				out, _ := exec.Command("ip", "netns", "exec", nns, dig, "+noall", "+comments", "+answer", "+time=1", "+tries=1", "@"+server, name, rr).Output()
				var answers []string
				status := ""
				for _, l := range strings.Split(string(out), "\n") {
					if _, st, ok := strings.Cut(l, "status: "); ok {
						status, _, _ = strings.Cut(st, ",")
					}
					if f := strings.Fields(l); len(f) == 5 && f[3] == rr {
						answers = append(answers, f[4])
					}
				}
				return strings.Join(answers, " "), status
			}
			dual := isDual(c)
			want := func(v4, v6 string) map[string]string {
				m := map[string]string{"AAAA": v6, "A": ""}
				if dual {
					m["A"] = v4
				}
				return m
			}
			cases := map[string]map[string]string{
				"api.ocp.lab.test":                            want("10.0.0.5", "fd00:10::5"),
				"api-int.ocp.lab.test":                        want("10.0.0.5", "fd00:10::5"),
				"console-openshift-console.apps.ocp.lab.test": want("10.0.0.4", "fd00:10::4"),
				"a.b.apps.ocp.lab.test":                       want("10.0.0.4", "fd00:10::4"),
				"ocp-master-1":                                want("10.0.0.22", "fd00:10::22"),
				"ocp-worker-0.ocp.lab.test":                   want("10.0.0.24", "fd00:10::24"),
				"only-upstream.example.test":                  {"A": "10.9.9.9", "AAAA": "fd00:9::9"},
			}
			for _, server := range addrs(node) {
				for name, byType := range cases {
					for rr, wantAnswer := range byType {
						var got, status string
						testenv.WaitFor(10*time.Second, func() bool {
							got, status = query(server, name, rr)
							return got == wantAnswer && status == "NOERROR"
						})
						if got != wantAnswer || status != "NOERROR" {
							t.Errorf("@%s %s %s: got %q (%s), want %q (NOERROR)", server, name, rr, got, status, wantAnswer)
						}
					}
				}
			}
		})
	}
}
