package vbmcd

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/sim"
	"github.com/bmlab/bmlab/internal/testenv"
)

// TestFenceAgents: the fence agents a two-node OpenShift cluster runs,
// Debian's fence_redfish and fence_ipmilan (fence-agents 4.12), against
// BMCs of the machines' own (--bmc-addresses): status, off, on and reboot,
// fence_redfish without a systems URI (it takes the one system the BMC
// lists) and verifying the BMC's certificate against the lab's CA, as a
// cluster that trusts the lab CA does; fence_ipmilan with lanplus at port
// 623. A wrong password is refused and the machine's power is what it was.
// (It found that a ForceOff right after a power-on, while the machine read
// PoweringOn, was dropped: TestForceOffStopsABackendStart.)
func TestFenceAgents(t *testing.T) {
	testenv.Integration(t)
	fenceRedfish := testenv.Command(t, "fence_redfish")
	fenceIPMI := testenv.Command(t, "fence_ipmilan")
	caCert, caKey := labCA(t)
	_, out := simDaemon(t, func(c *Config) {
		c.SimNodes, c.SimDelay, c.InsecureHTTP, c.IPMI = 2, 500*time.Millisecond, false, true
		c.BMCAddresses = []string{"127.34.5.1-127.34.5.2"}
		c.TLSCACert, c.TLSCAKey = caCert, caKey
	})
	if !testenv.WaitFor(10*time.Second, func() bool { return strings.Contains(out.String(), "2 machine(s) have a BMC of their own") }) {
		t.Fatalf("no BMCs of their own:\n%s", out)
	}
	const user, pass = "admin", "sim-pass-1"
	power := func(addr, id string) string {
		t.Helper()
		v := getWith(t, "https://"+addr, "/redfish/v1/Systems/"+id, user, pass, caCert)
		s, _ := v["PowerState"].(string)
		return s
	}
	agents := []struct {
		name string
		args func(addr, pass string) []string
	}{
		{"fence_redfish", func(addr, pass string) []string {
			return []string{fenceRedfish, "--ip", addr, "--username", user, "--password", pass, "--ssl-secure"}
		}},
		{"fence_ipmilan", func(addr, pass string) []string {
			return []string{fenceIPMI, "--ip", addr, "--username", user, "--password", pass, "--lanplus"}
		}},
	}
	run := func(argv []string, action string) (string, error) {
		cmd := exec.Command(argv[0], append(argv[1:], "--action", action)...)
		// The cluster trusts the lab's CA: python-requests' bundle is it.
		cmd.Env = append(withoutCABundles(), "REQUESTS_CA_BUNDLE="+caCert)
		b, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(b)), err
	}
	for i, a := range agents {
		addr := []string{"127.34.5.1", "127.34.5.2"}[i]
		id := sim.UUIDFor([]string{"sim-0001", "sim-0002"}[i])
		t.Run(a.name, func(t *testing.T) {
			steps := []struct{ action, output, power string }{
				{"status", "Status: OFF", "Off"},
				{"on", "Success: Powered ON", "On"},
				{"status", "Status: ON", "On"},
				{"off", "Success: Powered OFF", "Off"},
				{"on", "Success: Powered ON", "On"},
				{"reboot", "Success: Rebooted", "On"},
			}
			for _, s := range steps {
				got, err := run(a.args(addr, pass), s.action)
				// A fence agent's status exits 2 for off (fencing's
				// EC_STATUS), 0 for on.
				wantErr := s.action == "status" && s.power == "Off"
				if ee, ok := err.(*exec.ExitError); (wantErr && (!ok || ee.ExitCode() != 2)) || (!wantErr && err != nil) || !strings.Contains(got, s.output) {
					t.Fatalf("%s --action %s at %s: %v\n%s", a.name, s.action, addr, err, got)
				}
				// fence_redfish takes PoweringOn for on: the machine is
				// On within the sim's delay.
				var p string
				if !testenv.WaitFor(10*time.Second, func() bool { p = power(addr, id); return p == s.power }) {
					t.Errorf("after %s --action %s: vbmcd reads %s, want %s", a.name, s.action, p, s.power)
				}
			}
			// A wrong password: refused, and nothing changes.
			got, err := run(a.args(addr, "wrong-password"), "off")
			if err == nil {
				t.Errorf("%s with a wrong password succeeded:\n%s", a.name, got)
			}
			time.Sleep(time.Second) // the window in which a power-off would show
			if p := power(addr, id); p != "On" {
				t.Errorf("after %s with a wrong password: vbmcd reads %s, want On", a.name, p)
			}
		})
	}
}
