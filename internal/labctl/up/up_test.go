package up_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/bmlab/bmlab/internal/labctl"
	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/testenv"
)

// labFile writes a lab whose machine network lives only inside libvirtd's
// namespace (labci): nothing leaves this machine.
func labFile(t *testing.T, dir, name string, port int, extra ...string) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "id.pub"), ssh.MarshalAuthorizedKey(sp), 0o644)
	os.WriteFile(filepath.Join(dir, "pull-secret.json"), []byte(`{"auths":{"registry.invalid":{"auth":"dXNlcjpwYXNz"}}}`), 0o600)
	lab := fmt.Sprintf(`apiVersion: bmlab.dev/v1alpha1
kind: Lab
name: %s
cluster:
  clusterName: ocp
  baseDomain: lab.invalid
  machineNetwork: 10.198.61.0/24
  dhcpRange: {start: 10.198.61.20, end: 10.198.61.60}
  apiVIP: 10.198.61.5
  ingressVIP: 10.198.61.4
  bmc: {redfishPort: %d, username: admin, password: lab-pass}
  sshKey: id.pub
`, name, port)
	for _, e := range extra {
		lab = strings.ReplaceAll(lab, e[:strings.Index(e, "=")], e[strings.Index(e, "=")+1:])
	}
	p := filepath.Join(dir, "lab.yaml")
	if err := os.WriteFile(p, []byte(lab), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// tinyLab writes labFile's lab (name, port and extra as labFile takes
// them) into a fresh directory qemu can write, once the real libvirtd is
// there, and returns the directory, the lab file and the flags each labctl
// command of the test takes: the file, labci, the real vbmcd, profile
// tiny.
func tinyLab(t *testing.T, name string, port int, extra ...string) (dir, cfg string, common []string) {
	t.Helper()
	testenv.Libvirt(t)
	dir = testenv.QemuDir(t)
	cfg = labFile(t, dir, name, port, extra...)
	return dir, cfg, []string{"-f", cfg, "--netns", "labci", "--vbmcd", testenv.Binary(t, "vbmcd"), "--profile", "tiny"}
}

func labctlRun(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := labctl.Run(context.Background(), testenv.Logger(t), labctl.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &out}, args)
	t.Logf("labctl %s:\n%s", strings.Join(args, " "), out.String())
	return out.String(), err
}

