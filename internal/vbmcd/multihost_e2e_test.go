package vbmcd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/digitalocean/go-libvirt"

	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/vbmcd/ipmicmd"
	"github.com/bmlab/bmlab/internal/virt"
	"github.com/bmlab/bmlab/internal/virttest"
)

// multiHost is one vbmcd serving the VMs of two libvirt hosts.
type multiHost struct {
	url        string
	hosts      [2]*virttest.Underlay
	labs       [2]*virttest.Lab
	vms        [2]*virttest.VM
	ports      [2]int
	hostsFlags []string
	client     *http.Client
}

// newMultiHost starts two underlay hosts, alpha and beta, defines one VM
// on each (VM 0 on alpha, 1 on beta), records each VM's IPMI endpoint with
// `vbmcd ipmi set` over both hosts, and starts one vbmcd serving both.
func newMultiHost(t *testing.T, prefix string) *multiHost {
	t.Helper()
	testenv.Command(t, "ipmitool")
	mh := &multiHost{}
	for i, name := range []string{"alpha", "beta"} {
		mh.hosts[i] = virttest.NewUnderlay(t, name, i)
		mh.labs[i] = virttest.NewAt(t, mh.hosts[i].URI, prefix)
		// No CD and no disk: the VM sits in its firmware, running, until
		// it is switched off.
		mh.vms[i] = mh.labs[i].NewVM(t, name+"-vm", virttest.VMOptions{NoCD: true})
		mh.ports[i] = freeUDPPort(t)
		mh.hostsFlags = append(mh.hostsFlags, "--libvirt-uri", name+"="+mh.hosts[i].URI)
	}
	for i, vm := range mh.vms {
		args := append([]string{"ipmi", "set", vm.Name, "--address", "127.0.0.1", "--port", strconv.Itoa(mh.ports[i]), "--domains", prefix + "*"}, mh.hostsFlags...)
		if out, err := runCLI(t, args...); err != nil {
			t.Fatalf("vbmcd %v: %v\n%s", args, err, out)
		}
	}
	mh.url = daemon(t, prefix, func(c *Config) {
		c.Libvirt = []virt.Host{{Name: "alpha", URI: mh.hosts[0].URI}, {Name: "beta", URI: mh.hosts[1].URI}}
		c.IPMI = true
	})
	mh.client = trustingClient(t, caFile, 5*time.Second, 0)
	return mh
}

// runCLI runs a vbmcd command line in-process and returns its output.
func runCLI(t testing.TB, args ...string) (string, error) {
	t.Helper()
	var out testenv.Buffer
	err := Run(context.Background(), Streams{Out: &out, ErrOut: &out}, args)
	return out.String(), err
}

// get GETs a system and returns the status, the Retry-After header and the
// body.
func (mh *multiHost) get(t *testing.T, id string) (int, string, map[string]any) {
	t.Helper()
	return mh.getPath(t, "/redfish/v1/Systems/"+id)
}

// getPath GETs a path of the service.
func (mh *multiHost) getPath(t *testing.T, path string) (int, string, map[string]any) {
	t.Helper()
	code, retry, b := mh.do(t, http.MethodGet, path, "")
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("GET %s: %d, not JSON: %q", path, code, b)
	}
	return code, retry, body
}

// post POSTs a JSON body and returns the status, the Retry-After header and
// the body.
func (mh *multiHost) post(t *testing.T, path, body string) (int, string, map[string]any) {
	t.Helper()
	code, retry, b := mh.do(t, http.MethodPost, path, body)
	var out map[string]any
	_ = json.Unmarshal(b, &out) // 204s have no body
	return code, retry, out
}

// do sends one request as admin through mh's client (which trusts the
// service's certificate alone), with body as JSON when it is not "", and
// returns the status, the Retry-After header and the body; a request that
// gets no answer fails the test.
func (mh *multiHost) do(t *testing.T, method, path, body string) (int, string, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, mh.url+path, strings.NewReader(body))
	req.SetBasicAuth("admin", "e2e-pass")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := mh.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), b
}

// ipmitool runs ipmitool against VM i's BMC.
func (mh *multiHost) ipmitool(i int, args ...string) (string, error) {
	a := lanplus(mh.ports[i], "e2e-pass", append([]string{"-R", "1", "-N", "2"}, args...)...)
	out, err := exec.Command("ipmitool", a...).CombinedOutput()
	return string(out), err
}

