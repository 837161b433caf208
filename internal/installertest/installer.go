package installertest

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Environment variables the fixture installer reads.
const (
	// EnvIgnitionVersion is the spec version of the ignition configs it
	// writes (default 3.2.0).
	EnvIgnitionVersion = "FAKE_INSTALLER_IGNITION_VERSION"
	// EnvBootstrapExit and EnvInstallExit are the exit codes of
	// `wait-for bootstrap-complete` and `wait-for install-complete`: a
	// comma-separated list, one per call, the last repeating ("5,5,0"
	// fails twice, then succeeds). Default 0.
	EnvBootstrapExit = "FAKE_INSTALLER_BOOTSTRAP_EXIT"
	EnvInstallExit   = "FAKE_INSTALLER_INSTALL_EXIT"
	// EnvWait makes each wait-for wait this long (a Go duration) before it
	// answers; an interrupt ends it with the installer's interrupt code.
	EnvWait = "FAKE_INSTALLER_WAIT"
)

// CallsFile, in the installer's directory, gets one line per run: its
// command words ("create manifests", "wait-for bootstrap-complete").
const CallsFile = ".fake-installer-calls"

// StateFile is the installer's state, where it keeps the install-config it
// consumed.
const StateFile = ".openshift_install_state.json"

// LogFile is the installer's own log in its directory.
const LogFile = ".openshift_install.log"

// The installer's exit codes (cmd/openshift-install/command).
const (
	ExitInstallConfigError = 3
	ExitBootstrapFailed    = 5
	ExitInstallFailed      = 6
	ExitInterrupt          = 8
)

// Calls returns the commands the fixture ran in dir, in order.
func Calls(dir string) []string {
	b, err := os.ReadFile(filepath.Join(dir, CallsFile))
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// Main runs the fixture installer with args (os.Args[1:]) and returns its
// exit code. It prints on stderr in the installer's non-terminal format
// (level=info msg="...").
func Main(args []string, stdout, stderr io.Writer) int {
	r := &run{stdout: stdout, stderr: stderr, dir: ".", level: "info", sig: make(chan os.Signal, 1)}
	signal.Notify(r.sig, os.Interrupt)
	defer signal.Stop(r.sig)
	var words []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--dir" || a == "--log-level":
			if i+1 == len(args) {
				fmt.Fprintf(stderr, "Error: flag needs an argument: %s\n", a)
				return 1
			}
			if a == "--dir" {
				r.dir = args[i+1]
			} else {
				r.level = args[i+1]
			}
			i++
		case strings.HasPrefix(a, "--dir="):
			r.dir = strings.TrimPrefix(a, "--dir=")
		case strings.HasPrefix(a, "--log-level="):
			r.level = strings.TrimPrefix(a, "--log-level=")
		case strings.HasPrefix(a, "-"):
			fmt.Fprintf(stderr, "Error: unknown flag: %s\n", a)
			return 1
		default:
			words = append(words, a)
		}
	}
	cmd := strings.Join(words, " ")
	if cmd != "version" {
		if err := r.record(cmd); err != nil {
			r.log("fatal", err.Error())
			return 1
		}
	}
	switch cmd {
	case "version":
		fmt.Fprintf(stdout, "openshift-install %s\nbuilt from commit 5d7a9c1e0f3b2a4c6e8d0f1a3b5c7e9d1f2a4b6c\n"+
			"release image quay.io/openshift-release-dev/ocp-release@sha256:%s\nrelease architecture %s\n",
			Version, strings.Repeat("0f", 32), ReleaseArch())
		return 0
	case "create manifests":
		return r.createManifests()
	case "create ignition-configs":
		return r.createIgnition()
	case "wait-for bootstrap-complete":
		return r.waitFor(cmd, EnvBootstrapExit, bootstrapLines)
	case "create single-node-ignition-config":
		return r.createSingleNode()
	case "wait-for install-complete":
		if ic, ok := r.installConfig(); ok && ic.BootstrapInPlace != nil {
			if err := r.playLive(ic); err != nil {
				r.log("error", err.Error())
				return ExitInstallFailed
			}
		}
		return r.waitFor(cmd, EnvInstallExit, installLines)
	case "agent create image":
		return r.createAgentImage()
	case "agent wait-for bootstrap-complete":
		if err := r.playAgent(); err != nil {
			r.log("error", err.Error())
			return ExitBootstrapFailed
		}
		return r.waitFor(cmd, EnvBootstrapExit, bootstrapLines)
	case "agent wait-for install-complete":
		return r.waitFor(cmd, EnvInstallExit, installLines)
	}
	fmt.Fprintf(stderr, "Error: unknown command %q for \"openshift-install\"\nRun 'openshift-install --help' for usage.\n", cmd)
	return 1
}

