package ironictest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/testenv"
)

// Options configure Start. The zero value runs Ironic 21.4 on 127.0.0.1.
type Options struct {
	// Release is the Ironic to run: Ironic21 (the default) or Ironic29.
	Release Release
	// Namespace, when set, is a network namespace (ip netns) Ironic, its
	// HTTP server and the agent run in, as on a lab's machine network; the
	// test's clients reach them through it. Default: the test's own.
	Namespace string
	// Host is the address everything listens on (default 127.0.0.1, in
	// Namespace when given).
	Host string
	// HTTPPort is the HTTP server's port (default: any free one), for a
	// network boot whose DHCP server names it: Metal3's is 6180.
	HTTPPort int
	// Config adds or overrides Ironic settings, by section and key
	// ({"conductor": {"automated_clean": "false"}}).
	Config map[string]map[string]string
	// HeartbeatEvery is how often the agent heartbeats between commands
	// (default 1 s; a real agent waits minutes, but is kicked after each
	// command, as this one is too).
	HeartbeatEvery time.Duration
	// PXE, when set, runs the network boot service (dnsmasq, DHCP or
	// proxyDHCP, TFTP, iPXE) for nodes with the ipxe boot interface
	// (pxe.go); Ironic's http_url is then what iPXE fetches from.
	PXE *PXE
	// VendorOverlay, on Ironic 29, puts testenv.VendorOverlay on Ironic's
	// PYTHONPATH too: Debian 13's python3-sushy-oem-idrac made importable
	// (three empty modules it imports and does not ship), so the idrac
	// hardware type reaches Dell's OEM through the package's own code.
	VendorOverlay bool
	// Vendors enables the vendors' hardware types beside redfish and ipmi
	// (idrac, ilo and ilo5, the one for iLO 5 and 6: ilo's interfaces with
	// the ilo5 management and RAID interfaces) and their interfaces (the
	// iLO's network boot, ilo-ipxe, and the BIOS interfaces ilo and
	// idrac-redfish among them); the iLO types
	// publish their ISOs on Ironic's web server as the redfish one does
	// (not in Swift).
	Vendors bool
}

// Ironic is a running Ironic and what serves it: its API, the HTTP server
// of its http_root, and the stand-in agent.
type Ironic struct {
	// URL is the API's endpoint (http://HOST:PORT).
	URL string
	// HTTPURL is where the HTTP server serves Ironic's http_root and the
	// files a test adds (Serve).
	HTTPURL string
	// Dir holds the configuration, the database, the caches and the log.
	Dir string
	// Agent stands in for ironic-python-agent.
	Agent *Agent
	// DnsmasqLog is the log of the network boot service (Options.PXE), "" without it.
	DnsmasqLog string
	// Started is how long Start took: configuration, database, process,
	// until the API answered.
	Started time.Duration
	// Release is the Ironic that runs.
	Release Release

	t      testing.TB
	ns     string
	hc     *http.Client
	log    string
	cmd    *exec.Cmd
	files  *files
	closed chan struct{}
}

