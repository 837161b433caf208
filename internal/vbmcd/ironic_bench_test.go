package vbmcd

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/ironictest"
	"github.com/bmlab/bmlab/internal/testenv"
)

// BenchmarkIronicNodes takes N simulated servers (BMLAB_IRONIC_NODES,
// default 10) through Debian's Ironic 21.4 as a Metal3 scale job does
// with sushy-tools' fake driver and fake-ipa: vbmcd runs as its own
// process from a fake-driver systems list of N entries with
// external_notifier, its announcements go to a listener deciding as
// fake-ipa does, which boots or stops the stand-in agent; Ironic enrolls,
// manages, inspects (Redfish), provides (automated cleaning with the
// agent), deploys (redfish-virtual-media, direct) and undeploys (cleaning
// again) every node. Each phase asks for all nodes at once (one API call
// at a time, BMLAB_IRONIC_INFLIGHT) and ends when the last node is there. It logs a table:
// seconds and nodes per minute per phase, the CPU seconds of vbmcd, of
// Ironic (with the commands it ran) and of this process (the agent, the
// listener and the client), and the peak RSS of vbmcd and Ironic. Run it
// with hack/ironic-bench.sh; it is not part of `make test`.
func BenchmarkIronicNodes(b *testing.B) {
	testenv.Integration(b)
	n := 10
	if v := os.Getenv("BMLAB_IRONIC_NODES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > 5000 {
			b.Fatalf("BMLAB_IRONIC_NODES %q: want a number of nodes, 1 to 5000", v)
		}
	}
	every := 10 * time.Second
	if v := os.Getenv("BMLAB_IRONIC_HEARTBEAT"); v != "" {
		var err error
		if every, err = time.ParseDuration(v); err != nil {
			b.Fatalf("BMLAB_IRONIC_HEARTBEAT %q: %v", v, err)
		}
	}
	for b.Loop() {
		ironicRun(b, n, every)
	}
}

