package vbmcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/bmlab/bmlab/internal/netplumb/netnstest"
	"github.com/bmlab/bmlab/internal/sim"
	"github.com/bmlab/bmlab/internal/testenv"
)

// bmcResult is what testdata/sushy_bmc.py prints.
type bmcResult struct {
	System, Manager, Chassis, Power, Monitor, Error string
}

// sushyBMC runs testdata/sushy_bmc.py against url with TLS verified by ca.
func sushyBMC(t *testing.T, ns, url, user, pass, ca, image string) bmcResult {
	t.Helper()
	args := []string{testenv.Python(t, "sushy"), "testdata/sushy_bmc.py", url, user, pass, ca}
	if image != "" {
		args = append(args, image)
	}
	if ns != "" {
		args = append([]string{"ip", "netns", "exec", ns}, args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = withoutCABundles() // nothing but verify=<CA> decides what is trusted
	b, err := cmd.CombinedOutput()
	var r bmcResult
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if err != nil || json.Unmarshal([]byte(lines[len(lines)-1]), &r) != nil {
		t.Fatalf("sushy_bmc.py %s: %v\n%s", url, err, b)
	}
	return r
}

func withoutCABundles() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REQUESTS_CA_BUNDLE=") && !strings.HasPrefix(kv, "CURL_CA_BUNDLE=") && !strings.HasPrefix(kv, "SSL_CERT_") {
			env = append(env, kv)
		}
	}
	return env
}

// curlSystems GETs /redfish/v1/Systems at addr (https, port 443) with curl
// verifying the certificate against ca, and returns the members.
func curlSystems(t *testing.T, ns, addr, ca, pass string) []string {
	t.Helper()
	args := []string{testenv.Command(t, "curl"), "-sS", "--fail-with-body", "--max-time", "20", "--cacert", ca,
		"-u", "admin:" + pass, "https://" + bracket(addr) + "/redfish/v1/Systems"}
	if ns != "" {
		args = append([]string{"ip", "netns", "exec", ns}, args...)
	}
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("curl https://%s/redfish/v1/Systems: %v\n%s", bracket(addr), err, out)
	}
	var coll struct {
		Members []struct {
			ID string `json:"@odata.id"`
		}
	}
	if err := json.Unmarshal(out, &coll); err != nil {
		t.Fatalf("curl %s: %v\n%s", addr, err, out)
	}
	var ids []string
	for _, m := range coll.Members {
		ids = append(ids, strings.TrimPrefix(m.ID, "/redfish/v1/Systems/"))
	}
	return ids
}

func bracket(a string) string {
	if strings.Contains(a, ":") {
		return "[" + a + "]"
	}
	return a
}