// Start runs Ironic until the test ends. It needs root (Ironic's rootwrap
// and, with Options.Namespace, ip netns) and the release: for Ironic 21.4
// Debian's ironic-conductor, ironic-api and python3-sushy
// (hack/install-deps.sh), for Ironic 29 its root
// (hack/build-ironic-root.sh); without them the test skips, and fails
// under CI=true.
func Start(t testing.TB, o Options) *Ironic {
	t.Helper()
	testenv.Integration(t)
	testenv.Root(t)
	if o.Release == "" {
		o.Release = Ironic21
	}
	in := locate(t, o.Release)
	begin := time.Now()
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.HeartbeatEvery <= 0 {
		o.HeartbeatEvery = time.Second
	}
	dir := t.TempDir()
	for _, d := range []string{"state", "locks", "tmp", "pylib"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ir := &Ironic{Dir: dir, Release: o.Release, t: t, ns: o.Namespace, log: filepath.Join(dir, "ironic.log"), closed: make(chan struct{})}
	ir.hc = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: netplumb.DialContextIn(o.Namespace)}}

	if err := sushyOverlay(in, filepath.Join(dir, "pylib")); err != nil {
		t.Fatalf("ironictest: the sushy overlay: %v", err)
	}
	if o.VendorOverlay {
		if in.root == "" {
			t.Fatalf("ironictest: the vendor overlay is Ironic 29's (Debian 12 has no python3-sushy-oem-idrac)")
		}
		if err := testenv.VendorOverlay(in.root, filepath.Join(dir, "pylib")); err != nil {
			t.Fatalf("ironictest: the vendor overlay: %v", err)
		}
	}

	// Listeners first: Ironic's configuration names their ports.
	apiPort := freePort(t, o.Namespace, o.Host)
	httpLn := listenPort(t, o.Namespace, o.Host, o.HTTPPort)
	ir.HTTPURL = "http://" + httpLn.Addr().String()
	httpRoot := httpRootDir(t)
	ir.files = newFiles(httpRoot, filepath.Join(dir, "http.log"))
	serve(t, httpLn, ir.files)
	agentLn := listen(t, o.Namespace, o.Host)
	ir.URL = "http://" + net.JoinHostPort(o.Host, strconv.Itoa(apiPort))

	conf := filepath.Join(dir, "ironic.conf")
	if err := os.WriteFile(conf, []byte(config(o.Release, dir, httpRoot, o.Host, apiPort, ir.HTTPURL, o.Vendors, o.Config)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := templateDB(in, filepath.Join(dir, "ironic.sqlite")); err != nil {
		t.Fatalf("ironictest: database: %v", err)
	}

	if o.PXE != nil {
		ir.DnsmasqLog = startPXE(t, o.Namespace, *o.PXE, dir, ir.HTTPURL)
	}

	logf, err := os.Create(ir.log)
	if err != nil {
		t.Fatal(err)
	}
	args := in.argv(o.Namespace, "/usr/bin/ironic", "--config-file", conf)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(cleanEnv(), "PYTHONPATH="+filepath.Join(dir, "pylib"), "TMPDIR="+filepath.Join(dir, "tmp"))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("ironictest: start ironic: %v", err)
	}
	ir.cmd = cmd
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); logf.Close(); close(ir.closed) }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("ironictest: the last lines of Ironic's log (%s):\n%s", ir.log, ir.LogTail(60))
			ir.keep()
		} else if p := ir.Problems(); len(p) > 0 {
			t.Logf("ironictest: Ironic logged %d warning and error lines; the distinct ones:\n%s", len(p), strings.Join(distinct(p, 30), "\n"))
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-ir.closed:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-ir.closed
		}
	})

	ready := false
	if !testenv.WaitFor(60*time.Second, func() bool {
		select {
		case err := <-exited:
			t.Fatalf("ironictest: ironic exited at start (%v):\n%s", err, ir.LogTail(40))
		default:
		}
		resp, err := ir.hc.Get(ir.URL + "/v1/")
		if err == nil {
			resp.Body.Close()
			ready = resp.StatusCode == http.StatusOK
		}
		return ready
	}) {
		t.Fatalf("ironictest: Ironic's API did not answer at %s within 60 s:\n%s", ir.URL, ir.LogTail(40))
	}
	ir.Agent = newAgent(t, ir, agentLn, o.HeartbeatEvery)
	ir.Started = time.Since(begin)
	t.Logf("ironictest: %s at %s (HTTP %s), started in %s", in, ir.URL, ir.HTTPURL, ir.Started.Round(10*time.Millisecond))
	return ir
}

// cleanEnv is the environment without the variables that make python's
// requests trust another CA bundle than the one Ironic is given:
// REQUESTS_CA_BUNDLE and CURL_CA_BUNDLE override the verify a session (so
// sushy's redfish_verify_ca) sets, whatever the node says.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR", "PYTHONPATH":
			continue
		}
		env = append(env, kv)
	}
	return env
}

// keep copies Ironic's log, its HTTP server's log and its database to
// _out/ironic/TEST-NAME/ (the test's own directory goes when it ends), for
// a failure to be read after the test.
func (ir *Ironic) keep() {
	dst := filepath.Join(testenv.RepoRoot(), "_out", "ironic", strings.NewReplacer("/", "-", " ", "_").Replace(ir.t.Name()))
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return
	}
	for _, f := range []string{"ironic.log", "http.log", "ironic.sqlite", "ironic.conf"} {
		if b, err := os.ReadFile(filepath.Join(ir.Dir, f)); err == nil {
			_ = os.WriteFile(filepath.Join(dst, f), b, 0o644)
		}
	}
	ir.t.Logf("ironictest: Ironic's log, database and configuration kept in %s", dst)
}

// PID is the process id of Ironic (API and conductor in one process), for
// a benchmark to read its CPU time and memory.
func (ir *Ironic) PID() int { return ir.cmd.Process.Pid }

// LogTail returns the last n lines of Ironic's log.
func (ir *Ironic) LogTail(n int) string { return tail(ir.log, n) }