func ironicRun(b *testing.B, n int, every time.Duration) {
	dir := b.TempDir()
	bin := filepath.Join(dir, "vbmcd")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/bmlab/bmlab/cmd/vbmcd").CombinedOutput(); err != nil {
		b.Fatalf("go build vbmcd: %v\n%s", err, out)
	}
	ipa, listener := newFakeIPA(b)

	type fakeSys struct {
		UUID     string              `json:"uuid"`
		Name     string              `json:"name"`
		Power    string              `json:"power_state"`
		Notifier bool                `json:"external_notifier"`
		NICs     []map[string]string `json:"nics"`
	}
	var systems []fakeSys
	for i := range n {
		systems = append(systems, fakeSys{
			UUID: fmt.Sprintf("27946b59-9e44-4fa7-8e91-%012x", i+1), Name: fmt.Sprintf("fake-%04d", i+1),
			Power: "Off", Notifier: true,
			NICs: []map[string]string{{"mac": fmt.Sprintf("00:5c:52:%02x:%02x:%02x", (i+1)>>16, (i+1)>>8&255, (i+1)&255)}},
		})
	}
	js, _ := json.Marshal(systems)
	file := filepath.Join(dir, "systems.json")
	if err := os.WriteFile(file, js, 0o644); err != nil {
		b.Fatal(err)
	}
	port, mport := testenv.Port(b, "127.0.0.1"), testenv.Port(b, "127.0.0.1")
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	const pass = "bench-pass-1"
	vlog, err := os.Create(filepath.Join(dir, "vbmcd.log"))
	if err != nil {
		b.Fatal(err)
	}
	vb := exec.Command(bin, "--backend", "sim", "--sim-systems", file, "--sim-notify-url", listener,
		"--sim-media", "probe", "--sim-delay", "500ms", "--redfish-addr", addr, "--insecure-http", "--ipmi=false",
		"--password", pass, "--state-dir", filepath.Join(dir, "state"), "--media-dir", filepath.Join(dir, "media"),
		"--media-allow-loopback", "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", mport),
		// Ironic is one source with a pool of connections per node (10
		// each): the default cap of 128 a source closes its surplus.
		"--redfish-max-conns-per-source", "8192", "--redfish-max-conns", "8192")
	vb.Stdout, vb.Stderr = vlog, vlog
	if err := vb.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = vb.Process.Signal(syscall.SIGTERM); _ = vb.Wait(); vlog.Close() })
	if !testenv.WaitFor(30*time.Second, func() bool {
		resp, err := http.Get("http://" + addr + "/redfish/v1/")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	}) {
		log, _ := os.ReadFile(vlog.Name())
		b.Fatalf("vbmcd did not answer at %s:\n%s", addr, log)
	}

	limit := strconv.Itoa(max(2*n, 250))
	ir := ironictest.Start(b, ironictest.Options{HeartbeatEvery: every, Config: map[string]map[string]string{
		"DEFAULT": {"debug": "false"},
		// Every node in flight at once, as a BMO reconciling all hosts asks.
		"conductor": {"max_concurrent_deploy": limit, "max_concurrent_clean": limit,
			"deploy_callback_timeout": "3600", "clean_callback_timeout": "3600"},
	}})
	ipa.drive(ir.Agent)
	iso := ir.Serve("/images/deploy.iso", testenv.MarkerISO(b))
	disk := testenv.MarkerDisk(b)
	image := ir.Serve("/images/disk.img", disk)
	imageInfo := ironictest.ImageInfo(b, image, disk)

	names := make([]string, n)
	for i, s := range systems {
		names[i] = s.Name
	}
	procs := []*proc{{name: "vbmcd", pid: vb.Process.Pid}, {name: "Ironic", pid: ir.PID(), children: true}, {name: "bench", pid: os.Getpid()}}
	var rows []string
	load0 := loadavg()
	phase := func(name, want string, do func(node string) error) {
		b.Helper()
		for _, p := range procs {
			p.mark()
		}
		start := time.Now()
		parallel(b, name, names, do)
		if want != "" {
			ironicWaitAll(b, ir, name, want, n, time.Duration(n)*6*time.Second+5*time.Minute)
		}
		took := time.Since(start)
		row := fmt.Sprintf("| %d | %s | %.1f | %.0f |", n, name, took.Seconds(), float64(n)/took.Minutes())
		for _, p := range procs {
			cpu, kids := p.cpu()
			row += fmt.Sprintf(" %.1f (%.0f%%)", cpu, 100*cpu/took.Seconds())
			if p.children {
				row += fmt.Sprintf(", its commands %.1f", kids)
			}
			row += " |"
		}
		rows = append(rows, row)
		// On stdout at once: a run that stops later keeps its phases.
		fmt.Printf("ironic-bench: %s %s\n", row, loadavg())
		b.ReportMetric(float64(n)/took.Minutes(), strings.ReplaceAll(name, " ", "_")+"-nodes/min")
	}
	phase("enroll", "", func(node string) error {
		i, _ := strconv.Atoi(strings.TrimPrefix(node, "fake-"))
		_, err := ir.Enroll(redfishNode(node, "http://"+addr, systems[i-1].UUID, "admin", pass, "false", iso,
			map[string]any{"capabilities": "boot_mode:uefi"}))
		return err
	})
	phase("manage", "manageable", func(node string) error { return ir.Provision(node, "manage", nil) })
	phase("inspect", "manageable", func(node string) error { return ir.Provision(node, "inspect", nil) })
	phase("provide", "available", func(node string) error { return ir.Provision(node, "provide", nil) })
	phase("deploy", "active", func(node string) error {
		if err := ir.Patch(node, imageInfo...); err != nil {
			return err
		}
		return ir.Provision(node, "active", nil)
	})
	phase("undeploy", "available", func(node string) error { return ir.Provision(node, "deleted", nil) })

	ipa.mu.Lock()
	sent, refused := len(ipa.bodies), len(ipa.refused)
	ipa.mu.Unlock()
	murl := fmt.Sprintf("http://127.0.0.1:%d/metrics", mport)
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n| N | phase | seconds | nodes/min | vbmcd CPU s (%% of a core) | Ironic CPU s (%% of a core), of which the commands it ran | bench process CPU s (%% of a core) |\n|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		sb.WriteString(r + "\n")
	}
	fmt.Fprintf(&sb, "peak RSS: vbmcd %.0f MB, Ironic %.0f MB; API calls made again after \"database is locked\": %d; connections vbmcd refused: %.0f; announcements received %d (refused by the listener: %d), vbmcd's notifier: sent %.0f, failed %.0f, dropped %.0f; load average %s at the start, %s at the end; %d cores\n",
		procs[0].peakMB(), procs[1].peakMB(), lockedRetries.Load(), scrape(b, murl, "vbmcd_redfish_connections_refused_total"), sent, refused, scrape(b, murl, "vbmcd_notifications_sent_total"), scrape(b, murl, "vbmcd_notifications_failed_total"),
		scrape(b, murl, "vbmcd_notifications_dropped_total"), load0, loadavg(), runtime.NumCPU())
	b.Log(sb.String())
}

