// Package kubevirttest runs KubeVirt for the KubeVirt backend's tests: a
// real kube-apiserver and etcd (kubetest) with KubeVirt's and CDI's
// CustomResourceDefinitions, KubeVirt's own virt-api and virt-controller
// (v1.8.0, built from kubevirt.io/kubevirt by hack/build-kube.sh) registered
// as virt-operator registers them, and a fixture for what needs a node and
// for CDI. Only _test.go files import it.
//
// KubeVirt's code (controlplane.go): the subresource API (start, stop,
// restart, softreboot, reset, console) behind kube-apiserver's aggregation
// layer, KubeVirt's admission webhooks on every VirtualMachine and
// instance, and virt-controller's VM, VMI, node and hot-plug controllers
// (instances made from VMs, run strategies, state change requests,
// virt-launcher pods, attachment pods for hot-plugged volumes).
//
// The fixture: virt-operator's part (controlplane.go: the CRDs and control
// plane objects its code makes, the KubeVirt CR and the status the
// operator writes, the certificates); the scheduler's and the kubelet's
// part of the virt-launcher and attachment pods, the Node with
// virt-handler's labels and heartbeat, and virt-handler's part of an
// instance (node.go: its libvirt domain, defined with internal/labvirt;
// its status; virt-handler's REST server, which virt-api calls for the
// console, softreboot and reset; the hot-plugged CD in the running
// domain: the console and the CD go through vbmcd's own libvirt backend,
// internal/virt); CDI's datavolume controller and importer, the PVC's
// binding and the garbage collector's deletion of a DataVolume's PVC
// (cdi.go). docs/kubevirt.md's table says what each does and what it does
// not.
package kubevirttest

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/bmlab/bmlab/internal/kubevirt"
	"github.com/bmlab/bmlab/internal/kubevirt/kubetest"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virttest"
)

// Fixture is a test cluster: kube-apiserver, KubeVirt's control plane,
// the fixture's node and CDI.
type Fixture struct {
	API *kubetest.Server
	// Namespace holds the test's VirtualMachines.
	Namespace string
	// Kubeconfig reaches kube-apiserver as the admin.
	Kubeconfig string

	t      testing.TB
	lab    *virttest.Lab
	cp     *controlPlane
	node   *node
	kv     *rest.RESTClient // kubevirt.io/v1, admin
	cdi    *rest.RESTClient // cdi.kubevirt.io/v1beta1, admin
	prefix string
	serial string // directory of the serial logs and imported volumes
	dvs    cache.SharedIndexInformer

	mu          sync.Mutex
	imported    map[string]string    // DataVolume name → the file holding its data
	retryAt     map[string]time.Time // DataVolume name → when its failed importer runs again
	failImports string
	holdImports bool
}

// Option changes how Start sets the cluster up.
type Option func(*options)

type options struct{ gates []string }

// WithFeatureGates turns KubeVirt feature gates on in the KubeVirt CR
// (DeclarativeHotplugVolumes, say), besides HostDisk, which the test VMs'
// disks need.
func WithFeatureGates(gates ...string) Option {
	return func(o *options) { o.gates = append(o.gates, gates...) }
}

// Start starts kube-apiserver and etcd, installs KubeVirt (and starts
// virt-api and virt-controller) and CDI's CRDs, makes namespace ns and
// starts the fixture's node and CDI. Domains are named prefix+VM name.
func Start(t testing.TB, ns, prefix string, opts ...Option) *Fixture {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	lab := virttest.New(t, prefix)
	api := kubetest.Start(t)
	cp := installKubeVirt(t, api, o.gates)
	api.EnsureNamespace(t, ns)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	kv, err := kubevirt.NewRESTClient(api.RestConfig(), kubevirtv1.SchemeGroupVersion)
	if err != nil {
		t.Fatal(err)
	}
	cdi, err := kubevirt.NewRESTClient(api.RestConfig(), cdiv1.SchemeGroupVersion)
	if err != nil {
		t.Fatal(err)
	}
	f := &Fixture{API: api, Namespace: ns, Kubeconfig: api.Kubeconfig, t: t, lab: lab, cp: cp, kv: kv, cdi: cdi, prefix: prefix,
		serial: testenv.QemuDir(t), imported: map[string]string{}, retryAt: map[string]time.Time{}}
	f.startCDI(ctx)
	f.node = startNode(ctx, t, f)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the cluster when the test failed:\n%s", f.state())
		}
	})
	return f
}