// Problems returns the WARNING and ERROR lines of Ironic's log, from the
// level on, without the request context ("[None req-… - - - - - -]").
func (ir *Ironic) Problems() []string {
	var out []string
	for _, l := range strings.Split(ir.Log(), "\n") {
		for _, lvl := range []string{" WARNING ", " ERROR "} {
			i := strings.Index(l, lvl)
			if i < 0 {
				continue
			}
			msg := l[i+len(lvl):]
			if k := strings.Index(msg, "] "); k >= 0 && strings.Contains(msg[:k], "[") {
				msg = msg[k+2:]
			}
			out = append(out, strings.TrimSpace(lvl)+" "+strings.TrimSuffix(msg, "\x1b[00m"))
		}
	}
	return out
}

func distinct(lines []string, max int) []string {
	seen := map[string]bool{}
	var out []string
	for _, l := range lines {
		if len(l) > 300 {
			l = l[:300] + "…"
		}
		if !seen[l] && len(out) < max {
			seen[l] = true
			out = append(out, l)
		}
	}
	return out
}

// Heartbeats returns when Ironic's conductor took each heartbeat of the
// agent on node uuid (its "RPC heartbeat called for node UUID" lines, in
// the log's local time), in order.
func (ir *Ironic) Heartbeats(uuid string) []time.Time {
	return logTimes(ir.Log(), "RPC heartbeat called for node "+uuid)
}

// logTimes returns the times of the lines of an Ironic log that contain
// text (each line begins with "2006-01-02 15:04:05.000", local time).
func logTimes(log, text string) []time.Time {
	const layout = "2006-01-02 15:04:05.000"
	var out []time.Time
	for _, l := range strings.Split(log, "\n") {
		if len(l) < len(layout) || !strings.Contains(l, text) {
			continue
		}
		if at, err := time.ParseInLocation(layout, l[:len(layout)], time.Local); err == nil {
			out = append(out, at)
		}
	}
	return out
}

// Log returns Ironic's whole log so far.
func (ir *Ironic) Log() string {
	b, _ := os.ReadFile(ir.log)
	return string(b)
}

// Serve makes the HTTP server answer path (beginning with /) with the file
// at src, and returns its URL: images for Ironic to hand out (a deploy ISO,
// an instance image, a firmware file).
func (ir *Ironic) Serve(path, src string) string {
	ir.files.add(path, src)
	return ir.HTTPURL + path
}

// kernelParams is what Ironic's configuration appends to the deploy
// ramdisk's kernel command line.
const kernelParams = "nofb nomodeset console=ttyS0,115200"