func TestUpUntilInstallConfig(t *testing.T) {
	dir, _, common := tinyLab(t, "lup", 18710)
	up := append([]string{"up", "--until", "install-config"}, common...)

	start := time.Now()
	out := labUp(t, "install-config", common...)
	t.Logf("up --until install-config took %s", time.Since(start))
	for _, want := range []string{"✓ preflight", "✓ network", "✓ storage", "✓ nodes", "✓ bmcs", "✓ install-config"} {
		if !strings.Contains(out, want) {
			t.Errorf("up output lacks %q", want)
		}
	}

	// Every host of install-config has a BMC that answers at its address
	// with the UUID of the domain whose NIC has that bootMACAddress.
	ic := installConfig(t, dir)
	hosts := ic.Platform.BareMetal.Hosts
	if len(hosts) != 5 {
		t.Fatalf("install-config has %d hosts, want 5 (tiny: 3 masters, 2 workers)", len(hosts))
	}
	var st struct {
		Nodes []struct{ Name, BootMAC, UUID, Power, BMC string }
	}
	statusJSON(t, &st, common...)
	// The BMCs are reached where the nodes reach them: at the address in
	// install-config, from the lab's namespace.
	hc := labClient("labci", 0, &tls.Config{InsecureSkipVerify: true})
	for _, h := range hosts {
		uuid := h.BMC.Address[strings.LastIndex(h.BMC.Address, "/")+1:]
		if !strings.HasPrefix(h.BMC.Address, "redfish-virtualmedia+https://10.198.61.1:18710/redfish/v1/Systems/") {
			t.Errorf("%s: BMC address %s", h.Name, h.BMC.Address)
		}
		code, body := redfishSend(t, hc, http.MethodGet, strings.TrimPrefix(h.BMC.Address, "redfish-virtualmedia+"), "admin", "lab-pass", "")
		var sys struct{ UUID string }
		_ = json.Unmarshal(body, &sys)
		if code != 200 || !strings.EqualFold(sys.UUID, uuid) {
			t.Errorf("%s: BMC answered %d with UUID %q, want %s", h.Name, code, sys.UUID, uuid)
		}
		found := false
		for _, n := range st.Nodes {
			if n.Name == h.Name {
				found = true
				if !strings.EqualFold(n.BootMAC, h.BootMACAddress) || !strings.EqualFold(n.UUID, uuid) {
					t.Errorf("%s: status MAC %s uuid %s, install-config MAC %s uuid %s", h.Name, n.BootMAC, n.UUID, h.BootMACAddress, uuid)
				}
			}
		}
		if !found {
			t.Errorf("%s missing from status", h.Name)
		}
	}

	// up again changes nothing.
	out, err := labctlRun(t, up...)
	if err != nil {
		t.Fatalf("second up: %v", err)
	}
	if strings.Count(out, "(no change)") != 6 {
		t.Errorf("second up changed something:\n%s", out)
	}

	// labctl net agrees with up: right after up, check finds nothing.
	netArgs := func(sub string) []string { return append([]string{"net", sub}, common...) }
	if out, err := labctlRun(t, netArgs("check")...); err != nil {
		t.Fatalf("net check right after up = %v:\n%s", err, out)
	}
	// A broken veth is found and repaired to exactly what up made.
	ip := testenv.Command(t, "ip")
	if o, err := exec.Command(ip, "-n", "labci", "link", "del", "bmlab-veth0").CombinedOutput(); err != nil {
		t.Fatalf("break the veth: %v: %s", err, o)
	}
	if out, err := labctlRun(t, netArgs("check")...); err == nil || !strings.Contains(out, "bmlab-veth0") {
		t.Fatalf("net check after the veth was deleted = %v:\n%s", err, out)
	}
	// labctl graph draws what net check says: the deleted veth dashed in
	// red, every node with its power; an SVG through Graphviz's dot.
	svg := filepath.Join(dir, "lab.svg")
	if out, err := labctlRun(t, append([]string{"graph", "-o", svg}, common...)...); err != nil {
		t.Fatalf("graph: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	pic := html.UnescapeString(string(raw)) // dot writes '-' as &#45;
	for _, want := range []string{"<svg", "bmlab-veth0: missing", "network difference(s)", "lup-master-0", "master · Off", "NAT network lup-machine"} {
		if !strings.Contains(pic, want) {
			t.Errorf("graph SVG lacks %q", want)
		}
	}
	if out, err := labctlRun(t, netArgs("repair")...); err != nil || !strings.Contains(out, "✓ create bmlab-veth0 bmlab-veth1") {
		t.Fatalf("net repair = %v:\n%s", err, out)
	}
	if out, err := labctlRun(t, netArgs("check")...); err != nil {
		t.Fatalf("net check after repair = %v:\n%s", err, out)
	}
	if master := linkMaster(t, "bmlab-veth1"); master != "bmnat-lup" {
		t.Errorf("after repair bmlab-veth1's master is %q, want the lab's NAT bridge bmnat-lup", master)
	}
	if out, err := labctlRun(t, up...); err != nil || strings.Count(out, "(no change)") != 6 {
		t.Errorf("up after repair = %v (want no change):\n%s", err, out)
	}

	// A virtual-media boot of one node shows the marker, and labctl console
	// works the node through its BMC alone: the marker seen in the serial
	// output, keys typed on its keyboard reach grub (the disk marker's
	// grub reads the keyboard and answers on the serial port), a
	// screenshot of its screen; an off node's screen and a bad key name
	// are refused with what to do.
	stay := testenv.MarkerDisk(t) // an ISO too: prints BMLAB-DISK-BOOTED and stays at grub's prompt
	// The image server, like an Ironic conductor's, is on the lab's network.
	ln, err := netplumb.ListenIn("labci", "tcp", "10.198.61.1:0")
	if err != nil {
		t.Fatal(err)
	}
	img := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, stay) }))
	img.Listener = ln
	img.Start()
	defer img.Close()
	h := hosts[0]
	uuid := h.BMC.Address[strings.LastIndex(h.BMC.Address, "/")+1:]
	base := "https://10.198.61.1:18710/redfish/v1"
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/Managers/" + uuid + "/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia", `{"Image":"` + img.URL + `/boot.iso"}`},
		{"PATCH", "/Systems/" + uuid, `{"Boot":{"BootSourceOverrideTarget":"Cd","BootSourceOverrideEnabled":"Once"}}`},
		{"POST", "/Systems/" + uuid + "/Actions/ComputerSystem.Reset", `{"ResetType":"On"}`},
	} {
		if code, body := redfishSend(t, hc, c.method, base+c.path, "admin", "lab-pass", c.body); code/100 != 2 {
			t.Fatalf("%s %s: %d %s", c.method, c.path, code, body)
		}
	}
	console := func(args ...string) (string, error) {
		t.Helper()
		return labctlRun(t, append(append([]string{"console"}, args...), common...)...)
	}
	start = time.Now()
	if out, err := console(h.Name, "wait-for", testenv.DiskMarker, "--on", "serial", "--timeout", "3m"); err != nil || !strings.Contains(out, "serial output") {
		t.Fatalf("console wait-for the marker = %v:\n%s", err, out)
	}
	t.Logf("console wait-for the marker: %s", time.Since(start).Round(time.Millisecond))
	serial := filepath.Join(dir, ".bmlab", "logs", h.Name+".serial.log")
	if testenv.Count(serial, testenv.DiskMarker) == 0 {
		t.Fatalf("the marker is not in %s", serial)
	}
	if out, err := console(h.Name, "type", "labctl42<Enter>"); err != nil || !strings.Contains(out, "typed 9 keys") {
		t.Fatalf("console type = %v:\n%s", err, out)
	}
	// grub's answer, which its echo of the typed line cannot fake.
	if out, err := console(h.Name, "wait-for", "can't find command", "--on", "serial", "--timeout", "1m"); err != nil {
		t.Fatalf("grub did not answer what labctl typed = %v:\n%s", err, out)
	}
	shot := filepath.Join(dir, "screen.png")
	if out, err := console(h.Name, "screenshot", shot); err != nil {
		t.Fatalf("console screenshot = %v:\n%s", err, out)
	}
	if b, err := os.ReadFile(shot); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG\r\n")) {
		t.Errorf("the screenshot is not a PNG (%v)", err)
	}
	if out, err := console(hosts[1].Name, "screenshot", shot); err == nil || !strings.Contains(out+err.Error(), "off") {
		t.Errorf("a screenshot of an off node = %v:\n%s", err, out)
	}
	if out, err := console(h.Name, "type", "<Hyper>"); err == nil || !strings.Contains(err.Error(), `unknown key "Hyper"`) {
		t.Errorf("an unknown key = %v:\n%s", err, out)
	}
	if out, err := console("nosuch", "text"); err == nil || !strings.Contains(err.Error(), "its nodes are") {
		t.Errorf("an unknown node = %v:\n%s", err, out)
	}
	// The node's in-band IPMI (its KCS) is wired to the lab's vbmcd, which
	// listens on the socket the domain names.
	sock := "/run/vbmcd/kcs/" + strings.ToLower(uuid) + ".sock"
	if x, _ := exec.Command("virsh", "dumpxml", h.Name).Output(); !strings.Contains(string(x), "ipmi-bmc-extern") || !strings.Contains(string(x), "path="+sock+",") {
		t.Errorf("%s has no KCS wired to %s:\n%s", h.Name, sock, x)
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Type() != fs.ModeSocket {
		t.Errorf("the lab's vbmcd does not listen on %s: %v", sock, err)
	}

	// down leaves nothing of the lab behind.
	start = time.Now()
	if _, err := labctlRun(t, append([]string{"down"}, common...)...); err != nil {
		t.Fatalf("down: %v", err)
	}
	t.Logf("down took %s", time.Since(start))
	if _, err := os.Stat(sock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("down left the in-band socket %s: %v", sock, err)
	}
	left, _ := exec.Command("virsh", "list", "--all", "--name").Output()
	pools, _ := exec.Command("virsh", "pool-list", "--all", "--name").Output()
	nets, _ := exec.Command("virsh", "net-list", "--all", "--name").Output()
	links, _ := exec.Command("ip", "-n", "labci", "-br", "link").Output()
	if _, err := os.Stat(filepath.Join(dir, ".bmlab", "disks")); err == nil {
		t.Errorf("down left the disks directory behind")
	}
	for _, s := range []string{string(left), string(nets), string(links), string(pools)} {
		for _, name := range []string{"lup-", "baremetal", "bmnat-lup", "bmlab-veth", "lup-disks"} {
			if strings.Contains(s, name) {
				t.Errorf("down left %s behind:\n%s", name, s)
			}
		}
	}
}

