package vbmcd

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/bmlab/bmlab/internal/kubevirt"
	"github.com/bmlab/bmlab/internal/kubevirt/kubevirttest"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
)

// TestE2EKubeVirtAccounts: accounts over the KubeVirt backend, with
// ipmitool and sushy. A system's own credentials, written into its VM's
// settings annotation by another party (labctl, an operator, another
// vbmcd), reach vbmcd through the informer and open that system only, on
// both faces; an AccountService account scoped to one system (addressed
// as <namespace>.<name>) works there with its role and nowhere else; a
// second vbmcd started on the same cluster knows the per-system
// credentials (they live on the VM), not the first one's local accounts.
func TestE2EKubeVirtAccounts(t *testing.T) {
	ipmitool := testenv.Command(t, "ipmitool")
	f := kubevirttest.Start(t, "lab", "e2e-kva-")
	ctx := context.Background()
	kv := kubevirtREST(t, f, kubevirtv1.SchemeGroupVersion)
	sel := map[string]string{"bmlab.io/bmc": "yes"}
	vms := []*kubevirtv1.VirtualMachine{kubevirtVM(t, f.Namespace, "acct-0", sel), kubevirtVM(t, f.Namespace, "acct-1", sel)}
	createVMs(t, kv, vms...)
	id0, id1 := vmUUID(t, kv, vms[0]), vmUUID(t, kv, vms[1])
	kubeconfig := f.VBMCDKubeconfig(t, nil)
	url := kubevirtDaemon(t, f, kubeconfig, func(c *Config) { c.IPMI, c.IPMIPortBase = true, freeUDPPort(t) })
	settings := func(name string) machine.Settings {
		t.Helper()
		var s machine.Settings
		if a, ok := getVM(t, kv, f.Namespace, name).Annotations[kubevirt.AnnotationSettings]; ok {
			if err := json.Unmarshal([]byte(a), &s); err != nil {
				t.Fatal(err)
			}
		}
		return s
	}
	// The IPMI ports vbmcd chose are BMC state on the VMs too.
	ports := map[string]int{}
	if !testenv.WaitFor(30*time.Second, func() bool {
		for _, vm := range vms {
			if s := settings(vm.Name); s.IPMI != nil {
				ports[vm.Name] = s.IPMI.Port
			}
		}
		return len(ports) == 2
	}) {
		t.Fatalf("IPMI ports in the VMs' annotations: %v", ports)
	}
	ipmi := func(port int, user, pass string, args ...string) (string, error) {
		// -L OPERATOR: ipmitool asks for Administrator by default, which
		// an Operator account is rightly refused.
		all := append([]string{"-I", "lanplus", "-H", "127.0.0.1", "-p", strconv.Itoa(port), "-U", user, "-P", pass, "-L", "OPERATOR", "-R", "1", "-N", "2"}, args...)
		out, err := exec.Command(ipmitool, all...).CombinedOutput()
		return string(out), err
	}
	get := func(url, id, user, pass string) int {
		t.Helper()
		r, err := send("GET", url+"/redfish/v1/Systems/"+id, user, pass, "")
		if err != nil {
			t.Fatal(err)
		}
		return r.Code
	}

	// acct-1's own credentials, written into its annotation by someone
	// else: a JSON merge patch of the settings, keeping what vbmcd put there.
	s1 := settings("acct-1")
	s1.Credentials = []machine.Credential{{Username: "acct1", Password: "acct1-pass"}}
	raw, _ := json.Marshal(s1)
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{kubevirt.AnnotationSettings: string(raw)}}})
	if err := kv.Patch(types.MergePatchType).Namespace(f.Namespace).Resource("virtualmachines").Name("acct-1").Body(patch).Do(ctx).Error(); err != nil {
		t.Fatal(err)
	}
	// Polled at the login throttle's refill rate (one failure a second
	// after a burst of 20), so that waiting does not lock the source out.
	var code int
	if !testenv.WaitFor(30*time.Second, func() bool {
		if code = get(url, id1, "acct1", "acct1-pass"); code != http.StatusOK {
			time.Sleep(time.Second)
		}
		return code == http.StatusOK
	}) {
		t.Fatalf("acct-1's own credentials on acct-1: %d, want 200", code)
	}
	if c := get(url, id0, "acct1", "acct1-pass"); c != http.StatusUnauthorized {
		t.Errorf("acct-1's credentials on acct-0: %d, want 401", c)
	}
	if out, err := ipmi(ports["acct-1"], "acct1", "acct1-pass", "power", "status"); err != nil || !strings.Contains(out, "is off") {
		t.Errorf("ipmitool as acct1 on acct-1: %v %s", err, out)
	}
	if out, err := ipmi(ports["acct-0"], "acct1", "acct1-pass", "power", "status"); err == nil {
		t.Errorf("ipmitool as acct1 on acct-0 succeeded: %s", out)
	}

	// An AccountService account scoped to acct-0, an Operator.
	r, err := send("POST", url+"/redfish/v1/AccountService/Accounts", "admin", "e2e-pass",
		`{"UserName":"op0","Password":"op0-pass-long","RoleId":"Operator","Oem":{"Bmlab":{"System":"lab.acct-0"}}}`)
	if err != nil || r.Code != http.StatusCreated {
		t.Fatalf("create a scoped account: %v %d %s", err, r.Code, r.Body)
	}
	if sys := r.object()["Oem"].(map[string]any)["Bmlab"].(map[string]any)["System"]; sys != id0 {
		t.Errorf("the account's system %v, want acct-0's UUID %s", sys, id0)
	}
	if st := sushy(t, url, "op0", "op0-pass-long", id0, "reset", "On"); st.Power == "" {
		t.Errorf("sushy as op0 on acct-0: %+v", st)
	}
	WaitPowerOn := func(id string) {
		t.Helper()
		var st sushyState
		if !testenv.WaitFor(bootTimeout, func() bool { st = sushy(t, url, "admin", "e2e-pass", id, "show"); return st.Power == "On" }) {
			t.Fatalf("power %q, want On", st.Power)
		}
	}
	WaitPowerOn(id0)
	if c := get(url, id1, "op0", "op0-pass-long"); c == http.StatusOK {
		t.Errorf("op0 reads acct-1: %d", c)
	}
	if out, err := ipmi(ports["acct-0"], "op0", "op0-pass-long", "power", "status"); err != nil || !strings.Contains(out, "is on") {
		t.Errorf("ipmitool as op0 on acct-0: %v %s", err, out)
	}
	if out, err := ipmi(ports["acct-1"], "op0", "op0-pass-long", "power", "status"); err == nil {
		t.Errorf("ipmitool as op0 on acct-1 succeeded: %s", out)
	}
	sushy(t, url, "admin", "e2e-pass", id0, "reset", "ForceOff")

	// A second vbmcd on the same cluster (its own state directory): the
	// per-system credentials are on the VM, the first one's AccountService
	// accounts are its own.
	url2 := kubevirtDaemon(t, f, kubeconfig)
	if c := get(url2, id1, "acct1", "acct1-pass"); c != http.StatusOK {
		t.Errorf("acct-1's credentials on the second vbmcd: %d, want 200", c)
	}
	if c := get(url2, id0, "op0", "op0-pass-long"); c != http.StatusUnauthorized {
		t.Errorf("the first vbmcd's account on the second: %d, want 401", c)
	}
}