// config is Ironic's configuration: noauth, sqlite, one process, the
// redfish and ipmi hardware types with the interfaces the tests use, and
// the timings a test needs (seconds where production waits minutes).
//
// Ironic keeps every cache in dir (its defaults are under /var/lib/ironic);
// http_root is on another filesystem: Ironic 21.4 publishes a deploy ISO
// into http_root with a hard link of its temporary copy, itself a hard link
// of the cache's master, and when it publishes it again in one operation (a
// manual clean step that reboots into the agent) the old link is there, so
// it copies instead, and the copy fails with "are the same file". Across
// filesystems it always copies, as in Metal3's image, where http_root is a
// volume of its own.
func config(r Release, dir, httpRoot, host string, port int, httpURL string, vendors bool, extra map[string]map[string]string) string {
	inspect := "redfish,no-inspect"
	if r != Ironic21 {
		// The agent's own inspection, built into Ironic since 2023.2.
		inspect = "agent,redfish,no-inspect"
	}
	c := map[string]map[string]string{
		"DEFAULT": {
			"auth_strategy":                 "noauth",
			"rpc_transport":                 "none",
			"host":                          "ironictest",
			"state_path":                    filepath.Join(dir, "state"),
			"tempdir":                       filepath.Join(dir, "tmp"),
			"use_stderr":                    "true",
			"debug":                         "true",
			"enabled_hardware_types":        "redfish,ipmi",
			"enabled_boot_interfaces":       "redfish-virtual-media,ipxe,pxe",
			"enabled_deploy_interfaces":     "direct,ramdisk",
			"enabled_inspect_interfaces":    inspect,
			"enabled_management_interfaces": "redfish,ipmitool",
			"enabled_power_interfaces":      "redfish,ipmitool",
			"enabled_bios_interfaces":       "redfish,no-bios",
			"enabled_raid_interfaces":       "redfish,agent,no-raid",
			"enabled_vendor_interfaces":     "redfish,ipmitool,no-vendor",
			"enabled_network_interfaces":    "noop",
			"enabled_console_interfaces":    "no-console",
			"default_network_interface":     "noop",
			"default_deploy_interface":      "direct",
		},
		"api": {"host_ip": host, "port": strconv.Itoa(port)},
		// Where the agent is told to find the API (no keystone catalog).
		"service_catalog":  {"endpoint_override": "http://" + net.JoinHostPort(host, strconv.Itoa(port))},
		"database":         {"connection": "sqlite:///" + filepath.Join(dir, "ironic.sqlite")},
		"dhcp":             {"dhcp_provider": "none"},
		"oslo_concurrency": {"lock_path": filepath.Join(dir, "locks")},
		// Automated cleaning erases the disks' metadata only, as Metal3
		// configures it (the agent's erase_devices would overwrite whole
		// disks).
		"deploy": {"http_url": httpURL, "http_root": httpRoot, "default_boot_mode": "uefi",
			"iso_master_path": filepath.Join(dir, "master_iso_images"), "erase_devices_priority": "0", "erase_devices_metadata_priority": "10"},
		// The master cache of the deploy kernels and ramdisks the ipxe
		// boot publishes is beside http_root, on its filesystem: Ironic
		// hard-links the master into http_root.
		"pxe": {"images_path": filepath.Join(dir, "images"), "instance_master_path": filepath.Join(dir, "master_images"),
			"tftp_root": filepath.Join(dir, "tftp"), "tftp_master_path": filepath.Join(filepath.Dir(httpRoot), "tftp_master")},
		"conductor":                    {"automated_clean": "true", "deploy_callback_timeout": "600", "clean_callback_timeout": "600", "power_state_change_timeout": "60"},
		"agent":                        {"certificates_path": filepath.Join(dir, "certificates"), "post_deploy_get_power_state_retries": "2", "post_deploy_get_power_state_retry_interval": "1", "deploy_logs_collect": "never", "command_timeout": "120"},
		"redfish":                      {"use_swift": "false", "firmware_update_status_interval": "2", "firmware_update_fail_interval": "2", "connection_attempts": "10", "connection_retry_interval": "1"},
		"oslo_messaging_notifications": {"driver": "noop"},
		// Ironic waits 5 s between two IPMI commands to a BMC by default,
		// for slow BMCs; vbmcd's answer at once.
		"ipmi": {"min_command_interval": "1"},
	}
	// The kernel command line of the deploy ramdisk (besides what Ironic
	// adds: ipa-api-url and the rest): Ironic's defaults, and the console
	// on the serial port, where the tests read the machine's boots.
	c["redfish"]["kernel_append_params"] = kernelParams
	c["pxe"]["kernel_append_params"] = kernelParams
	c["ilo"] = map[string]string{"kernel_append_params": kernelParams}
	if vendors {
		d := c["DEFAULT"]
		d["enabled_hardware_types"] += ",idrac,ilo,ilo5"
		d["enabled_boot_interfaces"] += ",idrac-redfish-virtual-media,ilo-virtual-media,ilo-ipxe"
		d["enabled_raid_interfaces"] += ",ilo5"
		d["enabled_bios_interfaces"] += ",ilo,idrac-redfish"
		d["enabled_inspect_interfaces"] += ",idrac-redfish,ilo"
		d["enabled_management_interfaces"] += ",idrac-redfish,ilo,ilo5"
		d["enabled_power_interfaces"] += ",idrac-redfish,ilo"
		c["ilo"]["use_web_server_for_images"] = "true"
		c["ilo"]["power_wait"] = "1"
	}
	if r != Ironic21 {
		// The agent inspect interface (Ironic's own, ironic-inspector's
		// successor): Ironic boots the ramdisk, whose agent runs its
		// collectors (lldp: what the switch port announces) and posts
		// the data back; the hooks make a port of every NIC and read
		// each port's switch and port from its LLDP.
		c["inspector"] = map[string]string{
			"require_managed_boot": "true",
			"extra_kernel_params":  "ipa-inspection-collectors=default,logs,lldp",
			"add_ports":            "all",
			"hooks":                "$default_hooks,parse-lldp,local-link-connection,memory",
			"power_off":            "true",
		}
	}
	for sec, kv := range extra {
		if c[sec] == nil {
			c[sec] = map[string]string{}
		}
		for k, v := range kv {
			c[sec][k] = v
		}
	}
	var b strings.Builder
	secs := make([]string, 0, len(c))
	for s := range c {
		secs = append(secs, s)
	}
	sort.Strings(secs)
	for _, s := range secs {
		fmt.Fprintf(&b, "[%s]\n", s)
		keys := make([]string, 0, len(c[s]))
		for k := range c[s] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "%s = %s\n", k, c[s][k])
		}
		b.WriteString("\n")
	}
	return b.String()
}

