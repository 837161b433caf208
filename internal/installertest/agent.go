package installertest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"
	"sigs.k8s.io/yaml"
)

// Environment variables of the agent commands.
const (
	// EnvAgentNodes, a JSON list of AgentNode, makes `agent wait-for
	// bootstrap-complete` play the agent's install on the lab's real
	// domains: for each node it waits until the node has booted the ISO
	// (its marker on the serial log) and powered off, writes the installed
	// OS (Image, the disk marker) onto its disk and starts it, as the
	// agent's reboot into the installed disk would.
	EnvAgentNodes = "FAKE_AGENT_NODES"
	// EnvAgentTimeout bounds each node's wait (a Go duration; default 3m).
	EnvAgentTimeout = "FAKE_AGENT_TIMEOUT"
)

// AgentNode is one node the fixture installs (EnvAgentNodes).
type AgentNode struct {
	Domain string `json:"domain"`
	Serial string `json:"serial"`
	Disk   string `json:"disk"`
	Image  string `json:"image"`
}

// AgentISOMarker starts the line the agent ISO prints on a node's serial
// console: "BMLAB-AGENT-ISO role=<role> host=<hostname>".
const AgentISOMarker = "BMLAB-AGENT-ISO"

// AgentInputs are the files `agent create image` consumed, kept in
// <dir>/.fake-agent/ for tests to read.
const AgentInputs = ".fake-agent"

// agentConfig is the part of agent-config.yaml the fixture reads.
type agentConfig struct {
	APIVersion   string `json:"apiVersion"`
	Kind         string `json:"kind"`
	RendezvousIP string `json:"rendezvousIP"`
	Hosts        []struct {
		Hostname   string `json:"hostname"`
		Role       string `json:"role"`
		Interfaces []struct {
			MACAddress string `json:"macAddress"`
		} `json:"interfaces"`
	} `json:"hosts"`
}

// bareMetalHosts are install-config's platform.baremetal.hosts, by name:
// their BMC address names the System, whose UUID is the node's SMBIOS UUID.
func bareMetalHosts(raw []byte) map[string]string {
	var ic struct {
		Platform struct {
			BareMetal *struct {
				Hosts []struct {
					Name string `json:"name"`
					BMC  struct {
						Address string `json:"address"`
					} `json:"bmc"`
				} `json:"hosts"`
			} `json:"baremetal"`
		} `json:"platform"`
	}
	out := map[string]string{}
	if yaml.Unmarshal(raw, &ic) != nil || ic.Platform.BareMetal == nil {
		return out
	}
	for _, h := range ic.Platform.BareMetal.Hosts {
		if i := strings.LastIndex(h.BMC.Address, "/Systems/"); i >= 0 {
			out[h.Name] = strings.ToLower(h.BMC.Address[i+len("/Systems/"):])
		}
	}
	return out
}

