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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
func kubevirtVM(t *testing.T, ns, name string, labels map[string]string) *kubevirtv1.VirtualMachine {
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
	pool := x509.NewCertPool()
	ca, err := os.ReadFile(caFile)
	if err != nil || !pool.AppendCertsFromPEM(ca) {
		t.Fatalf("read the daemon's certificate: %v", err)
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
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

// solProbe runs `ipmitool sol activate` against the BMC on port (under
// script(1), which gives it the terminal it wants) and has grub, at its
// prompt on the disk marker, print a word that only its answer holds (the
// typed line holds "${x}PROBE"); then leaves with ~.
func solProbe(t *testing.T, ipmitool string, port int, pass string) {
	t.Helper()
	scr := testenv.Command(t, "script")
	line := strings.Join(append([]string{"exec", ipmitool}, lanplus(port, pass, "sol", "activate")...), " ")
	cmd := exec.Command(scr, "-q", "-e", "-c", line, "/dev/null")
	cmd.Env = append(os.Environ(), "SHELL=/bin/sh")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out := &testenv.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if !testenv.WaitFor(20*time.Second, func() bool { return strings.Contains(out.String(), "SOL Session operational") }) {
		t.Fatalf("ipmitool sol activate did not start: %q", out.String())
	}
	// The guest may still be booting (what is typed before grub reads
	// its prompt is lost): ask for a prompt until one comes, then type.
	prompt := func() bool {
		from := len(out.String())
		if _, err := in.Write([]byte("\r")); err != nil {
			t.Fatal(err)
		}
		return testenv.WaitFor(2*time.Second, func() bool { return strings.Contains(out.String()[from:], "grub>") })
	}
	if !testenv.WaitFor(60*time.Second, prompt) {
		t.Fatalf("no grub prompt over SOL; got %q", out.String())
	}
	if _, err := in.Write([]byte("set x=SOL\recho ${x}PROBE\r")); err != nil {
		t.Fatal(err)
	}
	if !testenv.WaitFor(30*time.Second, func() bool { return strings.Contains(out.String(), "SOLPROBE") }) {
		t.Fatalf("grub's answer did not come back over SOL; got %q", out.String())
	}
	in.Write([]byte("\r~."))
}

func getVMI(t *testing.T, kv *rest.RESTClient, ns, name string) *kubevirtv1.VirtualMachineInstance {
	t.Helper()
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := kv.Get().Namespace(ns).Resource("virtualmachineinstances").Name(name).Do(context.Background()).Into(vmi); err != nil {
		t.Fatal(err)
	}
	return vmi
}

func getVM(t *testing.T, kv *rest.RESTClient, ns, name string) *kubevirtv1.VirtualMachine {
	t.Helper()
	vm := &kubevirtv1.VirtualMachine{}
	if err := kv.Get().Namespace(ns).Resource("virtualmachines").Name(name).Do(context.Background()).Into(vm); err != nil {
		t.Fatal(err)
	}
	return vm
}

// TestE2EKubeVirt drives a KubeVirt VirtualMachine through vbmcd
// --backend kubevirt with sushy and ipmitool, over a real kube-apiserver
// holding KubeVirt's CRDs, with the fixture playing KubeVirt's controllers
// over libvirt: a Once Cd override boots the CD once (the marker), the
// guest's power-off ends that instance and runStrategy Always starts the
// next, which boots the disk; ForceOff stops it; IPMI sees the same.
func TestE2EKubeVirt(t *testing.T) {
	ipmitool := testenv.Command(t, "ipmitool")
	f := kubevirttest.Start(t, "lab", "e2e-kv-")
	ctx := context.Background()
	vm := kubevirtVM(t, f.Namespace, "node-0", map[string]string{"bmlab.io/bmc": "yes"})
	other := kubevirtVM(t, f.Namespace, "not-mine", nil)
	kv, err := kubevirt.NewRESTClient(f.API.RestConfig(), kubevirtv1.SchemeGroupVersion)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []*kubevirtv1.VirtualMachine{vm, other} {
		if err := kv.Post().Namespace(f.Namespace).Resource("virtualmachines").Body(o).Do(ctx).Error(); err != nil {
			t.Fatalf("create VirtualMachine %s: %v", o.Name, err)
		}
	}
	id := kubevirt.FirmwareUUID(vm)
	port := freeUDPPort(t)
	url := daemon(t, "", func(c *Config) {
		c.Backend, c.Kubeconfig = "kubevirt", f.Kubeconfig
		c.KubeNamespaces, c.KubeSelector = []string{f.Namespace}, "bmlab.io/bmc=yes"
		c.IPMI, c.IPMIPortBase = true, port
	})
	const user, pass = "admin", "e2e-pass"
	serial := f.SerialLog(vm.Name)
	waitMarker := func(marker string, before int) int {
		t.Helper()
		var n int
		if !testenv.WaitFor(bootTimeout, func() bool { n = testenv.Count(serial, marker); return n > before }) {
			t.Fatalf("marker %q did not appear within %s (count %d)", marker, bootTimeout, n)
		}
		return n
	}
	show := func() sushyState { t.Helper(); return sushy(t, url, user, pass, id, "show") }
	waitRedfishPower := func(want string) {
		t.Helper()
		var st sushyState
		if !testenv.WaitFor(bootTimeout, func() bool { st = show(); return st.Power == want }) {
			t.Fatalf("Redfish power %q, want %q", st.Power, want)
		}
	}

	// Only the selected VM is served, by its firmware UUID and by
	// <namespace>.<name>.
	hc := redfishClient(t)
	if code, v := redfishGet(t, hc, url, "/redfish/v1/Systems"); code != http.StatusOK || v["Members@odata.count"] != float64(1) {
		t.Fatalf("Systems: %d %v, want the one selected VM", code, v)
	}
	if code, _ := redfishGet(t, hc, url, "/redfish/v1/Systems/"+kubevirt.FirmwareUUID(other)); code != http.StatusNotFound {
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
	// KubeVirt makes the instance after the start subresource answered;
	// the fixture holds it back here, so the VM's spec must keep the
	// override until the instance exists (the Once is spent after that).
	f.Hold(vm.Name)
	sushy(t, url, user, pass, id, "reset", "On")
	if !testenv.WaitFor(30*time.Second, func() bool {
		got := getVM(t, kv, f.Namespace, vm.Name)
		rs, _ := got.RunStrategy()
		return rs == kubevirtv1.RunStrategyAlways && got.Status.PrintableStatus == kubevirtv1.VirtualMachineStatusStarting
	}) {
		t.Fatal("the start subresource did not set runStrategy Always")
	}
	if d := getVM(t, kv, f.Namespace, vm.Name).Spec.Template.Spec.Domain.Devices.Disks; d[1].BootOrder == nil || *d[1].BootOrder != 1 {
		t.Fatalf("the Once override left the VM's spec before its instance existed: disks %+v", d)
	}
	f.Release(vm.Name)
	cd := waitMarker(testenv.Marker, 0)
	if st := show(); st.Enabled != "Disabled" {
		t.Errorf("the Once override should be spent by the boot: %+v", st)
	}
	// The marker ISO powers the guest off; runStrategy Always (set by the
	// start subresource) starts a new instance, which boots the disk: the
	// override held for one instance only.
	waitMarker(testenv.DiskMarker, 0)
	if c := testenv.Count(serial, testenv.Marker); c != cd {
		t.Fatalf("the CD booted again after a spent Once override")
	}
	waitRedfishPower("On")
	tool := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(ipmitool, lanplus(port, pass, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ipmitool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if out := tool("power", "status"); !strings.Contains(out, "is on") {
		t.Fatalf("ipmitool power status: %q", out)
	}

	// The serial console: ipmitool's SOL over KubeVirt's console
	// subresource; what is typed reaches grub's prompt and its answer
	// comes back.
	solProbe(t, ipmitool, port, pass)

	// ForceRestart: the restart subresource; KubeVirt has no warm reset,
	// so a new instance boots the disk again.
	instance := getVMI(t, kv, f.Namespace, vm.Name).UID
	disk := testenv.Count(serial, testenv.DiskMarker)
	sushy(t, url, user, pass, id, "reset", "ForceRestart")
	waitMarker(testenv.DiskMarker, disk)
	if uid := getVMI(t, kv, f.Namespace, vm.Name).UID; uid == instance {
		t.Errorf("ForceRestart kept instance %s", uid)
	}
	waitRedfishPower("On")

	// ForceOff: the stop subresource with a zero grace period.
	sushy(t, url, user, pass, id, "reset", "ForceOff")
	waitRedfishPower("Off")
	if out := tool("power", "status"); !strings.Contains(out, "is off") {
		t.Fatalf("ipmitool power status: %q", out)
	}
	got := getVM(t, kv, f.Namespace, vm.Name)
	if rs, _ := got.RunStrategy(); rs != kubevirtv1.RunStrategyHalted {
		t.Errorf("runStrategy %s after ForceOff, want Halted", rs)
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

	// ipmitool powers it on again: the disk boots (no override left).
	disk = testenv.Count(serial, testenv.DiskMarker)
	tool("chassis", "power", "on")
	waitMarker(testenv.DiskMarker, disk)
	waitRedfishPower("On")
}

// TestE2EKubeVirtAPIServerRestart: kube-apiserver crashes (SIGKILL) and comes back
// while four clients read the system over Redfish. Every read is answered
// (200, from the informers' last state); the system reads
// UnavailableOffline during the outage and changes answer 503 with
// Retry-After; once the API server is back the service is whole (a boot
// override PATCH goes through and lands in the VM's annotation).
func TestE2EKubeVirtAPIServerRestart(t *testing.T) {
	f := kubevirttest.Start(t, "lab", "e2e-kvr-")
	vm := kubevirtVM(t, f.Namespace, "node-0", map[string]string{"bmlab.io/bmc": "yes"})
	kv, err := kubevirt.NewRESTClient(f.API.RestConfig(), kubevirtv1.SchemeGroupVersion)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Post().Namespace(f.Namespace).Resource("virtualmachines").Body(vm).Do(context.Background()).Error(); err != nil {
		t.Fatal(err)
	}
	id := kubevirt.FirmwareUUID(vm)
	url := daemon(t, "", func(c *Config) {
		c.Backend, c.Kubeconfig = "kubevirt", f.Kubeconfig
		c.KubeNamespaces, c.KubeSelector = []string{f.Namespace}, "bmlab.io/bmc=yes"
	})
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
	// The readers stop when the test ends however it ends (a failure
	// below would otherwise leave them looping for the package's run).
	stop := make(chan struct{})
	var stopOnce sync.Once
	var wg sync.WaitGroup
	halt := func() { stopOnce.Do(func() { close(stop) }); wg.Wait() }
	defer halt()
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
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
			}
		}()
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
	halt()
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
	f := kubevirttest.Start(t, "lab", "e2e-kvu-")
	vm := kubevirtVM(t, f.Namespace, "node-0", map[string]string{"bmlab.io/bmc": "yes"})
	kv, err := kubevirt.NewRESTClient(f.API.RestConfig(), kubevirtv1.SchemeGroupVersion)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Post().Namespace(f.Namespace).Resource("virtualmachines").Body(vm).Do(context.Background()).Error(); err != nil {
		t.Fatal(err)
	}
	id := kubevirt.FirmwareUUID(vm)
	url := daemon(t, "", func(c *Config) {
		c.Backend, c.Kubeconfig = "kubevirt", f.Kubeconfig
		c.KubeNamespaces, c.KubeSelector = []string{f.Namespace}, "bmlab.io/bmc=yes"
	})
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
	var x []byte
	if !testenv.WaitFor(30*time.Second, func() bool {
		x, err = exec.Command("virsh", "-c", "qemu:///system", "dumpxml", f.DomainName(vm.Name)).CombinedOutput()
		return err == nil
	}) {
		t.Fatalf("no domain for the instance: %v %s", err, x)
	}
	if !strings.Contains(string(x), "<loader") {
		t.Errorf("the instance's domain has no UEFI loader:\n%s", x)
	}
	if st := sushy(t, url, user, pass, id, "show"); st.Enabled != "Disabled" || st.Mode != "UEFI" {
		t.Errorf("after the boot: %+v, want the Once spent and mode UEFI kept", st)
	}
}
