package up_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"sigs.k8s.io/yaml"

	"github.com/bmlab/bmlab/internal/ipi"
	"github.com/bmlab/bmlab/internal/labctl"
	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/testenv"
)

// labFile writes a lab whose machine network lives only inside libvirtd's
// namespace (labci): nothing leaves this machine.
func labFile(t *testing.T, dir, name string, port int) string {
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
	p := filepath.Join(dir, "lab.yaml")
	if err := os.WriteFile(p, []byte(lab), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func labctlRun(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := labctl.Run(context.Background(), testenv.Logger(t), labctl.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &out}, args)
	t.Logf("labctl %s:\n%s", strings.Join(args, " "), out.String())
	return out.String(), err
}

func TestUpUntilInstallConfig(t *testing.T) {
	testenv.Libvirt(t)
	dir := testenv.QemuDir(t)
	cfg := labFile(t, dir, "lup", 18710)
	common := []string{"-f", cfg, "--netns", "labci", "--vbmcd", testenv.Binary(t, "vbmcd")}
	up := append([]string{"up", "--profile", "tiny", "--until", "install-config"}, common...)
	t.Cleanup(func() { _, _ = labctlRun(t, append([]string{"down", "--profile", "tiny"}, common...)...) })

	start := time.Now()
	out, err := labctlRun(t, up...)
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	t.Logf("up --until install-config took %s", time.Since(start))
	for _, want := range []string{"✓ preflight", "✓ network", "✓ storage", "✓ nodes", "✓ bmcs", "✓ install-config"} {
		if !strings.Contains(out, want) {
			t.Errorf("up output lacks %q", want)
		}
	}

	// Every host of install-config has a BMC that answers at its address
	// with the UUID of the domain whose NIC has that bootMACAddress.
	b, err := os.ReadFile(filepath.Join(dir, "install", "install-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ic ipi.InstallConfig
	if err := yaml.Unmarshal(b, &ic); err != nil {
		t.Fatal(err)
	}
	hosts := ic.Platform.BareMetal.Hosts
	if len(hosts) != 5 {
		t.Fatalf("install-config has %d hosts, want 5 (tiny: 3 masters, 2 workers)", len(hosts))
	}
	var st struct {
		Nodes []struct{ Name, BootMAC, UUID, Power, BMC string }
	}
	sout, err := labctlRun(t, append([]string{"status", "--profile", "tiny", "-o", "json"}, common...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(sout[strings.Index(sout, "{"):]), &st); err != nil {
		t.Fatalf("status json: %v", err)
	}
	// The BMCs are reached where the nodes reach them: at the address in
	// install-config, from the lab's namespace.
	hc := &http.Client{Transport: &http.Transport{
		DialContext:     netplumb.DialContextIn("labci"),
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}
	for _, h := range hosts {
		uuid := h.BMC.Address[strings.LastIndex(h.BMC.Address, "/")+1:]
		if !strings.HasPrefix(h.BMC.Address, "redfish-virtualmedia+https://10.198.61.1:18710/redfish/v1/Systems/") {
			t.Errorf("%s: BMC address %s", h.Name, h.BMC.Address)
		}
		req, _ := http.NewRequest("GET", strings.TrimPrefix(h.BMC.Address, "redfish-virtualmedia+"), nil)
		req.SetBasicAuth("admin", "lab-pass")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var sys struct {
			UUID               string
			EthernetInterfaces struct {
				ODataID string `json:"@odata.id"`
			}
		}
		json.NewDecoder(resp.Body).Decode(&sys)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.EqualFold(sys.UUID, uuid) {
			t.Errorf("%s: BMC answered %d with UUID %q, want %s", h.Name, resp.StatusCode, sys.UUID, uuid)
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
	out, err = labctlRun(t, up...)
	if err != nil {
		t.Fatalf("second up: %v", err)
	}
	if strings.Count(out, "(no change)") != 6 {
		t.Errorf("second up changed something:\n%s", out)
	}

	// A virtual-media boot of one node shows the marker.
	iso := testenv.MarkerISO(t)
	// The image server, like an Ironic conductor's, is on the lab's network.
	ln, err := netplumb.ListenIn("labci", "tcp", "10.198.61.1:0")
	if err != nil {
		t.Fatal(err)
	}
	img := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, iso) }))
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
		req, _ := http.NewRequest(c.method, base+c.path, strings.NewReader(c.body))
		req.SetBasicAuth("admin", "lab-pass")
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("%s %s: %d", c.method, c.path, resp.StatusCode)
		}
	}
	serial := filepath.Join(dir, ".bmlab", "logs", h.Name+".serial.log")
	if !testenv.WaitFor(120*time.Second, func() bool { return testenv.Count(serial, testenv.Marker) > 0 }) {
		t.Fatalf("the marker never appeared in %s", serial)
	}

	// down leaves nothing of the lab behind.
	start = time.Now()
	if _, err := labctlRun(t, append([]string{"down", "--profile", "tiny"}, common...)...); err != nil {
		t.Fatalf("down: %v", err)
	}
	t.Logf("down took %s", time.Since(start))
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