// createAgentImage is `agent create image`: it consumes install-config.yaml
// and agent-config.yaml (kept in AgentInputs), checks what the real
// installer would refuse first, and writes agent.x86_64.iso: a grub image
// that prints AgentISOMarker with the role and hostname of the node that
// boots it (found by its SMBIOS UUID, the System id of its BMC address)
// and powers the node off, and auth/.
func (r *run) createAgentImage() int {
	icRaw, err := os.ReadFile(filepath.Join(r.dir, "install-config.yaml"))
	if err == nil {
		if err := os.MkdirAll(filepath.Join(r.dir, AgentInputs), 0o700); err != nil {
			r.log("fatal", err.Error())
			return 1
		}
		if err := os.WriteFile(filepath.Join(r.dir, AgentInputs, "install-config.yaml"), icRaw, 0o600); err != nil {
			r.log("fatal", err.Error())
			return 1
		}
	}
	ic, ok := r.installConfig()
	if !ok {
		return ExitInstallConfigError
	}
	acPath := filepath.Join(r.dir, "agent-config.yaml")
	acRaw, err := os.ReadFile(acPath)
	if err != nil {
		r.log("fatal", "failed to fetch Agent Installer ISO: failed to load asset \"Agent Config\": "+err.Error())
		return ExitInstallConfigError
	}
	var ac agentConfig
	if err := yaml.UnmarshalStrict(acRaw, &ac); err != nil && yaml.Unmarshal(acRaw, &ac) != nil {
		r.log("fatal", "failed to fetch Agent Config: failed to unmarshal agent-config.yaml: "+err.Error())
		return ExitInstallConfigError
	}
	if msg := checkAgentConfig(ac, ic); msg != "" {
		r.log("fatal", "failed to fetch Agent Installer ISO: invalid Agent Config configuration: "+msg)
		return ExitInstallConfigError
	}
	r.log("info", "Consuming Agent Config from target directory")
	if err := os.WriteFile(filepath.Join(r.dir, AgentInputs, "agent-config.yaml"), acRaw, 0o600); err != nil {
		r.log("fatal", err.Error())
		return 1
	}
	os.Remove(acPath)
	uuids := bareMetalHosts(icRaw)
	if len(ac.Hosts) > 1 {
		// What the fixture cannot do (the real installer matches hosts by
		// their MACs, which grub cannot read here): said, not silently
		// left without a marker.
		for _, h := range ac.Hosts {
			if u, ok := uuids[h.Hostname]; ok && uuid.Validate(u) != nil {
				r.log("fatal", fmt.Sprintf("installer fixture: host %s's BMC address names System %q, not the node's UUID; the fixture finds the node that boots its ISO by its SMBIOS UUID only (a vendor's system id at a BMC of its own is not supported by the fixture)", h.Hostname, u))
				return ExitInstallConfigError
			}
		}
	}
	// One ISO, for the control plane's architecture (InfraEnv's
	// cpuArchitecture): agent.<arch>.iso.
	arch := RPMArch(ic.ControlPlane.Architecture)
	iso := filepath.Join(r.dir, "agent."+arch+".iso")
	var cfg strings.Builder
	cfg.WriteString("insmod smbios\nsmbios --type 1 --get-uuid 8 --set uuid\necho \"\"\n")
	for _, h := range ac.Hosts {
		line := fmt.Sprintf("%s role=%s host=%s", AgentISOMarker, h.Role, h.Hostname)
		switch u, ok := uuids[h.Hostname]; {
		case ok:
			fmt.Fprintf(&cfg, "if [ \"$uuid\" = \"%s\" ]; then echo \"%s\"; fi\n", u, line)
		case len(ac.Hosts) == 1:
			fmt.Fprintf(&cfg, "echo \"%s\"\n", line)
		}
	}
	cfg.WriteString("halt\n")
	if err := buildISO(iso, cfg.String(), arch); err != nil {
		r.log("fatal", "failed to write asset (Agent Installer ISO) to disk: "+err.Error())
		return 1
	}
	if err := writeAll(r.dir, map[string][]byte{
		"auth/kubeconfig":         []byte("apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    server: https://api." + ic.ClusterDomain() + ":6443\n  name: " + ic.Metadata.Name + "\n"),
		"auth/kubeadmin-password": []byte(KubeadminPassword),
		"rendezvousIP":            []byte(ac.RendezvousIP),
	}); err != nil {
		r.log("fatal", err.Error())
		return 1
	}
	r.log("info", "Generated ISO at "+iso)
	return 0
}