// ipmiPower runs ipmitool against addr at IPMI's own port, 623.
func ipmiPower(t *testing.T, ns, addr, pass string, args ...string) string {
	t.Helper()
	cmd := []string{testenv.Command(t, "ipmitool"), "-I", "lanplus", "-H", addr, "-U", "admin", "-P", pass, "chassis", "power"}
	cmd = append(cmd, args...)
	if ns != "" {
		cmd = append([]string{"ip", "netns", "exec", ns}, cmd...)
	}
	var out []byte
	var err error
	if !testenv.WaitFor(15*time.Second, func() bool {
		out, err = exec.Command(cmd[0], cmd[1:]...).CombinedOutput()
		return err == nil
	}) {
		t.Fatalf("ipmitool -H %s chassis power %v: %v\n%s", addr, args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestOneBMCPerAddress: with --bmc-addresses every simulated server has a
// BMC of its own, as real hardware: https://ADDR/redfish/v1/Systems (port
// 443, a certificate for ADDR issued by vbmcd's BMC CA, which curl and
// sushy verify) lists that server alone, sushy finds its System, Manager
// and Chassis without being told, ipmitool -H ADDR (port 623) powers the
// same server, and the service-wide account's SimpleUpdate without Targets
// updates it, where the service's own listener refuses it. A range hands
// out addresses in order; a pin (MACHINE=ADDR) wins.
func TestOneBMCPerAddress(t *testing.T) {
	testenv.Integration(t)
	testenv.Root(t) // ports 443 and 623
	images := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "bios payload")
	}))
	t.Cleanup(images.Close)
	var state string
	main, out := simDaemon(t, func(c *Config) {
		c.SimNodes, c.InsecureHTTP, c.IPMI = 3, false, true
		c.BMCAddresses = []string{"127.34.0.1-127.34.0.2", "sim-0003=127.34.0.9"}
		c.MediaAllowLoopback = true
		state = c.StateDir
	})
	if !testenv.WaitFor(10*time.Second, func() bool { return strings.Contains(out.String(), "3 machine(s) have a BMC of their own") }) {
		t.Fatalf("no BMCs of their own:\n%s", out)
	}
	ca := filepath.Join(state, bmcCACert)
	want := map[string]string{
		"127.34.0.1": sim.UUIDFor("sim-0001"),
		"127.34.0.2": sim.UUIDFor("sim-0002"),
		"127.34.0.9": sim.UUIDFor("sim-0003"),
	}
	for addr, id := range want {
		if got := curlSystems(t, "", addr, ca, "sim-pass-1"); len(got) != 1 || got[0] != id {
			t.Errorf("https://%s/redfish/v1/Systems: %v, want [%s]", addr, got, id)
		}
	}

	// IPMI at port 623 of the same address reaches the same machine.
	if got := ipmiPower(t, "", "127.34.0.2", "sim-pass-1", "on"); !strings.Contains(got, "Up/On") {
		t.Errorf("ipmitool power on: %s", got)
	}
	if !testenv.WaitFor(10*time.Second, func() bool {
		return sushyBMC(t, "", "https://127.34.0.2", "admin", "sim-pass-1", ca, "").Power == "On"
	}) {
		t.Errorf("the machine ipmitool -H 127.34.0.2 powered on does not read On at https://127.34.0.2")
	}
	if got := sushyBMC(t, "", "https://127.34.0.1", "admin", "sim-pass-1", ca, ""); got.Power != "Off" {
		t.Errorf("the neighbour at 127.34.0.1: %+v, want off", got)
	}

	// sushy, as Ironic runs it: the one system, and an update without
	// Targets from the service-wide account.
	got := sushyBMC(t, "", "https://127.34.0.9", "admin", "sim-pass-1", ca, images.URL+"/bios-2.3.1.bin")
	id := want["127.34.0.9"]
	if got.Error != "" || got.System != id || got.Manager != id || got.Chassis != id || got.Monitor == "" {
		t.Errorf("sushy at https://127.34.0.9: %+v, want system %s found and an update task", got, id)
	}
	if got := sushyBMC(t, "", "https://"+main, "admin", "sim-pass-1", filepath.Join(state, "redfish-tls.crt"), images.URL+"/bios-2.3.1.bin"); !strings.Contains(got.Error, "UnknownDefaultError") {
		t.Errorf("sushy on the service's listener: %+v, want no default system", got)
	}

	// The web console on a BMC of its own: a session made there sees that
	// machine, and is unknown on the service's listener.
	hc := caClient(t, ca)
	req, _ := http.NewRequest(http.MethodPost, "https://127.34.0.1/redfish/v1/SessionService/Sessions", strings.NewReader(`{"UserName":"admin","Password":"sim-pass-1"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("session at https://127.34.0.1: %v %v", resp, err)
	}
	resp.Body.Close()
	tok := resp.Header.Get("X-Auth-Token")
	req, _ = http.NewRequest(http.MethodGet, "https://127.34.0.1/ui/api/systems", nil)
	req.Header.Set("X-Auth-Token", tok)
	var page struct {
		Total int
		Rows  []struct{ ID string }
	}
	if resp, err = hc.Do(req); err != nil || json.NewDecoder(resp.Body).Decode(&page) != nil || page.Total != 1 || len(page.Rows) != 1 || page.Rows[0].ID != want["127.34.0.1"] {
		t.Errorf("the web console's systems at https://127.34.0.1: %+v (%v), want %s alone", page, err, want["127.34.0.1"])
	}
	insecure := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the session is tested, not the certificate
	req, _ = http.NewRequest(http.MethodGet, "https://"+main+"/ui/api/systems", nil)
	req.Header.Set("X-Auth-Token", tok)
	if resp, err := insecure.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the BMC's session on the service listener's web console: %v %v, want 401", resp, err)
	}
}

// caClient trusts the CA in file only.
func caClient(t *testing.T, file string) *http.Client {
	t.Helper()
	pem, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("%s holds no certificate", file)
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

// TestOneBMCPerAddressIPv6: the same with IPv6 addresses, in a network
// namespace of the test's own that has them (the host's loopback has only
// ::1): curl reaches https://[fd00:34::1]/redfish/v1/Systems and finds one
// system, verified against the BMC CA, and ipmitool -H fd00:34::2 reaches
// the other machine at port 623.
func TestOneBMCPerAddressIPv6(t *testing.T) {
	testenv.Integration(t)
	ns, h := netnstest.New(t)
	lo, err := h.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"fd00:34::1", "fd00:34::2"} {
		ip, _ := netlink.ParseIPNet(a + "/128")
		if err := h.AddrAdd(lo, &netlink.Addr{IPNet: ip, Flags: unix.IFA_F_NODAD}); err != nil {
			t.Fatalf("add %s in %s: %v", a, ns, err)
		}
	}
	state := t.TempDir()
	out := &testenv.Buffer{}
	cmd := exec.Command("ip", "netns", "exec", ns, testenv.Binary(t, "vbmcd"), "--backend", "sim", "--sim-nodes", "2",
		"--redfish-addr", "[::1]:8000", "--bmc-addresses", "fd00:34::1-fd00:34::2",
		"--state-dir", state, "--media-dir", t.TempDir())
	cmd.Env = append(os.Environ(), "VBMCD_PASSWORD=sim-pass-1")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	if !testenv.WaitFor(30*time.Second, func() bool { return strings.Contains(out.String(), "2 machine(s) have a BMC of their own") }) {
		t.Fatalf("no BMCs of their own in %s:\n%s", ns, out)
	}
	ca := filepath.Join(state, bmcCACert)
	if got := curlSystems(t, ns, "fd00:34::1", ca, "sim-pass-1"); len(got) != 1 || got[0] != sim.UUIDFor("sim-0001") {
		t.Errorf("https://[fd00:34::1]/redfish/v1/Systems: %v, want [%s]", got, sim.UUIDFor("sim-0001"))
	}
	if got := ipmiPower(t, ns, "fd00:34::2", "sim-pass-1", "status"); !strings.Contains(got, "Chassis Power is off") {
		t.Errorf("ipmitool -H fd00:34::2 chassis power status: %s", got)
	}
	if got := sushyBMC(t, ns, "https://[fd00:34::2]", "admin", "sim-pass-1", ca, ""); got.Error != "" || got.System != sim.UUIDFor("sim-0002") {
		t.Errorf("sushy at https://[fd00:34::2]: %+v", got)
	}
}

// TestBMCListenersShareTheFront: the machines' own listeners are built by
// the daemon's one front (issue 32), so its budgets hold over them and the
// service's listener together: connections held on a BMC's address count
// toward --redfish-max-conns with the service listener's, and at the total
// a new source reaching another BMC takes one of the biggest source's.
// (Over plain HTTP: it found that the second listener of the one server
// took it for a TLS server, net/http having given it a TLSConfig, and
// every listener stopped.)
func TestBMCListenersShareTheFront(t *testing.T) {
	const total = 3
	port := testenv.Port(t, "127.34.7.1")
	_, out := simDaemon(t, func(c *Config) {
		c.SimNodes, c.MaxConnsPerSource, c.MaxConns = 2, 8, total
		c.BMCAddresses = []string{"127.34.7.1-127.34.7.2"}
		c.BMCRedfishPort, c.BMCIPMIPort = port, 0
		c.MetricsAddr = "127.0.0.1:0"
	})
	if !testenv.WaitFor(10*time.Second, func() bool { return strings.Contains(out.String(), "2 machine(s) have a BMC of their own") }) {
		t.Fatalf("no BMCs of their own:\n%s", out)
	}
	service := regexp.MustCompile(`Redfish at http://([0-9.:]+)/redfish/v1`).FindStringSubmatch(out.String())[1]
	bmc := func(i int) string { return fmt.Sprintf("127.34.7.%d:%d", i, port) }
	metrics := metricsURL(t, out)
	if !testenv.WaitFor(10*time.Second, func() bool { return scrape(t, metrics, "vbmcd_bmc_listeners") == 2 }) {
		t.Fatalf("%v BMC listeners, want 2:\n%s", scrape(t, metrics, "vbmcd_bmc_listeners"), out)
	}
	// 127.0.0.1 holds two on the service's listener, 127.0.0.2 one on the
	// first BMC: the total, half-open.
	var held []net.Conn
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	for _, h := range []struct{ src, to string }{{"127.0.0.1", service}, {"127.0.0.1", service}, {"127.0.0.2", bmc(1)}} {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(h.src)}}
		c, err := d.Dial("tcp", h.to)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	if !testenv.WaitFor(5*time.Second, func() bool { return scrape(t, metrics, "vbmcd_redfish_connections") == total }) {
		t.Fatalf("%v connections held over both listeners, want %d counted together", scrape(t, metrics, "vbmcd_redfish_connections"), total)
	}
	// A new source at the second BMC: 127.0.0.1 (the biggest) gives one
	// of its service-listener connections up.
	if code, err := get(clientFrom("127.0.0.3"), "http://"+bmc(2)); err != nil || code != http.StatusOK {
		t.Errorf("a new source at a BMC's own address, at the total: %d %v, want 200", code, err)
	}
	if n := scrape(t, metrics, "vbmcd_redfish_connections_taken_total"); n < 1 {
		t.Errorf("vbmcd_redfish_connections_taken_total %v, want one of the biggest source's taken for the BMC's new client", n)
	}
	closed := 0
	for _, c := range held[:2] {
		_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err == io.EOF {
			closed++
		}
	}
	if closed != 1 {
		t.Errorf("%d of the biggest source's connections closed for the new source at a BMC, want 1", closed)
	}
}
