package demo_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/labctl"
	"github.com/bmlab/bmlab/internal/testenv"
)

// TestDemoRunsVbmcdAsAProcess: `labctl demo` defines its VM on the real
// libvirtd, starts vbmcd as a process of its own (labctl links no BMC
// daemon), and the VM's BMC answers over Redfish and IPMI (ipmitool);
// Ctrl-C (the context's end) stops vbmcd and removes the VM.
func TestDemoRunsVbmcdAsAProcess(t *testing.T) {
	testenv.Libvirt(t)
	ipmitool := testenv.Command(t, "ipmitool")
	vbmcd := testenv.Binary(t, "vbmcd")
	iso := testenv.MarkerISO(t)
	prefix := "bmlab-demotest-"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &testenv.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- labctl.Run(ctx, zap.NewNop(), labctl.Streams{In: strings.NewReader(""), Out: out, ErrOut: out}, []string{
			"demo", "--nodes", "1", "--prefix", prefix, "--iso", iso, "--dir", testenv.QemuDir(t),
			"--redfish-addr", "127.0.0.1:18431", "--ipmi-port-base", "16431", "--password", "demo-pass", "--vbmcd", vbmcd,
		})
	}()
	if !testenv.WaitFor(2*time.Minute, func() bool { return strings.Contains(out.String(), "Ctrl-C stops the demo") }) {
		cancel()
		t.Fatalf("the demo never got ready:\n%s\n(run: %v)", out.String(), <-done)
	}
	if !strings.Contains(out.String(), "✓ vbmcd (pid ") {
		t.Errorf("the demo does not say vbmcd runs as a process:\n%s", out.String())
	}
	var url string
	for _, f := range strings.Fields(out.String()) {
		if strings.HasPrefix(f, "https://127.0.0.1:18431/redfish/v1/Systems/") {
			url = f
			break
		}
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.SetBasicAuth("admin", "demo-pass")
	resp, err := hc.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %v, %v", url, resp, err)
	}
	resp.Body.Close()
	ipmi, err := exec.Command(ipmitool, "-I", "lanplus", "-H", "127.0.0.1", "-p", "16431", "-U", "admin", "-P", "demo-pass", "power", "status").CombinedOutput()
	if err != nil || !strings.Contains(string(ipmi), "Chassis Power is") {
		t.Errorf("ipmitool power status: %v\n%s", err, ipmi)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the demo ended with %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the demo did not stop after Ctrl-C")
	}
	if !strings.Contains(out.String(), "✓ removed 1 demo VMs") {
		t.Errorf("the demo did not remove its VM:\n%s", out.String())
	}
	list, err := exec.Command("virsh", "-q", "list", "--all", "--name").CombinedOutput()
	if err != nil || strings.Contains(string(list), prefix) {
		t.Errorf("after the demo: virsh list = %v\n%s", err, list)
	}
	if pids, _ := exec.Command("pgrep", "-f", "redfish-addr 127.0.0.1:18431").Output(); len(bytes.TrimSpace(pids)) > 0 {
		t.Errorf("vbmcd still runs after the demo: %s", pids)
	}
}