// waitState waits until host i's own libvirt reports VM i in state want.
func (mh *multiHost) waitState(t *testing.T, i int, want libvirt.DomainState) {
	t.Helper()
	var got libvirt.DomainState
	if !testenv.WaitFor(10*time.Second, func() bool { got = mh.labs[i].DomainState(t, mh.vms[i].Name); return got == want }) {
		t.Fatalf("%s's libvirt reports %s in state %d, want %d", mh.hosts[i].Name, mh.vms[i].Name, got, want)
	}
}

// TestMultiHostSushyAndIPMIToolDriveEachHost: one vbmcd over two libvirt
// hosts. python3-sushy powers on the VM on alpha and ipmitool the one on
// beta, each host's own libvirt shows it, the ComputerSystem names its
// host, a UUID defined on both hosts answers 409 ResourceInUse and is no
// member of the collection, and `vbmcd ipmi list` shows both VMs with their
// hosts.
func TestMultiHostSushyAndIPMIToolDriveEachHost(t *testing.T) {
	mh := newMultiHost(t, "mhd-")
	for i, want := range []string{"alpha", "beta"} {
		code, _, body := mh.get(t, mh.vms[i].ID)
		host, _ := body["Oem"].(map[string]any)["Bmlab"].(map[string]any)["Host"].(string)
		if code != http.StatusOK || host != want {
			t.Errorf("GET %s: %d, Oem.Bmlab.Host %q, want 200 and %q", mh.vms[i].Name, code, host, want)
		}
	}

	if st := sushy(t, mh.url, "admin", "e2e-pass", mh.vms[0].ID, "reset", "On"); st.Power != "On" && st.Power != "PoweringOn" { // answered at once
		t.Errorf("sushy sees %s after On", st.Power)
	}
	mh.waitState(t, 0, libvirt.DomainRunning)
	if got := mh.labs[1].DomainState(t, mh.vms[1].Name); got == libvirt.DomainRunning {
		t.Errorf("beta's VM runs, but only alpha's was powered on")
	}
	if out, err := mh.ipmitool(1, "chassis", "power", "on"); err != nil {
		t.Fatalf("ipmitool power on (beta): %v\n%s", err, out)
	}
	mh.waitState(t, 1, libvirt.DomainRunning)
	if out, err := mh.ipmitool(0, "chassis", "power", "off"); err != nil {
		t.Fatalf("ipmitool power off (alpha): %v\n%s", err, out)
	}
	mh.waitState(t, 0, libvirt.DomainShutoff)

	// A UUID defined on both hosts is served by neither: 409 with a Base
	// message, and not a member of the collection.
	const dup = "0c6ad9a3-5d0e-4f4e-9b54-3c1d7e0f2a61"
	mh.labs[0].NewVM(t, "dup-a", virttest.VMOptions{NoCD: true, UUID: dup})
	mh.labs[1].NewVM(t, "dup-b", virttest.VMOptions{NoCD: true, UUID: dup})
	var body map[string]any
	if !testenv.WaitFor(5*time.Second, func() bool { code, _, b := mh.get(t, dup); body = b; return code == http.StatusConflict }) {
		t.Errorf("GET of a UUID on both hosts: %v, want 409", body)
	} else if msg, _ := json.Marshal(body); !strings.Contains(string(msg), "Base.1.") || !strings.Contains(string(msg), "ResourceInUse") {
		t.Errorf("409 without a Base ResourceInUse message: %s", msg)
	}
	if code, _, coll := mh.getPath(t, "/redfish/v1/Systems"); code != http.StatusOK || strings.Contains(fmt.Sprint(coll["Members"]), dup) ||
		!strings.Contains(fmt.Sprint(coll["Members"]), mh.vms[1].ID) {
		t.Errorf("the collection (%d) lists the clashing UUID or lacks beta's VM: %v", code, coll["Members"])
	}

	out, err := runCLI(t, append([]string{"ipmi", "list", "-o", "json", "--domains", "mhd-*"}, mh.hostsFlags...)...)
	if err != nil {
		t.Fatalf("ipmi list: %v\n%s", err, out)
	}
	var rows []ipmicmd.Row
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("ipmi list: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, r := range rows {
		got[r.Name] = r.Host + ":" + strconv.Itoa(r.Port)
	}
	for i, h := range mh.hosts {
		if want := h.Name + ":" + strconv.Itoa(mh.ports[i]); got[mh.vms[i].Name] != want {
			t.Errorf("ipmi list: %s on %q, want %q; rows %+v", mh.vms[i].Name, got[mh.vms[i].Name], want, rows)
		}
	}
}

