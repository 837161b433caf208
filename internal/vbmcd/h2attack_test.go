package vbmcd

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/rfbench"
	"github.com/bmlab/bmlab/internal/testenv"
)

// h2Bound is how far above its idle size vbmcd's VmRSS may go under each
// HTTP/2 attack at the CI scale (2 sources × 8 connections, every stream
// the server allows, held 2 s): issue 32's attacks took it from 290 MB to
// 1,866 MB with 7 connections. docs/security.md states it.
const h2Bound = 48 << 20

// vbmcdProcess is a vbmcd started as a process of its own (its memory is
// read from /proc, not guessed in-process), over the sim backend, HTTPS.
type vbmcdProcess struct {
	cmd     *exec.Cmd
	url     string // https://127.0.0.1:PORT
	metrics string // http://127.0.0.1:PORT/metrics
	out     *testenv.Buffer
}

func startVbmcdProcess(t *testing.T, extra ...string) *vbmcdProcess {
	t.Helper()
	bin := testenv.Binary(t, "vbmcd")
	dir := t.TempDir()
	creds := filepath.Join(dir, "creds.yaml")
	if err := os.WriteFile(creds, []byte("username: admin\npassword: attack-pass\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--backend", "sim", "--sim-nodes", "10", "--redfish-addr", "127.0.0.1:0", "--ipmi=false",
		"--metrics-addr", "127.0.0.1:0", "--credentials-file", creds,
		"--state-dir", filepath.Join(dir, "state"), "--media-dir", filepath.Join(dir, "media")}, extra...)
	cmd := exec.Command(bin, args...)
	line, out := runDaemon(t, cmd)
	m := regexp.MustCompile(`Redfish at (https://[0-9.:]+)/redfish/v1 .*metrics at (http://[0-9.:]+/metrics)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("vbmcd did not start: %q\n%s", line, out.String())
	}
	return &vbmcdProcess{cmd: cmd, url: m[1], metrics: m[2], out: out}
}

// runDaemon starts cmd, a vbmcd process, for the rest of the test and
// returns the first line of its output (where it says it listens) and its
// standard error.
func runDaemon(t *testing.T, cmd *exec.Cmd) (string, *testenv.Buffer) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &testenv.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	go io.Copy(io.Discard, stdout)
	return line, stderr
}

// metric reads one unlabelled sample from the daemon's metrics.
func (p *vbmcdProcess) metric(t *testing.T, name string) float64 {
	t.Helper()
	return scrape(t, p.metrics, name)
}

// get is a GET of the Systems collection as the administrator.
func (p *vbmcdProcess) get() (int, error) { return p.getAt(p.url + "/redfish/v1/Systems") }

// getAt is a GET of url as the administrator.
func (p *vbmcdProcess) getAt(url string) (int, error) {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the daemon's self-signed certificate, on loopback
	defer c.CloseIdleConnections()
	r, _ := http.NewRequest("GET", url, nil)
	r.SetBasicAuth("admin", "attack-pass")
	resp, err := c.Do(r)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// The HTTP/2 attacks of issue 32, small: rfbench -attack's HTTP/2 kinds
// from 2 sources × 8 connections, each connection filled with as many
// streams as vbmcd allows, held 2 s, against a vbmcd process of its own.
// Its VmRSS (from /proc) stays within h2Bound of its idle size, an
// administrator's GET and session login from another source are answered
// during the attack, and afterwards nothing is left in flight and vbmcd
// answers as before. Fails before the fix: the announced-length attack
// passes the bound in under a second (4,000 streams of 1 MiB each).
// The same attacks at full scale: hack/attack-h2.sh.
func TestH2AttacksBounded(t *testing.T) {
	testenv.Integration(t)
	for _, kind := range rfbench.H2Kinds() {
		t.Run(kind, func(t *testing.T) {
			p := startVbmcdProcess(t)
			res := attackBounded(t, p, p.url, rfbench.H2Config{Kind: kind, Sources: 2, Conns: 8})
			if res.Conns == 0 || res.Streams == 0 {
				t.Fatalf("the attack opened %d connections and %d streams", res.Conns, res.Streams)
			}
			if code, err := p.get(); err != nil || code != 200 {
				t.Errorf("GET after the attack: %d %v", code, err)
			}
			if res.Settled > res.Peak+8<<20 {
				t.Errorf("VmRSS still grows after the attack: peak %.1f MB, then %.1f MB", mb(res.Peak), mb(res.Settled))
			}
		})
	}
}

// attackBounded runs the held attack cfg (its kind, sources and
// connections) at url, a listener of p, for 2 s, once p's idle size is
// read after some ordinary requests, and checks what every such attack
// must leave: VmRSS (from /proc) within h2Bound of idle, an administrator's
// GET and session login from another source answered during the attack,
// nothing in flight afterwards.
func attackBounded(t *testing.T, p *vbmcdProcess, url string, cfg rfbench.H2Config) *rfbench.H2Result {
	t.Helper()
	for range 50 {
		if code, err := p.get(); err != nil || code != 200 {
			t.Fatalf("GET before the attack: %d %v", code, err)
		}
	}
	before, err := rssOf(p.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	cfg.URL, cfg.User, cfg.Password, cfg.ServerPID = url, "admin", "attack-pass", p.cmd.Process.Pid
	cfg.Hold, cfg.Settle, cfg.MaxRSS = 2*time.Second, time.Second, before+4*h2Bound
	res, err := rfbench.H2Attack(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var report strings.Builder
	res.Report(&report)
	t.Log("\n" + report.String())
	if res.Stopped || res.Peak-before > h2Bound {
		t.Errorf("VmRSS went from %.1f MB to %.1f MB, more than %d MB above idle", mb(before), mb(res.Peak), h2Bound>>20)
	}
	if !strings.HasPrefix(res.ProbeGET, "200 ") || !strings.HasPrefix(res.ProbeLogin, "201 ") {
		t.Errorf("during the attack, from another source: GET %s, login %s; want 200 and 201", res.ProbeGET, res.ProbeLogin)
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return p.metric(t, "vbmcd_redfish_requests_in_flight") == 0 }) {
		t.Errorf("%v requests still in flight after the attack", p.metric(t, "vbmcd_redfish_requests_in_flight"))
	}
	return res
}

func mb(n int64) float64 { return float64(n) / 1e6 }

// rssOf reads a process's VmRSS from /proc.
func rssOf(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	m := regexp.MustCompile(`(?m)^VmRSS:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		return 0, io.ErrUnexpectedEOF
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n << 10, nil
}

// The body attacks of issue 46 at a machine's own BMC of a vendor
// personality (iLO 6), small: rfbench -attack's bmc-chunked kinds, HTTP/1.1
// requests whose chunked body comes up to about 1 MiB and never ends,
// against a vbmcd process of its own: logins without credentials from 4
// sources × 16 connections, and PATCHes by a ReadOnly account of that BMC
// from one source × 64 connections (past its 16 MiB body budget), held 2 s.
// VmRSS stays within h2Bound of idle, the administrator is served meanwhile
// and nothing is left in flight after. Fails before the fix: the vendor-id
// mapper read each body whole before the budget saw it (4 × 16 logins: +126
// MB; 64 PATCHes: +90 MB, measured at eb99f43 with this test). The same
// attacks at full scale: hack/attack-h2.sh bmc.
func TestVendorBMCBodyAttackBounded(t *testing.T) {
	testenv.Integration(t)
	for _, tc := range []struct {
		kind           string
		sources, conns int
	}{{"bmc-chunked-login", 4, 16}, {"bmc-chunked-patch", 1, 64}} {
		t.Run(tc.kind, func(t *testing.T) {
			port := testenv.Port(t, "127.46.0.1")
			p := startVbmcdProcess(t, "--personality", "ilo6", "--bmc-addresses", "127.46.0.1-127.46.0.10",
				"--bmc-redfish-port", strconv.Itoa(port), "--bmc-ipmi-port", "0")
			bmc := "https://127.46.0.1:" + strconv.Itoa(port)
			if !testenv.WaitFor(10*time.Second, func() bool {
				code, err := p.getAt(bmc + "/redfish/v1/Systems/1")
				return err == nil && code == 200
			}) {
				t.Fatalf("the iLO's BMC does not answer at %s\n%s", bmc, p.out)
			}
			res := attackBounded(t, p, bmc, rfbench.H2Config{Kind: tc.kind, Sources: tc.sources, Conns: tc.conns})
			if res.Streams < int64(tc.sources*tc.conns) {
				t.Errorf("the attack sent %d requests, want %d at least", res.Streams, tc.sources*tc.conns)
			}
		})
	}
}