func linkMaster(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("ip", "-n", "labci", "-o", "link", "show", name).Output()
	if err != nil {
		t.Fatalf("ip link show %s: %v", name, err)
	}
	f := strings.Fields(string(out))
	for i := range f {
		if f[i] == "master" && i+1 < len(f) {
			return f[i+1]
		}
	}
	return ""
}

// leftovers lists what of a lab is still on the host: domains, libvirt
// networks, pools, links in labci, and vbmcd processes marked as its.
func leftovers(t *testing.T, lab string, links ...string) []string {
	t.Helper()
	var out []string
	for _, c := range [][]string{{"list", "--all", "--name"}, {"net-list", "--all", "--name"}, {"pool-list", "--all", "--name"}} {
		b, err := exec.Command("virsh", c...).Output()
		if err != nil {
			t.Fatalf("virsh %v: %v", c, err)
		}
		for _, l := range strings.Fields(string(b)) {
			if strings.HasPrefix(l, lab+"-") || slices.Contains(links, l) {
				out = append(out, c[0]+" "+l)
			}
		}
	}
	b, _ := exec.Command("ip", "-n", "labci", "-br", "link").Output()
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 0 && slices.Contains(links, strings.Split(f[0], "@")[0]) {
			out = append(out, "link "+f[0])
		}
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && slices.Contains(strings.Split(string(env), "\x00"), "BMLAB_LAB="+lab) {
			if st, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); !strings.Contains(string(st), ") Z ") {
				out = append(out, "process "+e.Name())
			}
		}
	}
	return out
}