// TestMultiHostOutageAndRecovery: alpha's libvirtd is killed. Within a
// second its VM reads as unavailable: Redfish serves the last known state
// with Status.State UnavailableOffline and a CouldNotEstablishConnection
// condition, and answers a change 503 with Retry-After and the Base message
// ServiceTemporarilyUnavailable; IPMI answers a change "destination
// unavailable" (D3h). beta's VM keeps working through both faces. alpha's
// libvirtd is restarted: its VM is whole again within 2 s, vbmcd
// untouched, and can be driven.
func TestMultiHostOutageAndRecovery(t *testing.T) {
	mh := newMultiHost(t, "mho-")
	a, b := mh.vms[0], mh.vms[1]
	if code, _, _ := mh.get(t, a.ID); code != http.StatusOK {
		t.Fatalf("GET alpha's VM before the outage: %d", code)
	}
	state := func(body map[string]any) string {
		st, _ := body["Status"].(map[string]any)
		s, _ := st["State"].(string)
		return s
	}

	killed := time.Now()
	mh.hosts[0].Kill(t)
	var code int
	var body map[string]any
	for time.Since(killed) < time.Second {
		if code, _, body = mh.get(t, a.ID); code != http.StatusOK || state(body) == "UnavailableOffline" {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	took := time.Since(killed)
	if code != http.StatusOK || state(body) != "UnavailableOffline" {
		t.Fatalf("alpha's VM answers %d %v 1 s after alpha's libvirtd was killed, want 200 UnavailableOffline", code, body)
	}
	t.Logf("alpha's VM read as unavailable %s after the kill", took.Round(time.Millisecond))
	if msg, _ := json.Marshal(body["Status"]); !strings.Contains(string(msg), "CouldNotEstablishConnection") || !strings.Contains(string(msg), "alpha") {
		t.Errorf("unavailable status names no connection failure to alpha: %s", msg)
	}
	code, retry, body := mh.post(t, "/redfish/v1/Systems/"+a.ID+"/Actions/ComputerSystem.Reset", `{"ResetType":"On"}`)
	if code != http.StatusServiceUnavailable || retry == "" {
		t.Errorf("Reset of alpha's VM while alpha is down: %d Retry-After %q, want 503 with Retry-After", code, retry)
	}
	if msg, _ := json.Marshal(body); !strings.Contains(string(msg), "Base.1.") || !strings.Contains(string(msg), "ServiceTemporarilyUnavailable") {
		t.Errorf("503 body has no Base ServiceTemporarilyUnavailable message: %s", msg)
	}
	if out, err := mh.ipmitool(0, "chassis", "power", "status"); err != nil || !strings.Contains(out, "Chassis Power is") {
		t.Errorf("ipmitool reading alpha's VM while alpha is down: %v, want the last known state\n%s", err, out)
	}
	if out, err := mh.ipmitool(0, "chassis", "power", "on"); err == nil || !strings.Contains(out, "Destination unavailable") {
		t.Errorf("ipmitool power on alpha's VM while alpha is down: %v, want Destination unavailable (D3h)\n%s", err, out)
	}

	// beta is unaffected, through both faces.
	if code, _, _ := mh.get(t, b.ID); code != http.StatusOK {
		t.Errorf("GET beta's VM while alpha is down: %d", code)
	}
	if st := sushy(t, mh.url, "admin", "e2e-pass", b.ID, "reset", "On"); st.Power != "On" && st.Power != "PoweringOn" { // answered at once
		t.Errorf("sushy sees beta's VM %s after On", st.Power)
	}
	mh.waitState(t, 1, libvirt.DomainRunning)
	if out, err := mh.ipmitool(1, "chassis", "power", "status"); err != nil || !strings.Contains(out, "is on") {
		t.Errorf("ipmitool on beta's VM while alpha is down: %v\n%s", err, out)
	}

	mh.hosts[0].Start(t)
	answers := time.Now()
	for time.Since(answers) < 2*time.Second {
		if code, _, body = mh.get(t, a.ID); code == http.StatusOK && state(body) != "UnavailableOffline" {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	if code != http.StatusOK || state(body) == "UnavailableOffline" {
		t.Fatalf("alpha's VM answers %d %v 2 s after alpha's libvirtd answers again", code, body)
	}
	t.Logf("alpha's VM served again %s after its libvirtd answered", time.Since(answers).Round(time.Millisecond))
	if st := sushy(t, mh.url, "admin", "e2e-pass", a.ID, "reset", "On"); st.Power != "On" && st.Power != "PoweringOn" { // answered at once
		t.Errorf("sushy sees alpha's VM %s after On, after the restart", st.Power)
	}
	mh.waitState(t, 0, libvirt.DomainRunning)
	if out, err := mh.ipmitool(0, "chassis", "power", "status"); err != nil || !strings.Contains(out, "is on") {
		t.Errorf("ipmitool on alpha's VM after the restart: %v\n%s", err, out)
	}
}
