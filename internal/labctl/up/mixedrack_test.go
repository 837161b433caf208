package up_test

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/ipi"
	"github.com/bmlab/bmlab/internal/lab/ipimode"
	"github.com/bmlab/bmlab/internal/testenv"
)

// TestMixedRackUp: a lab whose masters are Dell iDRAC 9s and workers HPE
// iLO 6s comes up to install-config on real libvirt with the lab's real
// vbmcd: install-config names each Dell by idrac-virtualmedia and each HPE
// by redfish-virtualmedia, each node's BMC answers at that address with its
// vendor's Manufacturer and virtual media layout (the personality recorded
// with its domain), and `labctl status` shows the vendor.
func TestMixedRackUp(t *testing.T) {
	dir, _, common := tinyLab(t, "lmix", 18714, "10.198.61.=10.198.75.",
		"  sshKey: id.pub\n=  sshKey: id.pub\n  masters: {personality: idrac9}\n  workers: {personality: ilo6}\n")
	labUp(t, "install-config", common...)
	ic := installConfig(t, dir)
	hc := labClient("labci", 0, &tls.Config{InsecureSkipVerify: true})
	get := func(url string) map[string]any { return getObject(t, hc, url, "admin", "lab-pass") }
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
	out, err := labctlRun(t, append([]string{"status"}, common...)...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "VENDOR") || strings.Count(out, "Dell Inc.") != 3 || strings.Count(out, "HPE") != 2 {
		t.Errorf("status does not show each node's vendor:\n%s", out)
	}
}

