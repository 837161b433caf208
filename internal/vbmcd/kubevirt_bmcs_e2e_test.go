package vbmcd

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/bmlab/bmlab/internal/kubevirt"
	"github.com/bmlab/bmlab/internal/kubevirt/kubevirttest"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
)

// TestE2EKubeVirtOneBMCPerAddress: --bmc-addresses over the KubeVirt
// backend, vbmcd as its ServiceAccount with contrib/kubevirt/vbmcd.yaml's
// Role, as every TestE2EKubeVirt* runs it. Each VirtualMachine's address
// is recorded in its settings annotation; at its address curl finds that
// VM alone, and ipmitool (port 623) starts it through KubeVirt's start
// subresource.
func TestE2EKubeVirtOneBMCPerAddress(t *testing.T) {
	f := kubevirttest.Start(t, "lab", "e2e-kvb-")
	kv := kubevirtREST(t, f, kubevirtv1.SchemeGroupVersion)
	sel := map[string]string{"bmlab.io/bmc": "yes"}
	vms := []*kubevirtv1.VirtualMachine{kubevirtVM(t, f.Namespace, "own-0", sel), kubevirtVM(t, f.Namespace, "own-1", sel)}
	createVMs(t, kv, vms...)
	state := t.TempDir()
	daemon(t, "", func(c *Config) {
		c.Backend, c.Kubeconfig = "kubevirt", f.VBMCDKubeconfig(t, nil)
		c.KubeNamespaces, c.KubeSelector = []string{f.Namespace}, "bmlab.io/bmc=yes"
		c.IPMI, c.StateDir, c.BMCIPMIPort = true, state, 623
		c.BMCAddresses = []string{"127.34.2.1-127.34.2.2"}
	})
	addrs := map[string]string{}
	for _, vm := range vms {
		var s machine.Settings
		if !testenv.WaitFor(10*time.Second, func() bool {
			a, ok := getVM(t, kv, f.Namespace, vm.Name).Annotations[kubevirt.AnnotationSettings]
			return ok && json.Unmarshal([]byte(a), &s) == nil && s.BMCAddress != ""
		}) {
			t.Fatalf("%s: no BMC address in its %s annotation", vm.Name, kubevirt.AnnotationSettings)
		}
		addrs[vm.Name] = s.BMCAddress
	}
	if addrs["own-0"] == addrs["own-1"] {
		t.Fatalf("both VMs have %s", addrs["own-0"])
	}
	ca := filepath.Join(state, bmcCACert)
	for _, vm := range vms {
		// The firmware UUID KubeVirt admitted the VM with.
		if got, id := curlSystems(t, "", addrs[vm.Name], ca, "e2e-pass"), vmUUID(t, kv, vm); len(got) != 1 || got[0] != id {
			t.Errorf("https://%s/redfish/v1/Systems: %v, want [%s]", addrs[vm.Name], got, id)
		}
	}
	ipmiPower(t, "", addrs["own-1"], "e2e-pass", "on")
	if !testenv.WaitFor(30*time.Second, func() bool {
		// A BMC's power-on runs the VM under Manual, as a server stays
		// as its BMC left it.
		rs, _ := getVM(t, kv, f.Namespace, "own-1").RunStrategy()
		return rs == kubevirtv1.RunStrategyManual
	}) {
		t.Errorf("ipmitool -H %s power on did not start own-1", addrs["own-1"])
	}
	if rs, _ := getVM(t, kv, f.Namespace, "own-0").RunStrategy(); rs != kubevirtv1.RunStrategyHalted {
		t.Errorf("the neighbour own-0 has runStrategy %s", rs)
	}
}