// checkAgentConfig is the first of the real installer's agent-config
// checks: the rendezvous address, roles, and MACs.
func checkAgentConfig(ac agentConfig, ic InstallConfig) string {
	if ac.APIVersion != "v1beta1" || ac.Kind != "AgentConfig" {
		return fmt.Sprintf("apiVersion %q kind %q: want v1beta1 AgentConfig", ac.APIVersion, ac.Kind)
	}
	if _, err := netip.ParseAddr(ac.RendezvousIP); err != nil {
		return "rendezvousIP: Invalid value: " + fmt.Sprintf("%q", ac.RendezvousIP)
	}
	macs := map[string]bool{}
	masters := 0
	for i, h := range ac.Hosts {
		if h.Role == "master" {
			masters++
		}
		for _, nic := range h.Interfaces {
			if macs[nic.MACAddress] {
				return fmt.Sprintf("Hosts[%d].Interfaces: Invalid value: %q: duplicate MAC address found", i, nic.MACAddress)
			}
			macs[nic.MACAddress] = true
		}
	}
	if len(ac.Hosts) > 0 && masters != ic.Masters() {
		return fmt.Sprintf("Hosts: Invalid value: %d hosts with role master, controlPlane.replicas is %d", masters, ic.Masters())
	}
	return ""
}

// buildISO makes a UEFI grub rescue image for one architecture (x86_64,
// aarch64) with cfg as its grub.cfg, after the lines that put grub's
// console on the machine's serial port: the image boots a machine of that
// architecture only, as the installer's ISOs do (the lab's nodes are UEFI).
func buildISO(out, cfg, arch string) error {
	platform, console := "x86_64-efi", "serial --unit=0 --speed=115200\nterminal_input serial\nterminal_output serial\n"
	if arch == "aarch64" {
		// AAVMF's console is the serial port; grub for arm64-efi has no
		// COM port of its own.
		platform, console = "arm64-efi", "terminal_output console\n"
	}
	cfg = console + cfg
	work, err := os.MkdirTemp("", "fake-agent-iso-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if err := os.MkdirAll(filepath.Join(work, "boot", "grub"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(work, "boot", "grub", "grub.cfg"), []byte(cfg), 0o644); err != nil {
		return err
	}
	if b, err := exec.Command("grub-mkrescue", "-d", "/usr/lib/grub/"+platform, "-o", out, work, "--", "-volid", "AGENT_ISO").CombinedOutput(); err != nil {
		return fmt.Errorf("grub-mkrescue: %v: %s", err, b)
	}
	return os.Chmod(out, 0o644)
}

// agentNodes are the nodes the variable env lists (JSON; none when it is
// unset), and how long each may take (EnvAgentTimeout, default 3 minutes).
func agentNodes(env string) ([]AgentNode, time.Duration, error) {
	raw := os.Getenv(env)
	if raw == "" {
		return nil, 0, nil
	}
	var nodes []AgentNode
	if err := json.Unmarshal([]byte(raw), &nodes); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", env, err)
	}
	if nodes == nil {
		nodes = []AgentNode{} // null: set, with no node
	}
	timeout := 3 * time.Minute
	if d, err := time.ParseDuration(os.Getenv(EnvAgentTimeout)); err == nil && d > 0 {
		timeout = d
	}
	return nodes, timeout, nil
}