// TestMixedRackBMCNetwork: a lab whose masters have a personality each
// (idrac9, ilo6 and the generic BMC: cluster.masters.personalities) and a
// BMC of their own each (cluster.bmc.network) comes up to install-config
// on real libvirt with the lab's real vbmcd. install-config names each
// node's System by the path its vendor serves, as a real rack's
// install-config would: idrac-virtualmedia+https://ADDR/redfish/v1/Systems/
// System.Embedded.1, redfish-virtualmedia+https://ADDR/redfish/v1/Systems/1,
// and the generic BMC's UUID; labctl status shows the same addresses and
// vendors. From the lab's namespace, through the BMC network, with the
// lab's CA, each address as written is the node's own System (its UUID,
// the vendor's Manufacturer and Id), the Manager its Links.ManagedBy names
// is the vendor's (Id and virtual media where the vendor hangs it), and
// Debian's fence_redfish, given the path of the fencing address
// install-config's rules make of it (ipi.FencingAddress) as its systems
// URI, reads the node's power there.
func TestMixedRackBMCNetwork(t *testing.T) {
	fenceRedfish := testenv.Command(t, "fence_redfish")
	dir, cfg, common := tinyLab(t, "lmxb", 18715, "10.198.61.=10.198.79.",
		"  bmc: {=  bmc: {network: 10.198.179.0/24, ",
		"  sshKey: id.pub\n=  sshKey: id.pub\n  masters: {personalities: [idrac9, ilo6, '']}\n  workers: {count: 0}\n")
	began := time.Now()
	labUp(t, "install-config", common...)
	t.Logf("up --until install-config took %s", time.Since(began).Round(time.Second))
	p := resolvePlan(t, cfg, ipimode.Name)
	ic := installConfig(t, dir)
	hosts := ic.Platform.BareMetal.Hosts
	if len(hosts) != 3 {
		t.Fatalf("%d hosts, want 3 masters", len(hosts))
	}
	var st struct {
		Nodes []struct{ Name, BMC, Vendor string }
	}
	if statusJSON(t, &st, common...); len(st.Nodes) != 3 {
		t.Fatalf("status -o json: %d nodes, want 3", len(st.Nodes))
	}
	status := map[string][2]string{}
	for _, n := range st.Nodes {
		status[n.Name] = [2]string{n.BMC, n.Vendor}
	}

	hc := labClient("labci", 20*time.Second, &tls.Config{RootCAs: labCA(t, p.Paths.CACert)})
	get := func(u, user, pass string) map[string]any { return getObject(t, hc, u, user, pass) }
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REQUESTS_CA_BUNDLE=") && !strings.HasPrefix(kv, "CURL_CA_BUNDLE=") && !strings.HasPrefix(kv, "SSL_CERT_") {
			env = append(env, kv)
		}
	}
	env = append(env, "REQUESTS_CA_BUNDLE="+p.Paths.CACert)
	for _, w := range []struct {
		name, scheme, system, vendor, manager, media string
	}{
		{"lmxb-master-0", "idrac-virtualmedia", "System.Embedded.1", "Dell Inc.", "iDRAC.Embedded.1", "CD"},
		{"lmxb-master-1", "redfish-virtualmedia", "1", "HPE", "1", "2"},
		{"lmxb-master-2", "redfish-virtualmedia", "", "bmlab", "", "Cd"},
	} {
		n, ok := p.Node(w.name)
		if !ok {
			t.Fatalf("no node %s in the plan", w.name)
		}
		if w.system == "" {
			w.system, w.manager = n.UUID, n.UUID
		}
		var h ipi.Host
		for _, x := range hosts {
			if x.Name == w.name {
				h = x
			}
		}
		sys := "https://" + n.BMC.Addr.String() + "/redfish/v1/Systems/" + w.system
		if want := w.scheme + "+" + sys; h.BMC.Address != want {
			t.Errorf("%s: install-config's bmc.address %s, want %s", w.name, h.BMC.Address, want)
			continue
		}
		if got := status[w.name]; got[0] != h.BMC.Address || (got[1] != w.vendor && !(w.vendor == "bmlab" && got[1] == "")) {
			t.Errorf("%s: labctl status says %q, %q; install-config %s (%s)", w.name, got[0], got[1], h.BMC.Address, w.vendor)
		}
		if n.BMC.SystemURL != sys {
			t.Errorf("%s: labctl reads its BMC at %s, install-config names %s", w.name, n.BMC.SystemURL, sys)
		}
		// The address as written, with the node's own BMC user.
		var s map[string]any
		if !testenv.WaitFor(20*time.Second, func() bool {
			req, _ := http.NewRequest(http.MethodGet, sys, nil)
			req.SetBasicAuth(h.BMC.Username, h.BMC.Password)
			resp, err := hc.Do(req)
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		}) {
			t.Fatalf("%s: %s does not answer", w.name, sys)
		}
		s = get(sys, h.BMC.Username, h.BMC.Password)
		if s["Manufacturer"] != w.vendor || s["Id"] != w.system || !strings.EqualFold(s["UUID"].(string), n.UUID) {
			t.Errorf("%s: the System at %s is %v %v (UUID %v), want %s %s (%s)", w.name, sys, s["Manufacturer"], s["Id"], s["UUID"], w.vendor, w.system, n.UUID)
		}
		links, _ := s["Links"].(map[string]any)
		by, _ := links["ManagedBy"].([]any)
		if len(by) != 1 {
			t.Fatalf("%s: the System's Links.ManagedBy: %v", w.name, links["ManagedBy"])
		}
		mgrPath, _ := by[0].(map[string]any)["@odata.id"].(string)
		mgr := get("https://"+n.BMC.Addr.String()+mgrPath, h.BMC.Username, h.BMC.Password)
		if mgr["Id"] != w.manager || mgrPath != "/redfish/v1/Managers/"+w.manager {
			t.Errorf("%s: the Manager at %s is %v, want %s", w.name, mgrPath, mgr["Id"], w.manager)
		}
		members, _ := json.Marshal(get("https://"+n.BMC.Addr.String()+mgrPath+"/VirtualMedia", h.BMC.Username, h.BMC.Password)["Members"])
		if !strings.Contains(string(members), mgrPath+"/VirtualMedia/"+w.media+`"`) {
			t.Errorf("%s: the Manager's virtual media %s, want the member %s", w.name, members, w.media)
		}
		// fence_redfish, as a two-node cluster's fencing would run it:
		// the fencing address's path as its systems URI.
		fa, err := url.Parse(strings.TrimPrefix(ipi.FencingAddress(h.BMC.Address), "redfish+"))
		if err != nil || fa.Path != "/redfish/v1/Systems/"+w.system {
			t.Fatalf("%s: fencing address %s: %v", w.name, ipi.FencingAddress(h.BMC.Address), err)
		}
		cmd := exec.Command("ip", "netns", "exec", "labci", fenceRedfish, "--ip", fa.Host, "--systems-uri", fa.Path,
			"--username", h.BMC.Username, "--password", h.BMC.Password, "--ssl-secure", "--action", "status")
		cmd.Env = env
		b, err := cmd.CombinedOutput()
		// A fence agent's status exits 2 for off (EC_STATUS): tiny nodes
		// are defined, not started, by up --until install-config.
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(b), "Status: OFF") {
			t.Errorf("%s: fence_redfish --systems-uri %s at %s: %v\n%s", w.name, fa.Path, fa.Host, err, b)
		}
		t.Logf("%s: %s is %v %v; its Manager %s has %s; fence_redfish --systems-uri %s: %s", w.name, sys, s["Manufacturer"], s["Id"], mgrPath, members, fa.Path, strings.TrimSpace(string(b)))
	}
}
