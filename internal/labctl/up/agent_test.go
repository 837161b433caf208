package up_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/bmlab/bmlab/internal/installertest"
	"github.com/bmlab/bmlab/internal/testenv"
)

// agentLab writes an agent-mode lab file: the machine network lives only
// inside libvirtd's namespace (labci).
func agentLab(t *testing.T, dir, name, subnet string, port int, cluster string) string {
	t.Helper()
	cfg := labFile(t, dir, name, port)
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lab := strings.ReplaceAll(string(b), "10.198.61.", subnet+".")
	lab = strings.Replace(lab, "cluster:\n", "cluster:\n  installer: "+installertest.Installer(t)+"\n  oc: "+installertest.OC(t)+"\n"+cluster, 1)
	if err := os.WriteFile(cfg, []byte(lab), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// bmcGet reads a Redfish resource of the lab from inside labci, where the
// nodes reach their BMCs.
func bmcGet(t *testing.T, url string, out any) int {
	t.Helper()
	hc := labClient("labci", 10*time.Second, &tls.Config{InsecureSkipVerify: true})
	code, body := redfishSend(t, hc, http.MethodGet, url, "admin", "lab-pass", "")
	if out != nil {
		_ = json.Unmarshal(body, out)
	}
	return code
}

type agentNode struct {
	Name, Role, MAC, IP, UUID, BMC string
}

func agentNodes(t *testing.T, common []string) []agentNode {
	t.Helper()
	var st struct {
		Nodes []struct{ Name, Role, BootMAC, IP, UUID, BMC string }
	}
	statusJSON(t, &st, common...)
	var nodes []agentNode
	for _, n := range st.Nodes {
		nodes = append(nodes, agentNode{n.Name, n.Role, n.BootMAC, n.IP, n.UUID, n.BMC})
	}
	return nodes
}

// TestAgentEndToEnd runs `labctl up --mode agent` on real libvirt and
// qemu for a single-node cluster and a compact one, with the fixture
// installer: every node boots the agent ISO from its virtual CD through
// its BMC (its role on the serial console), the Once override is gone
// after that boot, the next boot comes from the installed disk, the media
// is ejected after install-complete; a second up changes nothing; down
// leaves nothing. Each adds a worker on day 2 (addWorker); the compact
// cluster is a mixed one, x86_64 masters and aarch64 workers, installed
// from a multi-arch release: install-config says amd64 and arm64, the
// agent ISO is x86_64, and the aarch64 worker boots the node ISO the
// cluster makes for it (node.aarch64.iso) through its BMC.
func TestAgentEndToEnd(t *testing.T) {
	testenv.Libvirt(t)
	for _, tt := range []struct {
		name, lab, subnet, cluster string
		port, nodes                int
		workerArch                 string
	}{
		{"sno", "agsno", "10.198.64", "  masters: {count: 1}\n  agent: {staticIPs: true, mediaPort: 18791}\n", 18790, 1, "x86_64"},
		{"compact-mixed", "agcmp", "10.198.65", "  workers: {count: 0, arch: aarch64}\n  agent: {mediaPort: 18793}\n", 18792, 3, "aarch64"},
	} {
		t.Run(tt.name, func(t *testing.T) { agentEndToEnd(t, tt.lab, tt.subnet, tt.cluster, tt.port, tt.nodes, tt.workerArch) })
	}
}

func agentEndToEnd(t *testing.T, name, subnet, cluster string, port, count int, workerArch string) {
	if workerArch != "x86_64" {
		// A mixed cluster installs from a multi-arch release payload.
		t.Setenv(installertest.EnvReleaseArch, "multi")
	}
	dir := testenv.QemuDir(t)
	cfg := agentLab(t, dir, name, subnet, port, cluster)
	common := []string{"-f", cfg, "--netns", "labci", "--mode", "agent", "--profile", "tiny", "--vbmcd", testenv.Binary(t, "vbmcd")}
	t.Cleanup(func() {
		if out, err := labctlRun(t, append([]string{"down"}, common...)...); err != nil {
			t.Errorf("down: %v\n%s", err, out)
		}
		if left := leftovers(t, name, "bmnat-"+name); len(left) > 0 {
			t.Errorf("after down: %v", left)
		}
	})
	// The nodes' disks are where the plan puts them; the fixture writes
	// the installed OS (the disk marker) there, as the agent would.
	out, err := labctlRun(t, append([]string{"up", "--until", "bmcs"}, common...)...)
	if err != nil {
		t.Fatalf("up --until bmcs: %v\n%s", err, out)
	}
	nodes := agentNodes(t, common)
	if len(nodes) != count {
		t.Fatalf("%d nodes, want %d", len(nodes), count)
	}
	var fake []installertest.AgentNode
	for _, n := range nodes {
		fake = append(fake, installertest.AgentNode{Domain: n.Name, Serial: filepath.Join(dir, ".bmlab", "logs", n.Name+".serial.log"),
			Disk: filepath.Join(dir, ".bmlab", "disks", n.Name+".qcow2"), Image: testenv.MarkerDisk(t)})
	}
	spec, _ := json.Marshal(fake)
	t.Setenv(installertest.EnvAgentNodes, string(spec))

	if count == 1 {
		// A bootstrap that fails keeps every node and says where the logs
		// are and how to gather the rendezvous host's; up again resumes.
		t.Setenv(installertest.EnvBootstrapExit, "5,0")
		_, err = labctlRun(t, append([]string{"up"}, common...)...)
		if err == nil || !strings.Contains(err.Error(), "the bootstrap did not complete; every node is kept") ||
			!strings.Contains(err.Error(), "ssh core@"+nodes[0].IP+" agent-gather") || !strings.Contains(err.Error(), filepath.Join(dir, "install", ".openshift_install.log")) {
			t.Fatalf("up with a failing bootstrap = %v", err)
		}
		if left := leftovers(t, name); !strings.Contains(strings.Join(left, " "), "list "+nodes[0].Name) {
			t.Fatalf("after a failed bootstrap the node is gone: %v", left)
		}
	}
	start := time.Now()
	out, err = labctlRun(t, append([]string{"up"}, common...)...)
	if err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	t.Logf("up from bmcs to install-complete took %s", time.Since(start))
	for _, want := range []string{"✓ install-config", "✓ image", "✓ media", "✓ bootstrap-complete", "✓ install-complete"} {
		if !strings.Contains(out, want) {
			t.Errorf("up output lacks %q", want)
		}
	}

	// What the installer was given: agent-config's rendezvous address is
	// the first master's, each host has its node's MAC and role;
	// install-config's hosts have their BMC addresses (none for SNO).
	install := filepath.Join(dir, "install")
	var ac struct {
		RendezvousIP string
		Hosts        []struct {
			Hostname, Role string
			Interfaces     []struct{ MACAddress string }
			NetworkConfig  *struct{} `json:"networkConfig"`
		}
	}
	b, err := os.ReadFile(filepath.Join(install, installertest.AgentInputs, "agent-config.yaml"))
	if err != nil {
		t.Fatalf("the fixture kept no agent-config: %v", err)
	}
	if err := yaml.Unmarshal(b, &ac); err != nil {
		t.Fatal(err)
	}
	if ac.RendezvousIP != nodes[0].IP || nodes[0].Role != "master" {
		t.Errorf("rendezvousIP %s, want the first master's %s", ac.RendezvousIP, nodes[0].IP)
	}
	for i, h := range ac.Hosts {
		n := nodes[i]
		if h.Hostname != n.Name || h.Role != n.Role || len(h.Interfaces) != 1 || !strings.EqualFold(h.Interfaces[0].MACAddress, n.MAC) {
			t.Errorf("agent-config host %d = %+v, want %s %s %s", i, h, n.Name, n.Role, n.MAC)
		}
		if (h.NetworkConfig != nil) != (count == 1) {
			t.Errorf("host %s: networkConfig %v, want static addresses only in the SNO lab", h.Hostname, h.NetworkConfig != nil)
		}
	}
	b, err = os.ReadFile(filepath.Join(install, installertest.AgentInputs, "install-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ic struct {
		ControlPlane struct {
			Replicas     int
			Architecture string
		}
		Compute  []struct{ Architecture string }
		Platform struct {
			None      *struct{} `json:"none"`
			BareMetal *struct {
				ProvisioningNetwork string
				Hosts               []struct {
					Name string
					BMC  struct{ Address string }
				}
			} `json:"baremetal"`
		}
	}
	if err := yaml.Unmarshal(b, &ic); err != nil {
		t.Fatal(err)
	}
	wantCompute := map[string]string{"x86_64": "amd64", "aarch64": "arm64"}[workerArch]
	if ic.ControlPlane.Architecture != "amd64" || len(ic.Compute) != 1 || ic.Compute[0].Architecture != wantCompute {
		t.Errorf("install-config architectures: controlPlane %q, compute %+v; want amd64 and %s", ic.ControlPlane.Architecture, ic.Compute, wantCompute)
	}
	if _, err := os.Stat(filepath.Join(install, "agent.x86_64.iso")); err != nil {
		t.Errorf("the agent ISO is not the control plane's architecture's: %v", err)
	}
	switch {
	case count == 1 && (ic.Platform.None == nil || ic.ControlPlane.Replicas != 1):
		t.Errorf("SNO install-config: platform none %v, replicas %d", ic.Platform.None != nil, ic.ControlPlane.Replicas)
	case count > 1 && (ic.Platform.BareMetal == nil || len(ic.Platform.BareMetal.Hosts) != count || ic.Platform.BareMetal.ProvisioningNetwork != "Disabled"):
		t.Errorf("install-config platform: %+v", ic.Platform)
	case count > 1:
		for i, h := range ic.Platform.BareMetal.Hosts {
			if h.Name != nodes[i].Name || h.BMC.Address != nodes[i].BMC {
				t.Errorf("install-config host %d: %s %s, want %s %s", i, h.Name, h.BMC.Address, nodes[i].Name, nodes[i].BMC)
			}
		}
	}

	// Each node booted the ISO once, as its role, then its disk; the Once
	// override is consumed and the CD is empty.
	for _, n := range nodes {
		log := filepath.Join(dir, ".bmlab", "logs", n.Name+".serial.log")
		iso := fmt.Sprintf("%s role=%s host=%s", installertest.AgentISOMarker, n.Role, n.Name)
		ok := testenv.WaitFor(60*time.Second, func() bool { return testenv.Count(log, testenv.DiskMarker) > 0 })
		data, _ := os.ReadFile(log)
		if !ok || !strings.Contains(string(data), iso) || strings.Index(string(data), iso) > strings.Index(string(data), testenv.DiskMarker) {
			t.Errorf("%s: serial log wants %q, then %q:\n%s", n.Name, iso, testenv.DiskMarker, data)
		}
		if c := testenv.Count(log, installertest.AgentISOMarker); c != 1 {
			t.Errorf("%s booted the ISO %d times, want once", n.Name, c)
		}
		sysURL := strings.TrimPrefix(n.BMC, "redfish-virtualmedia+")
		var sys struct {
			PowerState string
			Boot       struct{ BootSourceOverrideEnabled string }
		}
		bmcGet(t, sysURL, &sys)
		if sys.Boot.BootSourceOverrideEnabled != "Disabled" || sys.PowerState != "On" {
			t.Errorf("%s: power %s, boot override %s; want On and the Once override consumed", n.Name, sys.PowerState, sys.Boot.BootSourceOverrideEnabled)
		}
		var cd map[string]any
		bmcGet(t, sysURL+"/VirtualMedia/Cd", &cd)
		if cd["Inserted"] != false {
			t.Errorf("%s: the ISO is still inserted after install-complete: %v", n.Name, cd)
		}
	}

	// up again changes nothing.
	out, err = labctlRun(t, append([]string{"up"}, common...)...)
	if err != nil {
		t.Fatalf("second up: %v\n%s", err, out)
	}
	if n := strings.Count(out, "(no change)"); n != 10 {
		t.Errorf("second up: %d steps without change, want all 10:\n%s", n, out)
	}
	addWorker(t, dir, name, workerArch, count, common)
}

// addWorker adds a worker of the workers' architecture to the running
// cluster of masters nodes (day 2): the cluster's node ISO (oc adm
// node-image create, for that architecture) boots on the new node through
// its BMC, as its role, then its installed disk; status shows it; the
// installer's files stay those of the cluster installed, so up still
// changes nothing; down (the test's cleanup) removes it with the rest.
func addWorker(t *testing.T, dir, name, arch string, masters int, common []string) {
	worker := name + "-worker-0"
	serial := filepath.Join(dir, ".bmlab", "logs", worker+".serial.log")
	disk := testenv.MarkerDisk(t)
	if arch == "aarch64" {
		disk = testenv.MarkerDiskArm64(t)
	}
	spec, _ := json.Marshal([]installertest.AgentNode{{Domain: worker, Serial: serial,
		Disk: filepath.Join(dir, ".bmlab", "disks", worker+".qcow2"), Image: disk}})
	t.Setenv(installertest.EnvAgentNodes, string(spec))
	began := time.Now()
	out, err := labctlRun(t, append([]string{"add-node", "--role", "worker", "--count", "1"}, common...)...)
	if err != nil {
		t.Fatalf("add-node: %v\n%s", err, out)
	}
	t.Logf("add-node of an %s worker took %s", arch, time.Since(began).Round(100*time.Millisecond))
	if _, err := os.Stat(filepath.Join(dir, ".bmlab", "node-image", "node."+arch+".iso")); err != nil {
		t.Errorf("the node ISO is not made for the worker's architecture: %v", err)
	}
	for _, want := range []string{"✓ node-image", "✓ media", "✓ join", worker + " joined the cluster"} {
		if !strings.Contains(out, want) {
			t.Errorf("add-node output lacks %q", want)
		}
	}
	iso := fmt.Sprintf("%s role=worker host=%s", installertest.AgentISOMarker, worker)
	if !testenv.WaitFor(60*time.Second, func() bool { return testenv.Count(serial, testenv.DiskMarker) > 0 }) {
		data, _ := os.ReadFile(serial)
		t.Fatalf("%s did not boot its installed disk:\n%s", worker, data)
	}
	if data, _ := os.ReadFile(serial); !strings.Contains(string(data), iso) {
		t.Errorf("%s: serial log lacks %q:\n%s", worker, iso, data)
	}
	nodes := agentNodes(t, common)
	if len(nodes) != masters+1 || nodes[masters].Name != worker {
		t.Fatalf("status after add-node: %+v, want the masters and %s", nodes, worker)
	}
	sysURL := strings.TrimPrefix(nodes[masters].BMC, "redfish-virtualmedia+")
	var cpu struct{ InstructionSet string }
	bmcGet(t, sysURL+"/Processors/CPU1", &cpu)
	if want := map[string]string{"x86_64": "x86-64", "aarch64": "ARM-A64"}[arch]; cpu.InstructionSet != want {
		t.Errorf("%s's BMC says instruction set %q, want %s", worker, cpu.InstructionSet, want)
	}
	var cd map[string]any
	bmcGet(t, sysURL+"/VirtualMedia/Cd", &cd)
	if cd["Inserted"] != false {
		t.Errorf("%s: the node ISO is still inserted after it joined: %v", worker, cd)
	}
	// Again: every added node has joined; nothing to do.
	if out, err := labctlRun(t, append([]string{"add-node", "--count", "0"}, common...)...); err != nil || !strings.Contains(out, "every added node has joined") {
		t.Errorf("add-node --count 0 = %v\n%s", err, out)
	}
	out, err = labctlRun(t, append([]string{"up"}, common...)...)
	if err != nil || strings.Count(out, "(no change)") != 10 {
		t.Errorf("up after add-node = %v (want no change):\n%s", err, out)
	}
}

// TestAgentTwoNodeFencing: a two-node control plane with fencing gets each
// master's BMC as its fencing credential in install-config; from the
// nodes' network (libvirtd's namespace) the credential reaches vbmcd (a
// GET answers 200), and a ForceOff sent with it powers that node off, as
// the surviving node's fence agent would.
func TestAgentTwoNodeFencing(t *testing.T) {
	testenv.Libvirt(t)
	dir := testenv.QemuDir(t)
	name := "agtnf"
	cfg := agentLab(t, dir, name, "10.198.67", 18797, "  masters: {count: 2}\n  fencing: true\n")
	common := []string{"-f", cfg, "--netns", "labci", "--mode", "agent", "--profile", "tiny", "--vbmcd", testenv.Binary(t, "vbmcd")}
	t.Cleanup(func() {
		if out, err := labctlRun(t, append([]string{"down"}, common...)...); err != nil {
			t.Errorf("down: %v\n%s", err, out)
		}
	})
	if out, err := labctlRun(t, append([]string{"up", "--until", "install-config"}, common...)...); err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "install", "install-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ic struct {
		Platform struct {
			BareMetal struct {
				BMCVerifyCA string `json:"bmcVerifyCA"`
			} `json:"baremetal"`
		}
		ControlPlane struct {
			Replicas int
			Fencing  struct {
				Credentials []struct {
					HostName                string `json:"hostname"`
					Address                 string
					Username, Password      string
					CertificateVerification string `json:"certificateVerification"`
				}
			}
		} `json:"controlPlane"`
	}
	if err := yaml.Unmarshal(b, &ic); err != nil {
		t.Fatal(err)
	}
	creds := ic.ControlPlane.Fencing.Credentials
	if ic.ControlPlane.Replicas != 2 || len(creds) != 2 {
		t.Fatalf("install-config: %d replicas, %d fencing credentials; want 2 and 2:\n%s", ic.ControlPlane.Replicas, len(creds), b)
	}
	// The fence agent verifies vbmcd's certificate with the lab's CA, the
	// one install-config carries; a client without it is refused.
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(ic.Platform.BareMetal.BMCVerifyCA)) {
		t.Fatalf("install-config has no bmcVerifyCA:\n%s", b)
	}
	hc := labClient("labci", 10*time.Second, &tls.Config{RootCAs: roots})
	stranger := labClient("labci", 10*time.Second, &tls.Config{RootCAs: x509.NewCertPool()})
	if _, err := stranger.Get(strings.TrimPrefix(creds[0].Address, "redfish+")); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client that does not know the lab's CA: %v, want a certificate error", err)
	}
	send := func(method, url, body, user, pass string) int {
		t.Helper()
		code, _ := redfishSend(t, hc, method, url, user, pass, body)
		return code
	}
	for _, c := range creds {
		if !strings.HasPrefix(c.Address, "redfish+https://10.198.67.1:18797/redfish/v1/Systems/") || c.CertificateVerification != "Enabled" {
			t.Errorf("%s: fencing address %s, verification %s", c.HostName, c.Address, c.CertificateVerification)
		}
		url := strings.TrimPrefix(c.Address, "redfish+")
		if code := send(http.MethodGet, url, "", c.Username, c.Password); code != http.StatusOK {
			t.Errorf("%s: GET with the fencing credential = %d, want 200", c.HostName, code)
		}
		if code := send(http.MethodGet, url, "", c.Username, c.Password+"x"); code != http.StatusUnauthorized {
			t.Errorf("%s: GET with a wrong password = %d, want 401", c.HostName, code)
		}
		if code := send(http.MethodPost, url+"/Actions/ComputerSystem.Reset", `{"ResetType":"On"}`, c.Username, c.Password); code/100 != 2 {
			t.Fatalf("%s: power on = %d", c.HostName, code)
		}
	}
	// Each node's BMC user is its own, bound to its system, as on real
	// servers: master-0's credential does not reach master-1.
	if creds[0].Username == creds[1].Username || creds[0].Password == creds[1].Password {
		t.Errorf("the two masters share a BMC user: %s / %s", creds[0].Username, creds[1].Username)
	}
	if code := send(http.MethodGet, strings.TrimPrefix(creds[1].Address, "redfish+"), "", creds[0].Username, creds[0].Password); code != http.StatusUnauthorized {
		t.Errorf("master-0's BMC user on master-1's system = %d, want 401", code)
	}
	// master-0's fence agent fences master-1.
	victim := creds[1]
	url := strings.TrimPrefix(victim.Address, "redfish+")
	if !testenv.WaitFor(60*time.Second, func() bool { return domState(t, victim.HostName) == "running" }) {
		t.Fatalf("%s did not start: %s", victim.HostName, domState(t, victim.HostName))
	}
	if code := send(http.MethodPost, url+"/Actions/ComputerSystem.Reset", `{"ResetType":"ForceOff"}`, victim.Username, victim.Password); code/100 != 2 {
		t.Fatalf("ForceOff with the fencing credential = %d", code)
	}
	if !testenv.WaitFor(30*time.Second, func() bool { return domState(t, victim.HostName) == "shut off" }) {
		t.Errorf("%s is %s after the fence, want shut off", victim.HostName, domState(t, victim.HostName))
	}
	if s := domState(t, creds[0].HostName); s != "running" {
		t.Errorf("the surviving node %s is %s", creds[0].HostName, s)
	}
}