// playAgent does, for EnvAgentNodes, what the agent does on each node
// once it booted the ISO: write the installed OS on the disk, then boot it.
func (r *run) playAgent() error {
	nodes, timeout, err := agentNodes(EnvAgentNodes)
	if err != nil || nodes == nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(r.dir, AgentInputs), 0o700); err != nil {
		return err
	}
	for _, n := range nodes {
		done := filepath.Join(r.dir, AgentInputs, "installed-"+n.Domain)
		if _, err := os.Stat(done); err == nil {
			continue // installed by an earlier wait
		}
		deadline := time.Now().Add(timeout)
		for {
			log, _ := os.ReadFile(n.Serial)
			st, _ := exec.Command("virsh", "-c", "qemu:///system", "domstate", n.Domain).Output()
			if strings.Contains(string(log), AgentISOMarker) && strings.TrimSpace(string(st)) == "shut off" {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("node %s did not boot the agent ISO and power off within %s (state %q)", n.Domain, timeout, strings.TrimSpace(string(st)))
			}
			time.Sleep(250 * time.Millisecond)
		}
		r.log("info", "Host "+n.Domain+": Writing image to disk")
		if b, err := exec.Command("qemu-img", "convert", "-n", "-f", "raw", "-O", "qcow2", n.Image, n.Disk).CombinedOutput(); err != nil {
			return fmt.Errorf("write the installed OS to %s: %v: %s", n.Disk, err, b)
		}
		r.log("info", "Host "+n.Domain+": Rebooting")
		if b, err := exec.Command("virsh", "-c", "qemu:///system", "start", n.Domain).CombinedOutput(); err != nil {
			return fmt.Errorf("start %s: %v: %s", n.Domain, err, b)
		}
		if err := os.WriteFile(done, nil, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// OCMain is the fixture's `oc` (the same binary, run as oc): `adm
// node-image create --dir D` reads D/nodes-config.yaml and writes
// D/node.x86_64.iso, an ISO that prints AgentISOMarker with role worker
// (and the hostname when it adds one node) and powers off; `adm node-image
// monitor --ip-addresses IPS` plays the agent's install for EnvAgentNodes,
// as `agent wait-for bootstrap-complete` does, and reports the nodes
// joined. Both need --kubeconfig naming a file, as oc does.
func OCMain(args []string, stdout, stderr io.Writer) int {
	r := &run{stdout: stdout, stderr: stderr, dir: ".", level: "info", sig: make(chan os.Signal, 1)}
	var words []string
	flags := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "--") {
			name, val, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			if !ok {
				if i+1 == len(args) {
					fmt.Fprintf(stderr, "error: flag needs an argument: --%s\n", name)
					return 1
				}
				val = args[i+1]
				i++
			}
			flags[name] = val
			continue
		}
		words = append(words, a)
	}
	if d := flags["dir"]; d != "" {
		r.dir = d
	}
	if _, err := os.Stat(flags["kubeconfig"]); err != nil {
		fmt.Fprintf(stderr, "error: stat %s: no such file or directory\n", flags["kubeconfig"])
		return 1
	}
	cmd := strings.Join(words, " ")
	if err := r.record("oc " + cmd); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	switch cmd {
	case "adm node-image create":
		raw, err := os.ReadFile(filepath.Join(r.dir, "nodes-config.yaml"))
		if err != nil {
			fmt.Fprintf(stderr, "error: %v\n", err)
			return 1
		}
		var nc struct {
			CPUArchitecture string `json:"cpuArchitecture"`
			Hosts           []struct {
				Hostname string `json:"hostname"`
			} `json:"hosts"`
		}
		if err := yaml.UnmarshalStrict(raw, &nc); err != nil && yaml.Unmarshal(raw, &nc) != nil || len(nc.Hosts) == 0 {
			fmt.Fprintf(stderr, "error: nodes-config.yaml: no hosts (%v)\n", err)
			return 1
		}
		host := "any"
		if len(nc.Hosts) == 1 {
			host = nc.Hosts[0].Hostname
		}
		// The nodes' architecture: nodes-config.yaml's, else the
		// cluster's (x86_64: the fixture's clusters are).
		arch := cmp.Or(nc.CPUArchitecture, "x86_64")
		if arch != "x86_64" && arch != "aarch64" {
			fmt.Fprintf(stderr, "error: nodes-config.yaml: cpuArchitecture %q: want x86_64 or aarch64\n", arch)
			return 1
		}
		iso := filepath.Join(r.dir, "node."+arch+".iso")
		cfg := "echo \"\"\n" + fmt.Sprintf("echo \"%s role=worker host=%s\"\nhalt\n", AgentISOMarker, host)
		if err := buildISO(iso, cfg, arch); err != nil {
			fmt.Fprintf(stderr, "error: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "Generated ISO at %s\n", iso)
		return 0
	case "adm node-image monitor":
		if err := r.playAgent(); err != nil {
			fmt.Fprintf(stderr, "error: %v\n", err)
			return 1
		}
		for _, ip := range strings.Split(flags["ip-addresses"], ",") {
			fmt.Fprintf(stdout, "Node %s: Node joined cluster\n", ip)
		}
		return 0
	}
	fmt.Fprintf(stderr, "error: unknown command %q for \"oc\"\n", cmd)
	return 1
}
