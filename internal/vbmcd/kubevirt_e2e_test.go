package vbmcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/bmlab/bmlab/internal/kubevirt"
	"github.com/bmlab/bmlab/internal/kubevirt/kubevirttest"
	"github.com/bmlab/bmlab/internal/testenv"
)

// kubevirtVM is a VirtualMachine as a test lab has it: a CD with the
// marker ISO and a disk with the disk marker (hostDisk volumes, which the
// fixture gives its libvirt domain), the disk first in its own boot order,
// halted.
func kubevirtVM(t testing.TB, ns, name string, labels map[string]string) *kubevirtv1.VirtualMachine {
	disk := testenv.QemuDir(t) + "/disk.img"
	testenv.CopyFile(t, testenv.MarkerDisk(t), disk)
	one := uint(1)
	halted := kubevirtv1.RunStrategyHalted
	return &kubevirtv1.VirtualMachine{
		TypeMeta:   metav1.TypeMeta{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy: &halted,
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				Spec: kubevirtv1.VirtualMachineInstanceSpec{
					Domain: kubevirtv1.DomainSpec{
						Resources: kubevirtv1.ResourceRequirements{Requests: corev1.ResourceList{"memory": resource.MustParse("128Mi")}},
						Devices: kubevirtv1.Devices{Disks: []kubevirtv1.Disk{
							{Name: "root", BootOrder: &one, DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}},
							{Name: "cd", DiskDevice: kubevirtv1.DiskDevice{CDRom: &kubevirtv1.CDRomTarget{Bus: kubevirtv1.DiskBusSATA}}},
						}},
					},
					Volumes: []kubevirtv1.Volume{
						{Name: "root", VolumeSource: kubevirtv1.VolumeSource{HostDisk: &kubevirtv1.HostDisk{Path: disk, Type: kubevirtv1.HostDiskExists}}},
						{Name: "cd", VolumeSource: kubevirtv1.VolumeSource{HostDisk: &kubevirtv1.HostDisk{Path: testenv.MarkerISO(t), Type: kubevirtv1.HostDiskExists}}},
					},
				},
			},
		},
	}
}

// redfishClient trusts the daemon's certificate.
func redfishClient(t *testing.T) *http.Client {
	t.Helper()
	return trustingClient(t, caFile, 5*time.Second, 0)
}

// trustingClient trusts the certificate in the file ca only (the daemon's,
// caFile), gives up on a request after timeout and keeps up to idle idle
// connections per host (0: net/http's default).
func trustingClient(tb testing.TB, ca string, timeout time.Duration, idle int) *http.Client {
	tb.Helper()
	pool := x509.NewCertPool()
	pem, err := os.ReadFile(ca)
	if err != nil || !pool.AppendCertsFromPEM(pem) {
		tb.Fatalf("read the daemon's certificate %s: %v", ca, err)
	}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool}, MaxIdleConnsPerHost: idle}}
}

func redfishGet(t *testing.T, hc *http.Client, url, path string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url+path, nil)
	req.SetBasicAuth("admin", "e2e-pass")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	json.NewDecoder(resp.Body).Decode(&v)
	return resp.StatusCode, v
}

func getVMI(t *testing.T, kv *rest.RESTClient, ns, name string) *kubevirtv1.VirtualMachineInstance {
	t.Helper()
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := kv.Get().Namespace(ns).Resource("virtualmachineinstances").Name(name).Do(context.Background()).Into(vmi); err != nil {
		t.Fatal(err)
	}
	return vmi
}

func getVM(t testing.TB, kv *rest.RESTClient, ns, name string) *kubevirtv1.VirtualMachine {
	t.Helper()
	vm := &kubevirtv1.VirtualMachine{}
	if err := kv.Get().Namespace(ns).Resource("virtualmachines").Name(name).Do(context.Background()).Into(vm); err != nil {
		t.Fatal(err)
	}
	return vm
}