// TestDownAfterLabDirDeleted: the lab's directory (lab file, state, disks)
// goes; down finds the lab by its marks and leaves nothing of it.
func TestDownAfterLabDirDeleted(t *testing.T) {
	testenv.Libvirt(t)
	dir := testenv.QemuDir(t)
	cfg := labFile(t, dir, "lgone", 18711, "10.198.61.=10.198.62.")
	common := []string{"--netns", "labci", "--vbmcd", testenv.Binary(t, "vbmcd")}
	links := []string{"baremetal", "bmlab-veth0", "bmlab-veth1", "bmnat-lgone"}
	t.Cleanup(func() { _, _ = labctlRun(t, append([]string{"down", "--lab", "lgone"}, common...)...) })
	if out, err := labctlRun(t, append([]string{"up", "--profile", "tiny", "--until", "bmcs", "-f", cfg}, common...)...); err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	if left := leftovers(t, "lgone", links...); len(left) < 5+2+1+4+1 {
		t.Fatalf("up made less than expected: %v", left)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := labctlRun(t, append([]string{"down", "--lab", "lgone"}, common...)...)
	if err != nil {
		t.Fatalf("down --lab after the directory was deleted: %v\n%s", err, out)
	}
	t.Logf("down took %s", time.Since(start))
	if left := leftovers(t, "lgone", links...); len(left) > 0 {
		t.Errorf("down printed\n%s\nbut left %v", out, left)
	}
	if !strings.Contains(out, "removed pool lgone-disks: its directory") {
		t.Errorf("down does not say how it proved the pool the lab's:\n%s", out)
	}
}

// TestTwoLabs: a second lab with the first one's bridges stops before
// creating anything and names the settings; with its own bridges, another
// machine network and TLS off it comes up beside the first, on the same
// Redfish port, and its install-config's http addresses answer.
func TestTwoLabs(t *testing.T) {
	testenv.Libvirt(t)
	vb := testenv.Binary(t, "vbmcd")
	dirA, dirB := testenv.QemuDir(t), testenv.QemuDir(t)
	cfgA := labFile(t, dirA, "laba", 18712, "10.198.61.=10.198.63.")
	common := []string{"--netns", "labci", "--vbmcd", vb, "--profile", "tiny"}
	t.Cleanup(func() {
		_, _ = labctlRun(t, append([]string{"down", "--lab", "laba"}, common...)...)
		_, _ = labctlRun(t, append([]string{"down", "--lab", "labb"}, common...)...)
	})
	if out, err := labctlRun(t, append([]string{"up", "--until", "bmcs", "-f", cfgA}, common...)...); err != nil {
		t.Fatalf("up A: %v\n%s", err, out)
	}
	// B with A's bridges and machine network: refused, nothing created.
	clashing := labFile(t, dirB, "labb", 18712, "10.198.61.=10.198.63.")
	_, err := labctlRun(t, append([]string{"up", "--until", "bmcs", "-f", clashing}, common...)...)
	for _, want := range []string{
		`lab "labb" would clash with what is on this host; nothing was created`,
		`link baremetal belongs to lab "laba": give this lab its own (network.bridges[].name)`,
		`link bmlab-veth0 belongs to lab "laba": give this lab its own (network.veths[].name)`,
		`libvirt network baremetal belongs to lab "laba"`,
		`overlaps the machine network 10.198.63.0/24: give this lab another (cluster.machineNetwork`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("up of a clashing lab = %v\nwant it to contain %q", err, want)
		}
	}
	if left := leftovers(t, "labb", "bmnat-labb"); len(left) > 0 {
		t.Errorf("the refused lab created %v", left)
	}
	// B with its own bridges, network and plain HTTP: beside A.
	own := labFile(t, dirB, "labb", 18712, "10.198.61.=10.198.64.",
		"  sshKey: id.pub\n=  sshKey: id.pub\nnetwork:\n  bridges: [{name: bm-labb}]\n  veths: [{name: labb-veth0, master: bm-labb, peer: labb-veth1, peerMaster: virbr0}]\n",
		"password: lab-pass}=password: lab-pass, tls: false}")
	out, err := labctlRun(t, append([]string{"up", "--until", "install-config", "-f", own}, common...)...)
	if err != nil {
		t.Fatalf("up B beside A: %v\n%s", err, out)
	}
	ic := installConfig(t, dirB)
	if ic.Platform.BareMetal.ExternalBridge != "bm-labb" {
		t.Errorf("B's install-config externalBridge = %q, want bm-labb", ic.Platform.BareMetal.ExternalBridge)
	}
	hc := labClient("labci", 0, nil)
	for _, h := range ic.Platform.BareMetal.Hosts {
		url := strings.TrimPrefix(h.BMC.Address, "redfish-virtualmedia+")
		if !strings.HasPrefix(url, "http://10.198.64.1:18712/") || h.BMC.DisableCertificateVerification {
			t.Errorf("%s: address %s (tls: false wants http, no certificate setting)", h.Name, h.BMC.Address)
			continue
		}
		if code, _ := redfishSend(t, hc, http.MethodGet, url, "admin", "lab-pass", ""); code != 200 {
			t.Errorf("%s: GET %s = %d", h.Name, url, code)
		}
	}
	// A is untouched and still answers.
	for _, l := range []string{"up", "net"} {
		args := []string{l, "--until", "bmcs", "-f", cfgA}
		if l == "net" {
			args = []string{"net", "check", "-f", cfgA}
		}
		if out, err := labctlRun(t, append(args, common...)...); err != nil || (l == "up" && strings.Count(out, "(no change)") != 5) {
			t.Errorf("labctl %s for A after B came up = %v:\n%s", l, err, out)
		}
	}
	if out, err := labctlRun(t, append([]string{"net", "check", "-f", own}, common...)...); err != nil {
		t.Errorf("net check B = %v:\n%s", err, out)
	}
}