// lockedRetries counts the API calls refused with sqlite's "database is
// locked" and made again.
var lockedRetries atomic.Int64

// inFlight is how many API calls a phase makes at once
// (BMLAB_IRONIC_INFLIGHT, default 1: at 8, Ironic's API stopped answering
// within 30 s during the manage of 100 nodes).
func inFlight() int {
	if n, err := strconv.Atoi(os.Getenv("BMLAB_IRONIC_INFLIGHT")); err == nil && n > 0 {
		return n
	}
	return 1
}

// parallel calls do for every node, inFlight() at a time. A call Ironic refuses
// because its sqlite database is locked (a 500 when writers collide) is
// made again after a back-off, as a BMO requeues a host, up to 20 times.
func parallel(b *testing.B, name string, nodes []string, do func(string) error) {
	b.Helper()
	work := make(chan string)
	errs := make(chan error, len(nodes))
	var wg sync.WaitGroup
	for range inFlight() {
		wg.Go(func() {
			for node := range work {
				err := do(node)
				for try := 1; try <= 20 && err != nil && strings.Contains(err.Error(), "database is locked"); try++ {
					lockedRetries.Add(1)
					time.Sleep(time.Duration(try) * 200 * time.Millisecond)
					err = do(node)
				}
				if err != nil {
					errs <- fmt.Errorf("%s %s: %w", name, node, err)
				}
			}
		})
	}
	for _, node := range nodes {
		work <- node
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// ironicWaitAll waits until all n nodes are in provision state want with
// nothing pending, reading the node list every second; a node in a failed
// state ends the benchmark with its last_error.
func ironicWaitAll(b *testing.B, ir *ironictest.Ironic, step, want string, n int, timeout time.Duration) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var list struct {
			Nodes []ironictest.Node `json:"nodes"`
		}
		if err := ir.Do(http.MethodGet, "/v1/nodes?limit=1000&fields=name,provision_state,target_provision_state,last_error", nil, &list); err != nil {
			b.Fatalf("%s: list the nodes: %v", step, err)
		}
		done := 0
		for _, node := range list.Nodes {
			if node.ProvisionState == want && node.TargetProvisionState == nil {
				done++
			}
			if strings.HasSuffix(node.ProvisionState, "failed") || node.ProvisionState == "error" {
				b.Fatalf("%s: %s\nagent:\n%s", step, node, lastLines(ir.Agent.Log(), 30))
			}
		}
		if done == n && len(list.Nodes) == n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s: %d of %d node(s) %q after %s", step, done, n, want, timeout)
		}
		time.Sleep(time.Second)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// proc is a process whose CPU time a phase reads: utime and stime, and
// with children those of the commands it waited for (cutime, cstime).
type proc struct {
	name     string
	pid      int
	children bool
	lastOwn  float64
	lastKids float64
}

// times is the process's own CPU seconds and, with children, those of the
// commands it waited for.
func (p *proc) times() (own, kids float64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
	if err != nil {
		return 0, 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndex(s, ")")+2:])                              // fields from 3 (state) on
	v := func(i int) float64 { x, _ := strconv.ParseFloat(f[i], 64); return x / 100 } // USER_HZ
	own = v(11) + v(12)                                                               // utime, stime (fields 14, 15)
	if p.children {
		kids = v(13) + v(14) // cutime, cstime
	}
	return own, kids
}

func (p *proc) mark() { p.lastOwn, p.lastKids = p.times() }

// cpu is the CPU seconds since mark, in all and of the commands it ran.
func (p *proc) cpu() (all, kids float64) {
	own, k := p.times()
	return own - p.lastOwn + k - p.lastKids, k - p.lastKids
}

// peakMB is the process's peak RSS (VmHWM).
func (p *proc) peakMB() float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if kb, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			v, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(kb), "kB")), 64)
			return v / 1024
		}
	}
	return 0
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