type run struct {
	stdout, stderr io.Writer
	dir, level     string
	// sig gets interrupts from the start, as the real installer's handler
	// does: one that arrived before a wait began would otherwise kill the
	// process without its "Received interrupt signal" line.
	sig chan os.Signal
}

var levels = map[string]int{"debug": 0, "info": 1, "warning": 2, "error": 3, "fatal": 4}

func (r *run) log(level, msg string) {
	if f, err := os.OpenFile(filepath.Join(r.dir, LogFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err == nil {
		fmt.Fprintf(f, "time=%q level=%s msg=%q\n", time.Now().UTC().Format(time.RFC3339), level, msg)
		f.Close()
	}
	if levels[level] >= levels[r.level] {
		fmt.Fprintf(r.stderr, "level=%s msg=%q\n", level, msg)
	}
}

func (r *run) record(cmd string) error {
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(r.dir, CallsFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = fmt.Fprintln(f, cmd)
	return err
}

// state is what the fixture keeps between runs, like the installer's
// state file: the install-config it consumed.
type state struct {
	InstallConfig []byte `json:"*installconfig.InstallConfig"`
}

// installConfig consumes install-config.yaml (removing it, as the installer
// does) into the state, or reads it from the state of an earlier run.
func (r *run) installConfig() (InstallConfig, bool) {
	p := filepath.Join(r.dir, "install-config.yaml")
	sp := filepath.Join(r.dir, StateFile)
	raw, err := os.ReadFile(p)
	if err == nil {
		r.log("info", "Consuming Install Config from target directory")
		b, _ := json.Marshal(state{InstallConfig: raw})
		if err := os.WriteFile(sp, b, 0o640); err != nil {
			r.log("fatal", err.Error())
			return InstallConfig{}, false
		}
		os.Remove(p)
	} else {
		b, serr := os.ReadFile(sp)
		var st state
		if serr != nil || json.Unmarshal(b, &st) != nil || len(st.InstallConfig) == 0 {
			r.log("fatal", "failed to fetch Master Machines: failed to load asset \"Install Config\": failed to create install config: invalid \"install-config.yaml\" file: open "+p+": no such file or directory")
			return InstallConfig{}, false
		}
		raw = st.InstallConfig
	}
	ic, err := ParseInstallConfig(raw)
	if err != nil {
		r.log("fatal", "failed to fetch Install Config: "+err.Error())
		return ic, false
	}
	return ic, true
}

func (r *run) createManifests() int {
	ic, ok := r.installConfig()
	if !ok {
		return ExitInstallConfigError
	}
	if ic.Workers() == 0 {
		r.log("warning", "Making control-plane schedulable by setting MastersSchedulable to true for Scheduler cluster settings")
	}
	if err := writeAll(r.dir, Manifests(ic)); err != nil {
		r.log("fatal", err.Error())
		return 1
	}
	r.log("info", "Manifests created in: "+filepath.Join(r.dir, "manifests")+" and "+filepath.Join(r.dir, "openshift"))
	return 0
}

func (r *run) createIgnition() int {
	ic, ok := r.installConfig()
	if !ok {
		return ExitInstallConfigError
	}
	files, err := r.ignitionConfigs(ic)
	if err != nil {
		r.log("fatal", err.Error())
		return 1
	}
	if err := writeAll(r.dir, files); err != nil {
		r.log("fatal", err.Error())
		return 1
	}
	r.log("info", "Ignition-Configs created in: "+r.dir+" and "+filepath.Join(r.dir, "auth"))
	return 0
}

// ignitionConfigs are the ignition configs the installer makes of ic and
// the manifests on disk, which it consumes (none on disk: generated, as
// the installer would), in the spec version EnvIgnitionVersion names
// (default 3.2.0).
func (r *run) ignitionConfigs(ic InstallConfig) (map[string][]byte, error) {
	manifests, err := r.consumeManifests()
	if err != nil {
		return nil, err
	}
	if manifests == nil {
		manifests = Manifests(ic)
	}
	return IgnitionConfigs(ic, cmp.Or(os.Getenv(EnvIgnitionVersion), "3.2.0"), manifests), nil
}

// consumeManifests reads manifests/ and openshift/ (nil when neither
// exists) and removes them, as the installer consumes them into its state.
func (r *run) consumeManifests() (map[string][]byte, error) {
	var out map[string][]byte
	for _, sub := range []string{"manifests", "openshift"} {
		d := filepath.Join(r.dir, sub)
		entries, err := os.ReadDir(d)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if sub == "manifests" {
			r.log("info", "Consuming Common Manifests from target directory")
		} else {
			r.log("info", "Consuming Openshift Manifests from target directory")
		}
		if out == nil {
			out = map[string][]byte{}
		}
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(d, e.Name()))
			if err != nil {
				return nil, err
			}
			out[sub+"/"+e.Name()] = b
		}
		if err := os.RemoveAll(d); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func writeAll(dir string, files map[string][]byte) error {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := filepath.Join(dir, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			return err
		}
		if err := os.WriteFile(p, files[n], 0o640); err != nil {
			return err
		}
	}
	return nil
}

// exitCode is the call-th (from 1) code of a comma-separated list, the
// last repeating.
func exitCode(list string, call int) (int, error) {
	if list == "" {
		return 0, nil
	}
	codes := strings.Split(list, ",")
	s := codes[min(call, len(codes))-1]
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("exit code %q in %q: want integers", s, list)
	}
	return n, nil
}

// wait blocks for EnvWait; false when interrupted.
func (r *run) wait() bool {
	d, _ := time.ParseDuration(os.Getenv(EnvWait))
	if d <= 0 {
		return true
	}
	select {
	case <-time.After(d):
		return true
	case <-r.sig:
		r.log("warning", "Received interrupt signal")
		return false
	}
}

func (r *run) callCount(cmd string) int {
	n := 0
	for _, c := range Calls(r.dir) {
		if c == cmd {
			n++
		}
	}
	return n
}

// waitFor answers a wait-for command: the call's exit code from env, the
// lines lines gives for the cluster (start, then failure or success).
func (r *run) waitFor(cmd, env string, lines func(r *run, ic InstallConfig, stage string)) int {
	ic, ok := r.installConfig()
	if !ok {
		return ExitInstallConfigError
	}
	code, err := exitCode(os.Getenv(env), r.callCount(cmd))
	if err != nil {
		r.log("fatal", err.Error())
		return 1
	}
	lines(r, ic, "start")
	if !r.wait() {
		return ExitInterrupt
	}
	if code != 0 {
		lines(r, ic, "fail")
		return code
	}
	lines(r, ic, "ok")
	return 0
}

func bootstrapLines(r *run, ic InstallConfig, stage string) {
	api := "https://api." + ic.ClusterDomain() + ":6443"
	switch stage {
	case "start":
		r.log("info", "Waiting up to 20m0s (until 3:04PM UTC) for the Kubernetes API at "+api+"...")
	case "fail":
		r.log("error", "Attempted to gather ClusterOperator status after wait failure: listing ClusterOperator objects: Get \""+api+"/apis/config.openshift.io/v1/clusteroperators\": dial tcp: i/o timeout")
		r.log("info", "Use the following commands to gather logs from the cluster")
		r.log("info", "openshift-install gather bootstrap --help")
		r.log("error", "Bootstrap failed to complete: Get \""+api+"/version\": dial tcp: i/o timeout")
		r.log("error", "Failed waiting for Kubernetes API. This error usually happens when there is a problem on the bootstrap host that prevents creating a temporary control plane.")
	case "ok":
		r.log("info", "API v1.31.6 up")
		r.log("info", "Waiting up to 45m0s (until 3:29PM UTC) for bootstrapping to complete...")
		r.log("info", "It is now safe to remove the bootstrap resources")
		r.log("info", "Time elapsed: 12m31s")
	}
}

func installLines(r *run, ic InstallConfig, stage string) {
	switch stage {
	case "start":
		r.log("info", "Waiting up to 40m0s (until 3:44PM UTC) for the cluster at https://api."+ic.ClusterDomain()+":6443 to initialize...")
	case "fail":
		r.log("error", "Cluster operator authentication Degraded is True with OAuthServerRouteEndpointAccessibleController_SyncError: OAuthServerRouteEndpointAccessibleControllerDegraded: route \"openshift-authentication/oauth-openshift\": status does not have a valid host address")
		r.log("error", "Cluster initialization failed because one or more operators are not functioning properly.")
		r.log("fatal", "failed to initialize the cluster: Cluster operators authentication, console, ingress are not available")
	case "ok":
		r.log("info", "Checking to see if there is a route at openshift-console/console...")
		r.log("info", "Install complete!")
		r.log("info", "To access the cluster as the system:admin user when using 'oc', run 'export KUBECONFIG="+filepath.Join(r.dir, "auth", "kubeconfig")+"'")
		r.log("info", "Access the OpenShift web-console here: https://console-openshift-console.apps."+ic.ClusterDomain())
		r.log("info", "Login to the console with user: \"kubeadmin\", and password: \""+KubeadminPassword+"\"")
		r.log("info", "Time elapsed: 25m3s")
	}
}
