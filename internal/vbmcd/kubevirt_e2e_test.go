package vbmcd

import (
	"context"
	"os/exec"
	"strings"
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

	// Only the selected VM is served, by its firmware UUID.
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
	disk := testenv.Count(serial, testenv.DiskMarker)
	tool("chassis", "power", "on")
	waitMarker(testenv.DiskMarker, disk)
	waitRedfishPower("On")
}