// httpRootDir is Ironic's http_root, on another filesystem than its
// caches (see config): a directory in /dev/shm, a tmpfs, beside the
// master cache of what the ipxe boot publishes there.
func httpRootDir(t testing.TB) string {
	d, err := os.MkdirTemp("/dev/shm", "bmlab-ironic-")
	if err != nil {
		t.Fatalf("ironictest: a directory in /dev/shm for Ironic's http_root: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	root := filepath.Join(d, "http")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	return root
}

// The schema is made once per test process and release (ironic-dbsync
// takes about 2 s) and copied for every Ironic.
var (
	dbMu    sync.Mutex
	dbTmpls = map[Release]string{}
	dbErrs  = map[Release]error{}
)

func templateDB(in install, dst string) error {
	dbMu.Lock()
	tmpl, done := dbTmpls[in.release]
	err := dbErrs[in.release]
	if !done && err == nil {
		tmpl, err = makeSchema(in)
		dbTmpls[in.release], dbErrs[in.release] = tmpl, err
	}
	dbMu.Unlock()
	if err != nil {
		return err
	}
	in2, err := os.Open(tmpl)
	if err != nil {
		return err
	}
	defer in2.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in2); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// makeSchema runs the release's ironic-dbsync into a database of its own,
// under /tmp (which an install in a root sees too).
func makeSchema(in install) (string, error) {
	d, err := os.MkdirTemp("", "bmlab-ironic-db-")
	if err != nil {
		return "", err
	}
	tmpl := filepath.Join(d, "ironic.sqlite")
	// A configuration of its own: only the database matters here.
	c := filepath.Join(d, "dbsync.conf")
	if err := os.WriteFile(c, []byte("[database]\nconnection = sqlite:///"+tmpl+"\n"), 0o600); err != nil {
		return "", err
	}
	args := in.argv("", "/usr/bin/ironic-dbsync", "--config-file", c, "create_schema")
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s: ironic-dbsync create_schema: %v\n%s", in, err, out)
	}
	return tmpl, nil
}

// listen opens a TCP listener on host in namespace ns ("" : the test's).
func listen(t testing.TB, ns, host string) net.Listener {
	t.Helper()
	return listenPort(t, ns, host, 0)
}

// listenPort listens on host:port (0: any free port) in namespace ns.
func listenPort(t testing.TB, ns, host string, port int) net.Listener {
	t.Helper()
	var ln net.Listener
	if err := netplumb.InNamespace(ns, func() error {
		var err error
		ln, err = net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		return err
	}); err != nil {
		t.Fatalf("ironictest: listen on %s: %v", host, err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// freePort reserves a port Ironic can bind on host in namespace ns, with
// testenv.Port: a port picked by listening and closing may be handed to any
// client socket before Ironic binds it.
func freePort(t testing.TB, ns, host string) int {
	t.Helper()
	var port int
	if err := netplumb.InNamespace(ns, func() error {
		port = testenv.Port(t, host)
		return nil
	}); err != nil {
		t.Fatalf("ironictest: a free port on %s: %v", host, err)
	}
	return port
}

// serve runs an HTTP server on ln until the test ends.
func serve(t testing.TB, ln net.Listener, h http.Handler) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
}

// files serves Ironic's http_root, and the files a test adds by path; it
// logs each request (time, client, method, path, status) in Dir/http.log:
// what a BMC or a network-booting node fetched, and when.
type files struct {
	root  http.Handler
	mu    sync.Mutex
	extra map[string]string
	log   string
}

func newFiles(root, log string) *files {
	return &files{root: http.FileServer(http.Dir(root)), extra: map[string]string{}, log: log}
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) { w.status = code; w.ResponseWriter.WriteHeader(code) }

func (f *files) add(path, src string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.extra[path] = src
}

func (f *files) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	defer func() {
		line := fmt.Sprintf("%s %s %s %s %d\n", time.Now().Format("15:04:05.000"), r.RemoteAddr, r.Method, r.URL.Path, sw.status)
		f.mu.Lock()
		defer f.mu.Unlock()
		if lf, err := os.OpenFile(f.log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			_, _ = lf.WriteString(line)
			lf.Close()
		}
	}()
	f.mu.Lock()
	src, ok := f.extra[r.URL.Path]
	f.mu.Unlock()
	if ok {
		http.ServeFile(sw, r, src)
		return
	}
	f.root.ServeHTTP(sw, r)
}