// state describes the test namespace's VMs, instances, pods and
// DataVolumes, for a failing test's log.
func (f *Fixture) state() string {
	var b strings.Builder
	ctx := context.Background()
	vms := &kubevirtv1.VirtualMachineList{}
	if err := f.kv.Get().Namespace(f.Namespace).Resource("virtualmachines").Do(ctx).Into(vms); err == nil {
		for _, vm := range vms.Items {
			rs, _ := vm.RunStrategy()
			fmt.Fprintf(&b, "VM %s: runStrategy %s, printableStatus %s, stateChangeRequests %v, conditions %v\n",
				vm.Name, rs, vm.Status.PrintableStatus, vm.Status.StateChangeRequests, vm.Status.Conditions)
		}
	}
	vmis := &kubevirtv1.VirtualMachineInstanceList{}
	if err := f.kv.Get().Namespace(f.Namespace).Resource("virtualmachineinstances").Do(ctx).Into(vmis); err == nil {
		for _, vmi := range vmis.Items {
			var vols []string
			for _, v := range vmi.Spec.Volumes {
				vols = append(vols, v.Name)
			}
			fmt.Fprintf(&b, "VMI %s (%s): phase %s, node %q, deleting %v, conditions %v, spec volumes %v, volume status %v\n",
				vmi.Name, vmi.UID, vmi.Status.Phase, vmi.Status.NodeName, vmi.DeletionTimestamp != nil, vmi.Status.Conditions, vols, vmi.Status.VolumeStatus)
		}
	}
	if pods, err := f.API.Clientset(f.t).CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range pods.Items {
			var vols, ready []string
			for _, v := range p.Spec.Volumes {
				vols = append(vols, v.Name)
			}
			for _, c := range p.Status.ContainerStatuses {
				ready = append(ready, fmt.Sprintf("%s:%v", c.Name, c.Ready))
			}
			fmt.Fprintf(&b, "pod %s: phase %s, node %q, deleting %v, labels %v, volumes %v, containers ready %v\n",
				p.Name, p.Status.Phase, p.Spec.NodeName, p.DeletionTimestamp != nil, p.Labels, vols, ready)
		}
	}
	if evs, err := f.API.Clientset(f.t).CoreV1().Events(f.Namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for _, e := range evs.Items {
			if e.Type != corev1.EventTypeNormal || strings.Contains(e.Reason, "Fail") {
				fmt.Fprintf(&b, "event %s %s/%s: %s %s (x%d)\n", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message, e.Count)
			}
		}
	}
	dvs := &cdiv1.DataVolumeList{}
	if err := f.cdi.Get().Namespace(f.Namespace).Resource("datavolumes").Do(ctx).Into(dvs); err == nil {
		for _, dv := range dvs.Items {
			fmt.Fprintf(&b, "DataVolume %s: phase %s, progress %s, restarts %d\n", dv.Name, dv.Status.Phase, dv.Status.Progress, dv.Status.RestartCount)
		}
	}
	return b.String()
}

// SerialLog is the file that receives the serial console of every
// instance of VM name.
func (f *Fixture) SerialLog(name string) string { return filepath.Join(f.serial, name+".log") }

// DomainName is the libvirt domain that runs VM name's instance.
func (f *Fixture) DomainName(name string) string { return f.prefix + name }

// KubeVirtLog is what virt-api or virt-controller printed so far (its
// last lines).
func (f *Fixture) KubeVirtLog(component string) string { return tail(f.cp.logs[component], 40) }

func (f *Fixture) wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// WaitPower waits until the backend serves machine id with power want.
func WaitPower(t testing.TB, be machine.Backend, id string, want machine.PowerState, timeout time.Duration) *machine.Machine {
	t.Helper()
	var m *machine.Machine
	if !testenv.WaitFor(timeout, func() bool {
		var err error
		m, err = be.Get(id)
		return err == nil && m.Power == want
	}) {
		got := machine.PowerState("absent")
		if m != nil {
			got = m.Power
		}
		t.Fatalf("%s: power %s, want %s after %s", id, got, want, timeout)
	}
	return m
}