// kubevirtDaemon runs vbmcd --backend kubevirt over f's namespace
// (VirtualMachines labelled bmlab.io/bmc=yes) with kubeconfig, which
// VBMCDKubeconfig gives: vbmcd's ServiceAccount with
// contrib/kubevirt/vbmcd.yaml's roles.
func kubevirtDaemon(t testing.TB, f *kubevirttest.Fixture, kubeconfig string, mods ...func(*Config)) string {
	t.Helper()
	return daemon(t, "", append([]func(*Config){func(c *Config) {
		c.Backend, c.Kubeconfig = "kubevirt", kubeconfig
		c.KubeNamespaces, c.KubeSelector = []string{f.Namespace}, "bmlab.io/bmc=yes"
	}}, mods...)...)
}

// kubevirtREST is a REST client for gv's resources as the fixture
// cluster's admin.
func kubevirtREST(t testing.TB, f *kubevirttest.Fixture, gv schema.GroupVersion) *rest.RESTClient {
	t.Helper()
	c, err := kubevirt.NewRESTClient(f.API.RestConfig(), gv)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// instanceXML waits up to 30 s for the libvirt domain of vm's instance
// and returns its XML (virsh dumpxml).
func instanceXML(t *testing.T, f *kubevirttest.Fixture, vm *kubevirtv1.VirtualMachine) string {
	t.Helper()
	var x []byte
	var err error
	if !testenv.WaitFor(30*time.Second, func() bool {
		x, err = exec.Command("virsh", "-c", "qemu:///system", "dumpxml", f.DomainName(vm.Name)).CombinedOutput()
		return err == nil
	}) {
		t.Fatalf("no domain for the instance: %v %s", err, x)
	}
	return string(x)
}

// oneKubeVirtVM starts a cluster (kubevirttest.Start with prefix) and
// creates in it, as its admin, one VirtualMachine named name that carries
// vbmcd's label; it returns the fixture, the admin's client, the VM and
// the firmware UUID KubeVirt gave it.
func oneKubeVirtVM(t testing.TB, prefix, name string) (*kubevirttest.Fixture, *rest.RESTClient, *kubevirtv1.VirtualMachine, string) {
	t.Helper()
	f := kubevirttest.Start(t, "lab", prefix)
	vm := kubevirtVM(t, f.Namespace, name, map[string]string{"bmlab.io/bmc": "yes"})
	kv := kubevirtREST(t, f, kubevirtv1.SchemeGroupVersion)
	createVMs(t, kv, vm)
	return f, kv, vm, vmUUID(t, kv, vm)
}

// createVMs creates VirtualMachines as the cluster's admin (their owner).
func createVMs(t testing.TB, kv *rest.RESTClient, vms ...*kubevirtv1.VirtualMachine) {
	t.Helper()
	for _, vm := range vms {
		if err := kv.Post().Namespace(vm.Namespace).Resource("virtualmachines").Body(vm).Do(context.Background()).Error(); err != nil {
			t.Fatalf("create VirtualMachine %s: %v", vm.Name, err)
		}
	}
}

// vmUUID is the firmware UUID of a VM created with createVMs: the one
// KubeVirt's VM webhook gave it (a new VM gets a random one), by which
// vbmcd serves it.
func vmUUID(t testing.TB, kv *rest.RESTClient, vm *kubevirtv1.VirtualMachine) string {
	t.Helper()
	fw := getVM(t, kv, vm.Namespace, vm.Name).Spec.Template.Spec.Domain.Firmware
	if fw == nil || fw.UUID == "" {
		t.Fatalf("VirtualMachine %s has no firmware UUID after KubeVirt admitted it", vm.Name)
	}
	return string(fw.UUID)
}

// webConsoleProbe opens the web console's serial console of system id
// (the page's WebSocket, after a Redfish session login, as the browser
// does), has grub at its prompt print a word only its answer holds, and
// returns what went wrong, if anything.
func webConsoleProbe(t *testing.T, url, user, pass, id string, within time.Duration) error {
	t.Helper()
	r, err := send("POST", url+"/redfish/v1/SessionService/Sessions", "", "", fmt.Sprintf(`{"UserName":%q,"Password":%q}`, user, pass))
	if err != nil || r.Code != http.StatusCreated {
		return fmt.Errorf("log in: %v %d %s", err, r.Code, r.Body)
	}
	tok := r.Header.Get("X-Auth-Token")
	pool := x509.NewCertPool()
	ca, _ := os.ReadFile(caFile)
	pool.AppendCertsFromPEM(ca)
	d := websocket.Dialer{TLSClientConfig: &tls.Config{RootCAs: pool}, HandshakeTimeout: 10 * time.Second}
	ws, _, err := d.Dial("wss"+strings.TrimPrefix(url, "https")+"/ui/console/"+id, http.Header{"Origin": {url}})
	if err != nil {
		return fmt.Errorf("open the console: %w", err)
	}
	defer ws.Close()
	if err := ws.WriteJSON(map[string]string{"Token": tok}); err != nil {
		return err
	}
	out := &testenv.Buffer{}
	var status []string
	var smu sync.Mutex
	go func() {
		for {
			kind, msg, err := ws.ReadMessage()
			if err != nil {
				return
			}
			if kind == websocket.BinaryMessage {
				out.Write(msg)
			} else {
				smu.Lock()
				status = append(status, string(msg))
				smu.Unlock()
			}
		}
	}()
	prompt := func() bool {
		from := len(out.String())
		_ = ws.WriteMessage(websocket.BinaryMessage, []byte("\r"))
		return testenv.WaitFor(2*time.Second, func() bool { return strings.Contains(out.String()[from:], "grub>") })
	}
	if !testenv.WaitFor(within, prompt) {
		smu.Lock()
		defer smu.Unlock()
		return fmt.Errorf("no grub prompt on the web console; console status %v, output %q", status, out.String())
	}
	_ = ws.WriteMessage(websocket.BinaryMessage, []byte("set x=WEB\recho ${x}PROBE\r"))
	if !testenv.WaitFor(30*time.Second, func() bool { return strings.Contains(out.String(), "WEBPROBE") }) {
		return fmt.Errorf("grub's answer did not come back on the web console; got %q", out.String())
	}
	return nil
}

// TestE2EKubeVirt drives a KubeVirt VirtualMachine through vbmcd
// --backend kubevirt with sushy and ipmitool, against KubeVirt's own
// virt-api and virt-controller (the fixture plays the node), vbmcd running
// as its ServiceAccount with contrib/kubevirt/vbmcd.yaml's roles:
//   - only the selected VM is served;
//   - Once Cd + On: KubeVirt's start subresource, the instance
//     virt-controller makes boots the CD (the marker), its spec has the CD
//     first while the VM's spec is back to its own order (the Once spent);
//     the VM is under runStrategy Manual;
//   - the guest powers itself off (the marker ISO halts): the instance
//     ends and nothing starts it again, the system stays Off;
//   - On again boots the disk; IPMI reads On; IPMI SOL and the web
//     console's serial console reach grub's prompt through KubeVirt's
//     console subresource;
//   - ForceRestart is a warm reset (KubeVirt's reset subresource): the
//     same instance boots the disk again; PowerCycle is cold: a new
//     instance;
//   - ForceOff: the instance is killed, the system Off, the domain gone;
//     ipmitool powers it on again.
func TestE2EKubeVirt(t *testing.T) {
	ipmi := newIPMITool(t, "e2e-pass")
	f := kubevirttest.Start(t, "lab", "e2e-kv-")
	vm := kubevirtVM(t, f.Namespace, "node-0", map[string]string{"bmlab.io/bmc": "yes"})
	other := kubevirtVM(t, f.Namespace, "not-mine", nil)
	kv := kubevirtREST(t, f, kubevirtv1.SchemeGroupVersion)
	createVMs(t, kv, vm, other)
	id := vmUUID(t, kv, vm)
	url := kubevirtDaemon(t, f, f.VBMCDKubeconfig(t, nil), ipmi.ipmiOn, func(c *Config) { c.WebConsole = true })
	const user, pass = "admin", "e2e-pass"
	serial := f.SerialLog(vm.Name)
	waitMarker := func(marker string, before int) int { t.Helper(); return waitSerial(t, serial, marker, before) }
	show := func() sushyState { t.Helper(); return sushy(t, url, user, pass, id, "show") }
	waitRedfishPower := func(want string) {
		t.Helper()
		var st sushyState
		if !testenv.WaitFor(bootTimeout, func() bool { st = show(); return st.Power == want }) {
			t.Fatalf("Redfish power %q, want %q", st.Power, want)
		}
	}
	vmiUID := func() types.UID { t.Helper(); return getVMI(t, kv, f.Namespace, vm.Name).UID }

	// Only the selected VM is served, by its firmware UUID and by
	// <namespace>.<name>.
	hc := redfishClient(t)
	if code, v := redfishGet(t, hc, url, "/redfish/v1/Systems"); code != http.StatusOK || v["Members@odata.count"] != float64(1) {
		t.Fatalf("Systems: %d %v, want the one selected VM", code, v)
	}
	if code, _ := redfishGet(t, hc, url, "/redfish/v1/Systems/"+vmUUID(t, kv, other)); code != http.StatusNotFound {
		t.Fatalf("the unselected VM answers %d, want 404", code)
	}
	if code, v := redfishGet(t, hc, url, "/redfish/v1/Systems/lab.node-0"); code != http.StatusOK || v["UUID"] != id {
		t.Fatalf("Systems/lab.node-0: %d UUID %v, want 200 %s", code, v["UUID"], id)
	}
	if st := show(); st.Power != "Off" {
		t.Fatalf("node-0 before power-on: %+v", st)
	}
	st := sushy(t, url, user, pass, id, "boot", "Cd", "Once", "Legacy")
	if st.Target != "Cd" || st.Enabled != "Once" {
		t.Fatalf("after set_system_boot_options: %+v", st)
	}
	sushy(t, url, user, pass, id, "reset", "On")
	cd := waitMarker(testenv.Marker, 0)
	// virt-controller made the instance from the spec with the override;
	// the VM's spec is back to its own order after it (the Once spent).
	if d := getVMI(t, kv, f.Namespace, vm.Name).Spec.Domain.Devices.Disks; d[1].BootOrder == nil || *d[1].BootOrder != 1 {
		t.Errorf("the instance was not made with the CD first: disks %+v", d)
	}
	if st := show(); st.Enabled != "Disabled" {
		t.Errorf("the Once override should be spent by the boot: %+v", st)
	}
	got := getVM(t, kv, f.Namespace, vm.Name)
	if d := got.Spec.Template.Spec.Domain.Devices.Disks; d[0].BootOrder == nil || *d[0].BootOrder != 1 || d[1].BootOrder != nil {
		t.Errorf("the VM's own boot order is not back after the Once: disks %+v", d)
	}
	if rs, _ := got.RunStrategy(); rs != kubevirtv1.RunStrategyManual {
		t.Errorf("runStrategy %s after a BMC power-on, want Manual", rs)
	}

	// The marker ISO powers the guest off: the instance ends and, under
	// Manual, nothing starts another. It stays off, as a server does.
	waitRedfishPower("Off")
	if !testenv.WaitFor(30*time.Second, func() bool { return getVMI(t, kv, f.Namespace, vm.Name).IsFinal() }) {
		t.Fatalf("the instance did not end after the guest powered off")
	}
	ended := vmiUID()
	time.Sleep(5 * time.Second) // the window in which nothing may start it again
	if st := show(); st.Power != "Off" || vmiUID() != ended || testenv.Count(serial, testenv.DiskMarker) != 0 {
		t.Fatalf("a guest that powered itself off came back: %+v", st)
	}

	// On again: the disk boots (no override left).
	sushy(t, url, user, pass, id, "reset", "On")
	waitMarker(testenv.DiskMarker, 0)
	if c := testenv.Count(serial, testenv.Marker); c != cd {
		t.Fatalf("the CD booted again after a spent Once override")
	}
	waitRedfishPower("On")
	if out := ipmi.must(t, "power", "status"); !strings.Contains(out, "is on") {
		t.Fatalf("ipmitool power status: %q", out)
	}

	// The serial console: ipmitool's SOL and the web console over
	// KubeVirt's console subresource (aggregated by kube-apiserver,
	// authorized by virt-api, streamed from the node's virt-handler).
	if err := solProbe(t, ipmi, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := webConsoleProbe(t, url, user, pass, id, time.Minute); err != nil {
		t.Fatal(err)
	}

	// ForceRestart: KubeVirt's reset subresource, a warm reset of the
	// same instance.
	instance := vmiUID()
	disk := testenv.Count(serial, testenv.DiskMarker)
	sushy(t, url, user, pass, id, "reset", "ForceRestart")
	disk = waitMarker(testenv.DiskMarker, disk)
	if uid := vmiUID(); uid != instance {
		t.Errorf("ForceRestart replaced instance %s by %s, want a warm reset of it", instance, uid)
	}
	waitRedfishPower("On")

	// PowerCycle: off and on again, a new instance.
	sushy(t, url, user, pass, id, "reset", "PowerCycle")
	waitMarker(testenv.DiskMarker, disk)
	if !testenv.WaitFor(30*time.Second, func() bool { return vmiUID() != instance }) {
		t.Errorf("PowerCycle kept instance %s", instance)
	}
	waitRedfishPower("On")

	// ForceOff: the stop subresource with a zero grace period.
	sushy(t, url, user, pass, id, "reset", "ForceOff")
	waitRedfishPower("Off")
	if out := ipmi.must(t, "power", "status"); !strings.Contains(out, "is off") {
		t.Fatalf("ipmitool power status: %q", out)
	}
	got = getVM(t, kv, f.Namespace, vm.Name)
	if rs, _ := got.RunStrategy(); rs != kubevirtv1.RunStrategyManual {
		t.Errorf("runStrategy %s after ForceOff, want Manual", rs)
	}
	if _, ok := got.Annotations[kubevirt.AnnotationSettings]; !ok {
		t.Errorf("the VM has no %s annotation", kubevirt.AnnotationSettings)
	}
	if !testenv.WaitFor(30*time.Second, func() bool {
		b, err := exec.Command("virsh", "-c", "qemu:///system", "domstate", f.DomainName(vm.Name)).CombinedOutput()
		return err != nil || strings.Contains(string(b), "shut off")
	}) {
		t.Fatalf("the domain still runs after ForceOff")
	}

	// ipmitool powers it on again: the disk boots.
	disk = testenv.Count(serial, testenv.DiskMarker)
	ipmi.must(t, "chassis", "power", "on")
	waitMarker(testenv.DiskMarker, disk)
	waitRedfishPower("On")
}

// TestE2EKubeVirtStartRefused: KubeVirt refuses a start while it is still
// carrying out a stop (the node is slow to remove the stopped instance's
// virt-launcher pod, so the stop request stays pending and the start
// subresource answers "stop/start already underway"). vbmcd waits that
// out, as a BMC waits for the power sequence under way: the On is
// accepted, the system does not come on while KubeVirt refuses, and comes
// on once the node removed the pod. A refusal that does not clear on its
// own is the system's Redfish error: KubeVirt refuses the soft reboot of a
// VM without ACPI, and GracefulRestart answers with KubeVirt's message
// (at once, or as the system's power fault). GracefulShutdown of that VM
// ends when KubeVirt kills it after its grace period.
func TestE2EKubeVirtStartRefused(t *testing.T) {
	f := kubevirttest.Start(t, "lab", "e2e-kvs-")
	vm := kubevirtVM(t, f.Namespace, "refused-0", map[string]string{"bmlab.io/bmc": "yes"})
	noACPI := kubevirtVM(t, f.Namespace, "noacpi-0", map[string]string{"bmlab.io/bmc": "yes"})
	off := false
	noACPI.Spec.Template.Spec.Domain.Features = &kubevirtv1.Features{ACPI: kubevirtv1.FeatureState{Enabled: &off}}
	grace := int64(3)
	noACPI.Spec.Template.Spec.TerminationGracePeriodSeconds = &grace
	kv := kubevirtREST(t, f, kubevirtv1.SchemeGroupVersion)
	sub := kubevirtREST(t, f, kubevirtv1.SubresourceGroupVersions[0])
	createVMs(t, kv, vm, noACPI)
	id := vmUUID(t, kv, vm)
	url := kubevirtDaemon(t, f, f.VBMCDKubeconfig(t, nil))
	const user, pass = "admin", "e2e-pass"
	serial := f.SerialLog(vm.Name)
	power := func(id string) string { t.Helper(); return sushy(t, url, user, pass, id, "show").Power }
	waitPower := func(id, want string) {
		t.Helper()
		if !testenv.WaitFor(bootTimeout, func() bool { return power(id) == want }) {
			t.Fatalf("%s: Redfish power %q, want %q", id, power(id), want)
		}
	}
	sushy(t, url, user, pass, id, "reset", "On")
	testenv.WaitFor(bootTimeout, func() bool { return testenv.Count(serial, testenv.DiskMarker) > 0 })
	waitPower(id, "On")

	f.HoldPodRemoval(true)
	sushy(t, url, user, pass, id, "reset", "ForceOff")
	waitPower(id, "Off")
	// KubeVirt's own answer to a start now.
	err := sub.Put().Namespace(f.Namespace).Resource("virtualmachines").Name(vm.Name).SubResource("start").
		Body([]byte("{}")).SetHeader("Content-Type", "application/json").Do(context.Background()).Error()
	if err == nil || !strings.Contains(err.Error(), "already underway") {
		t.Fatalf("KubeVirt's start while the stop is under way: %v, want it refused (stop/start already underway)", err)
	}
	t.Logf("KubeVirt refuses the start: %v", err)
	disks := testenv.Count(serial, testenv.DiskMarker)
	sushy(t, url, user, pass, id, "reset", "On")
	time.Sleep(3 * time.Second) // the window in which KubeVirt keeps refusing
	if st := sushy(t, url, user, pass, id, "show"); st.Power == "On" || testenv.Count(serial, testenv.DiskMarker) != disks {
		t.Fatalf("the system came on while KubeVirt refused the start: %+v", st)
	}
	if code, v := redfishGet(t, redfishClient(t), url, "/redfish/v1/Systems/"+id); code != http.StatusOK || strings.Contains(fmt.Sprint(v["Status"]), "Warning") {
		t.Fatalf("while vbmcd waits for KubeVirt the system reads %d %v, want no fault", code, v["Status"])
	}
	f.HoldPodRemoval(false)
	waitPower(id, "On")
	if !testenv.WaitFor(bootTimeout, func() bool { return testenv.Count(serial, testenv.DiskMarker) > disks }) {
		t.Fatal("the disk did not boot after KubeVirt took the start")
	}

	// KubeVirt refuses a soft reboot of a VM without ACPI (and no guest
	// agent): GracefulRestart answers with KubeVirt's message.
	nid := vmUUID(t, kv, noACPI)
	sushy(t, url, user, pass, nid, "reset", "On")
	waitPower(nid, "On")
	r, err := send("POST", url+"/redfish/v1/Systems/"+nid+"/Actions/ComputerSystem.Reset", user, pass, `{"ResetType":"GracefulRestart"}`)
	if err != nil {
		t.Fatal(err)
	}
	const why = "neither have the agent connected nor the ACPI feature enabled"
	if r.Code != http.StatusConflict || !strings.Contains(string(r.Body), why) {
		// Answered before KubeVirt did: the refusal is the system's
		// power fault.
		if r.Code/100 != 2 || !testenv.WaitFor(30*time.Second, func() bool {
			_, v := redfishGet(t, redfishClient(t), url, "/redfish/v1/Systems/"+nid)
			return strings.Contains(fmt.Sprint(v["Status"]), why)
		}) {
			_, v := redfishGet(t, redfishClient(t), url, "/redfish/v1/Systems/"+nid)
			t.Fatalf("GracefulRestart without ACPI: %d %s, status %v; want KubeVirt's refusal (%s)", r.Code, r.Body, v["Status"], why)
		}
	}

	// GracefulShutdown of a guest that cannot take the ACPI request:
	// KubeVirt kills the instance when its grace period (3 s here) ends.
	began := time.Now()
	sushy(t, url, user, pass, nid, "reset", "GracefulShutdown")
	waitPower(nid, "Off")
	t.Logf("GracefulShutdown without ACPI: Off after %s (grace period 3 s)", time.Since(began).Round(100*time.Millisecond))
}

// TestE2EKubeVirtAPIServerRestart: kube-apiserver crashes (SIGKILL) and comes back
// while four clients read the system over Redfish. Every read is answered
// (200, from the informers' last state); the system reads
// UnavailableOffline during the outage and changes answer 503 with
// Retry-After; once the API server is back the service is whole (a boot
// override PATCH goes through and lands in the VM's annotation).
func TestE2EKubeVirtAPIServerRestart(t *testing.T) {
	f, kv, vm, id := oneKubeVirtVM(t, "e2e-kvr-", "node-0")
	url := kubevirtDaemon(t, f, f.VBMCDKubeconfig(t, nil))
	hc := redfishClient(t)
	do := func(method, body string) (int, string, string) {
		req, _ := http.NewRequest(method, url+"/redfish/v1/Systems/"+id, strings.NewReader(body))
		req.SetBasicAuth("admin", "e2e-pass")
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return 0, "", err.Error()
		}
		defer resp.Body.Close()
		var v struct{ Status struct{ State string } }
		json.NewDecoder(resp.Body).Decode(&v)
		return resp.StatusCode, resp.Header.Get("Retry-After"), v.Status.State
	}

	var mu sync.Mutex
	var reads, failed, offline int
	var errs []string
	rs := newReaders(t)
	for range 4 {
		rs.add(func() {
			code, _, state := do(http.MethodGet, "")
			mu.Lock()
			reads++
			if code != http.StatusOK {
				failed++
				if len(errs) < 5 {
					errs = append(errs, fmt.Sprint(code, " ", state))
				}
			}
			if state == "UnavailableOffline" {
				offline++
			}
			mu.Unlock()
		})
	}
	f.API.KillAPIServer()
	killed := time.Now()
	if !testenv.WaitFor(5*time.Second, func() bool { _, _, s := do(http.MethodGet, ""); return s == "UnavailableOffline" }) {
		t.Fatal("the system is not UnavailableOffline 5 s after kube-apiserver was killed")
	}
	t.Logf("UnavailableOffline %v after kube-apiserver was killed", time.Since(killed).Round(time.Millisecond))
	const override = `{"Boot":{"BootSourceOverrideTarget":"Cd","BootSourceOverrideEnabled":"Continuous"}}`
	if code, retry, _ := do(http.MethodPatch, override); code != http.StatusServiceUnavailable || retry == "" {
		t.Errorf("PATCH during the outage: %d Retry-After %q, want 503 with Retry-After", code, retry)
	}

	f.API.StartAPIServer(t)
	back := time.Now()
	if !testenv.WaitFor(30*time.Second, func() bool {
		code, _, _ := do(http.MethodPatch, override)
		return code/100 == 2
	}) {
		t.Fatal("a PATCH is still refused 30 s after kube-apiserver came back")
	}
	t.Logf("whole again %v after kube-apiserver was ready", time.Since(back).Round(time.Millisecond))
	rs.stop()
	if _, _, s := do(http.MethodGet, ""); s == "UnavailableOffline" {
		t.Errorf("still UnavailableOffline after a PATCH went through")
	}
	if failed > 0 || offline == 0 {
		t.Errorf("reads: %d, failed %d %v, UnavailableOffline %d; want none failed and some offline", reads, failed, errs, offline)
	}
	t.Logf("reads %d, UnavailableOffline %d", reads, offline)
	got := getVM(t, kv, f.Namespace, vm.Name)
	if !strings.Contains(got.Annotations[kubevirt.AnnotationSettings], `"Target":"Cd"`) {
		t.Errorf("the override is not in the VM's annotation: %s", got.Annotations[kubevirt.AnnotationSettings])
	}
}

// TestE2EKubeVirtUEFI: sushy sets Once Cd in UEFI mode on a VM whose spec
// says BIOS: the VM's firmware becomes EFI (secure boot off), the instance
// boots the CD under OVMF (the marker), and the override is spent.
func TestE2EKubeVirtUEFI(t *testing.T) {
	f, kv, vm, id := oneKubeVirtVM(t, "e2e-kvu-", "node-0")
	url := kubevirtDaemon(t, f, f.VBMCDKubeconfig(t, nil))
	const user, pass = "admin", "e2e-pass"
	if st := sushy(t, url, user, pass, id, "show"); st.Mode != "Legacy" {
		t.Fatalf("a VM with a BIOS spec reads mode %q, want Legacy", st.Mode)
	}
	if st := sushy(t, url, user, pass, id, "boot", "Cd", "Once", "UEFI"); st.Mode != "UEFI" || st.Target != "Cd" {
		t.Fatalf("after set_system_boot_options: %+v", st)
	}
	fw := getVM(t, kv, f.Namespace, vm.Name).Spec.Template.Spec.Domain.Firmware
	if fw == nil || fw.Bootloader == nil || fw.Bootloader.EFI == nil || fw.Bootloader.EFI.SecureBoot == nil || *fw.Bootloader.EFI.SecureBoot {
		t.Fatalf("the VM's firmware is %+v, want efi with secureBoot false", fw)
	}
	sushy(t, url, user, pass, id, "reset", "On")
	serial := f.SerialLog(vm.Name)
	if !testenv.WaitFor(bootTimeout, func() bool { return testenv.Count(serial, testenv.Marker) > 0 }) {
		t.Fatalf("the CD did not boot under UEFI within %s", bootTimeout)
	}
	// The instance's domain (or, once the ISO powered off, the next one's:
	// the firmware stays UEFI) boots OVMF.
	x := instanceXML(t, f, vm)
	if !strings.Contains(x, "<loader") {
		t.Errorf("the instance's domain has no UEFI loader:\n%s", x)
	}
	if st := sushy(t, url, user, pass, id, "show"); st.Enabled != "Disabled" || st.Mode != "UEFI" {
		t.Errorf("after the boot: %+v, want the Once spent and mode UEFI kept", st)
	}
}

// TestE2EKubeVirtRBACConsole: vbmcd.yaml's Role without get on
// virtualmachineinstances/console (the rule IPMI SOL and the web console
// need): power still works, and the API server and virt-api refuse the
// console, so SOL and the web console's serial console reach no prompt.
// With the Role as shipped both work (TestE2EKubeVirt): the console verb is
// needed, and RBAC is enforced on vbmcd.
func TestE2EKubeVirtRBACConsole(t *testing.T) {
	ipmi := newIPMITool(t, "e2e-pass")
	f, _, vm, id := oneKubeVirtVM(t, "e2e-kvc-", "rbac-0")
	kc := f.VBMCDKubeconfig(t, kubevirttest.WithoutVerb(t, "virtualmachineinstances/console", "get"))
	url := kubevirtDaemon(t, f, kc, ipmi.ipmiOn, func(c *Config) { c.WebConsole = true })
	sushy(t, url, "admin", "e2e-pass", id, "reset", "On")
	if !testenv.WaitFor(bootTimeout, func() bool { return testenv.Count(f.SerialLog(vm.Name), testenv.DiskMarker) > 0 }) {
		t.Fatal("the disk did not boot: power does not work under the Role")
	}
	// With the verb grub's prompt answers within a few seconds
	// (TestE2EKubeVirt); 20 s without it is the window.
	if err := solProbe(t, ipmi, 20*time.Second); err == nil {
		t.Error("IPMI SOL reached grub's prompt without get on virtualmachineinstances/console")
	} else {
		t.Logf("SOL without the console verb: %v", err)
	}
	if err := webConsoleProbe(t, url, "admin", "e2e-pass", id, 20*time.Second); err == nil {
		t.Error("the web console reached grub's prompt without get on virtualmachineinstances/console")
	} else {
		t.Logf("the web console without the console verb: %v", err)
	}
}
