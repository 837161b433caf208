package up_test

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/bmlab/bmlab/internal/ipi"
	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/testenv"
)

// TestMixedRackUp: a lab whose masters are Dell iDRAC 9s and workers HPE
// iLO 6s comes up to install-config on real libvirt with the lab's real
// vbmcd: install-config names each Dell by idrac-virtualmedia and each HPE
// by redfish-virtualmedia, each node's BMC answers at that address with its
// vendor's Manufacturer and virtual media layout (the personality recorded
// with its domain), and `labctl status` shows the vendor.
func TestMixedRackUp(t *testing.T) {
	testenv.Libvirt(t)
	dir := testenv.QemuDir(t)
	cfg := labFile(t, dir, "lmix", 18714, "10.198.61.=10.198.75.",
		"  sshKey: id.pub\n=  sshKey: id.pub\n  masters: {personality: idrac9}\n  workers: {personality: ilo6}\n")
	common := []string{"-f", cfg, "--netns", "labci", "--vbmcd", testenv.Binary(t, "vbmcd")}
	t.Cleanup(func() { _, _ = labctlRun(t, append([]string{"down", "--profile", "tiny"}, common...)...) })
	if _, err := labctlRun(t, append([]string{"up", "--profile", "tiny", "--until", "install-config"}, common...)...); err != nil {
		t.Fatalf("up: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "install", "install-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ic ipi.InstallConfig
	if err := yaml.Unmarshal(b, &ic); err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{
		DialContext:     netplumb.DialContextIn("labci"),
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}
	get := func(url string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.SetBasicAuth("admin", "lab-pass")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var o map[string]any
		if resp.StatusCode != 200 || json.Unmarshal(body, &o) != nil {
			t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
		}
		return o
	}
	if len(ic.Platform.BareMetal.Hosts) != 5 {
		t.Fatalf("%d hosts, want tiny's 3 masters and 2 workers", len(ic.Platform.BareMetal.Hosts))
	}
	for _, h := range ic.Platform.BareMetal.Hosts {
		scheme, vendor, media := "idrac-virtualmedia+https://", "Dell Inc.", "/VirtualMedia/CD"
		if h.Role == "worker" {
			scheme, vendor, media = "redfish-virtualmedia+https://", "HPE", "/VirtualMedia/2"
		}
		if !strings.HasPrefix(h.BMC.Address, scheme+"10.198.75.1:18714/redfish/v1/Systems/") {
			t.Errorf("%s (%s): bmc.address %s, want %s…", h.Name, h.Role, h.BMC.Address, scheme)
			continue
		}
		sys := "https://" + strings.TrimPrefix(h.BMC.Address, scheme)
		if got := get(sys)["Manufacturer"]; got != vendor {
			t.Errorf("%s: Manufacturer %v, want %s", h.Name, got, vendor)
		}
		mgr := strings.Replace(sys, "/Systems/", "/Managers/", 1)
		members, _ := json.Marshal(get(mgr + "/VirtualMedia")["Members"])
		if !strings.Contains(string(members), media+`"`) {
			t.Errorf("%s: the Manager's virtual media %s, want the member %s", h.Name, members, media)
		}
	}
	out, err := labctlRun(t, append([]string{"status", "--profile", "tiny"}, common...)...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "VENDOR") || strings.Count(out, "Dell Inc.") != 3 || strings.Count(out, "HPE") != 2 {
		t.Errorf("status does not show each node's vendor:\n%s", out)
	}
}
