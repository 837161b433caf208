// Package kubevirttest plays KubeVirt's controllers and virt-api for the
// KubeVirt backend's tests, over a real kube-apiserver (kubetest) that holds
// KubeVirt's real CustomResourceDefinitions. Only _test.go files import it.
//
// What it plays, and how (docs/kubevirt.md has the whole mapping):
//   - virt-controller: a VirtualMachine whose runStrategy is Always gets a
//     VirtualMachineInstance made from its template; Halted removes it.
//     Status is written as KubeVirt documents it (VMI phase, VM
//     printableStatus, ready, created, the Ready condition), and a VM
//     without a firmware UUID gets the one KubeVirt derives from its name.
//   - virt-handler and virt-launcher: each instance is a real libvirt
//     domain (type qemu) made from the instance's spec: hostDisk volumes
//     as its disks and CD, bootOrder as its boot order, EFI or BIOS. EFI
//     with secureBoot (KubeVirt's default) runs OVMF's secure-boot build
//     with SMM from variables with Microsoft's keys enrolled, as
//     virt-launcher does; without features.smm the instance does not start
//     (KubeVirt's webhook refuses such a VM). The guest really boots; a
//     guest that powers off ends the instance (phase Succeeded), and
//     runStrategy Always then starts a new one.
//   - CDI: a DataVolume with an http source is imported into a file, which
//     an instance whose volume names the DataVolume gets as its disk or CD
//     (cdi.go).
//   - virt-api's subresources (start, stop, restart, softreboot, console):
//     served by a front proxy that vbmcd's kubeconfig points at. The proxy
//     forwards everything else to kube-apiserver unchanged; in a real
//     cluster, kube-apiserver's aggregation layer does the same for
//     subresources.kubevirt.io (an APIService naming virt-api). The real
//     aggregator is not used here because it only proxies to a Service's
//     endpoints, which may not be loopback addresses.
package kubevirttest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/bmlab/bmlab/internal/kubevirt"
	"github.com/bmlab/bmlab/internal/kubevirt/kubetest"
	"github.com/bmlab/bmlab/internal/labvirt"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virttest"
)

// Fixture is a test cluster: kube-apiserver with KubeVirt's CRDs, the
// controllers played over libvirt, and the subresource API.
type Fixture struct {
	API *kubetest.Server
	// Namespace holds the test's VirtualMachines.
	Namespace string
	// Kubeconfig reaches the front proxy (kube-apiserver plus the
	// subresource API), as vbmcd should use it.
	Kubeconfig string
	// Proxy is the front proxy's https address.
	Proxy string

	t      testing.TB
	lab    *virttest.Lab
	kv     *rest.RESTClient
	prefix string
	serial string // directory of the serial logs

	vms, vmis cache.SharedIndexInformer
	queue     chan string

	cdi *rest.RESTClient // cdi.kubevirt.io/v1beta1
	dvs cache.SharedIndexInformer

	mu       sync.Mutex
	doms     map[string]*domain // by VM name; only the worker changes it
	held     map[string]bool    // VMs whose new instances wait for Release
	imported map[string]string  // DataVolume name → the file holding its data
	// failImports, when set, fails every import with this message.
	failImports string
}

// Hold makes the fixture wait before it makes VM name's next instance,
// as a busy virt-controller would, until Release.
func (f *Fixture) Hold(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held[name] = true
}

// Release lets the fixture make VM name's instance.
func (f *Fixture) Release(name string) {
	f.mu.Lock()
	delete(f.held, name)
	f.mu.Unlock()
	f.queue <- name
}

type domain struct {
	uid      types.UID // of the instance it runs
	name     string
	stopping bool // an ACPI shutdown was asked for
}

// Start starts kube-apiserver and etcd, installs KubeVirt's CRDs, makes
// namespace ns and starts the fixture. Domains are named prefix+VM name.
func Start(t testing.TB, ns, prefix string) *Fixture {
	t.Helper()
	lab := virttest.New(t, prefix)
	api := kubetest.Start(t)
	InstallCRDs(t, api)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cs, err := kubernetes.NewForConfig(api.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kv, err := kubevirt.NewRESTClient(api.RestConfig(), kubevirtv1.SchemeGroupVersion)
	if err != nil {
		t.Fatal(err)
	}
	cdi, err := kubevirt.NewRESTClient(api.RestConfig(), cdiv1.SchemeGroupVersion)
	if err != nil {
		t.Fatal(err)
	}
	f := &Fixture{API: api, Namespace: ns, t: t, lab: lab, kv: kv, cdi: cdi, prefix: prefix,
		serial: testenv.QemuDir(t), queue: make(chan string, 1024), doms: map[string]*domain{}, held: map[string]bool{},
		imported: map[string]string{}}
	f.startProxy(t)
	lw := func(res string) *cache.ListWatch {
		return cache.NewFilteredListWatchFromClient(kv, res, ns, func(*metav1.ListOptions) {})
	}
	f.vms = cache.NewSharedIndexInformer(lw("virtualmachines"), &kubevirtv1.VirtualMachine{}, 0, nil)
	f.vmis = cache.NewSharedIndexInformer(lw("virtualmachineinstances"), &kubevirtv1.VirtualMachineInstance{}, 0, nil)
	for _, inf := range []cache.SharedIndexInformer{f.vms, f.vmis} {
		inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { f.kick(o) },
			UpdateFunc: func(_, o any) { f.kick(o) },
			DeleteFunc: func(o any) { f.kick(o) },
		})
		go inf.RunWithContext(ctx)
	}
	if !cache.WaitForCacheSync(ctx.Done(), f.vms.HasSynced, f.vmis.HasSynced) {
		t.Fatal("fixture informers did not sync")
	}
	// Domains that stop on their own (the guest powered off) end their
	// instance.
	events, stop := lab.Backend.Subscribe()
	go func() {
		defer stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-events:
				if ev.Machine != nil && strings.HasPrefix(ev.Machine.Name, prefix) {
					f.queue <- strings.TrimPrefix(ev.Machine.Name, prefix)
				}
			}
		}
	}()
	f.startCDI(ctx)
	go f.work(ctx)
	t.Cleanup(func() {
		cancel()
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, d := range f.doms {
			_ = labvirt.Wrap(lab.Client).DeleteDomain(context.Background(), d.name)
		}
	})
	return f
}

func (f *Fixture) kick(o any) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	if m, ok := o.(metav1.Object); ok {
		f.queue <- m.GetName()
	}
}

// work reconciles one VM at a time; a failed reconcile is tried again.
func (f *Fixture) work(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case name := <-f.queue:
			if err := f.reconcile(ctx, name); err != nil && ctx.Err() == nil {
				if !apierrors.IsConflict(err) {
					f.t.Logf("fixture: reconcile %s: %v", name, err)
				}
				time.AfterFunc(100*time.Millisecond, func() { f.queue <- name }) // retry back-off
			}
		}
	}
}

func (f *Fixture) get(name string) (*kubevirtv1.VirtualMachine, *kubevirtv1.VirtualMachineInstance) {
	key := f.Namespace + "/" + name
	var vm *kubevirtv1.VirtualMachine
	var vmi *kubevirtv1.VirtualMachineInstance
	if o, ok, _ := f.vms.GetStore().GetByKey(key); ok {
		vm = o.(*kubevirtv1.VirtualMachine)
	}
	if o, ok, _ := f.vmis.GetStore().GetByKey(key); ok {
		vmi = o.(*kubevirtv1.VirtualMachineInstance)
	}
	return vm, vmi
}

// SerialLog is the file that receives the serial console of every
// instance of VM name.
func (f *Fixture) SerialLog(name string) string { return filepath.Join(f.serial, name+".log") }

// DomainName is the libvirt domain that runs VM name's instance.
func (f *Fixture) DomainName(name string) string { return f.prefix + name }

func (f *Fixture) reconcile(ctx context.Context, name string) error {
	vm, vmi := f.get(name)
	f.mu.Lock()
	d, held := f.doms[name], f.held[name]
	f.mu.Unlock()
	if d != nil && (vmi == nil || vmi.UID != d.uid) {
		if err := f.dropDomain(ctx, name, d); err != nil {
			return err
		}
		d = nil
	}
	if vm == nil {
		if vmi != nil {
			return f.deleteVMI(ctx, vmi)
		}
		return nil
	}
	if vm.Spec.Template != nil && (vm.Spec.Template.Spec.Domain.Firmware == nil || vm.Spec.Template.Spec.Domain.Firmware.UUID == "") {
		// virt-controller's firmware controller: persist the derived UUID.
		patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"domain":{"firmware":{"uuid":%q}}}}}}`, kubevirt.FirmwareUUID(vm))
		return f.kv.Patch(types.MergePatchType).Namespace(vm.Namespace).Resource("virtualmachines").Name(vm.Name).Body([]byte(patch)).Do(ctx).Error()
	}
	rs, _ := vm.RunStrategy()
	want := rs == kubevirtv1.RunStrategyAlways
	switch {
	case vmi != nil && vmi.IsFinal():
		// The instance ended (the guest powered off, or it was stopped):
		// it goes, and with Always a new one comes.
		return f.deleteVMI(ctx, vmi)
	case vmi != nil && vmi.DeletionTimestamp != nil:
		return nil
	case vmi != nil && !want:
		if d == nil {
			return f.deleteVMI(ctx, vmi)
		}
		if g := vmi.Spec.TerminationGracePeriodSeconds; g != nil && *g == 0 {
			if err := f.dropDomain(ctx, name, d); err != nil {
				return err
			}
			return f.deleteVMI(ctx, vmi)
		}
		if !d.stopping {
			if err := f.shutdown(d.name); err != nil {
				return err
			}
			d.stopping = true
		}
		if f.domainOff(d) {
			return f.finish(ctx, vmi, kubevirtv1.Succeeded)
		}
		return f.setVMStatus(ctx, vm, kubevirtv1.VirtualMachineStatusStopping, true)
	case vmi == nil && want && held:
		return f.setVMStatus(ctx, vm, kubevirtv1.VirtualMachineStatusStarting, false)
	case vmi == nil && want:
		if err := f.createVMI(ctx, vm); err != nil {
			return err
		}
		return f.setVMStatus(ctx, vm, kubevirtv1.VirtualMachineStatusStarting, true)
	case vmi == nil:
		return f.setVMStatus(ctx, vm, kubevirtv1.VirtualMachineStatusStopped, false)
	}
	// An instance that should run.
	if d == nil {
		if vmi.Status.Phase != "" && vmi.Status.Phase != kubevirtv1.Pending {
			// It ran and its domain is gone: it failed.
			return f.finish(ctx, vmi, kubevirtv1.Failed)
		}
		if _, err := f.runDomain(ctx, vmi); err != nil {
			return err
		}
		if err := f.running(ctx, vmi); err != nil {
			return err
		}
		return f.setVMStatus(ctx, vm, kubevirtv1.VirtualMachineStatusRunning, true)
	}
	if f.domainOff(d) {
		return f.finish(ctx, vmi, kubevirtv1.Succeeded)
	}
	return f.setVMStatus(ctx, vm, kubevirtv1.VirtualMachineStatusRunning, true)
}

func (f *Fixture) domainOff(d *domain) bool {
	st, err := labvirt.Wrap(f.lab.Client).DomainPower(context.Background(), d.name)
	return err == nil && (st == "Off" || st == "absent")
}

func (f *Fixture) shutdown(name string) error {
	dom, err := f.lab.Client.DomainLookupByName(name)
	if err != nil {
		return err
	}
	return f.lab.Client.DomainShutdown(dom)
}

func (f *Fixture) dropDomain(ctx context.Context, name string, d *domain) error {
	if err := labvirt.Wrap(f.lab.Client).DeleteDomain(ctx, d.name); err != nil {
		return err
	}
	f.mu.Lock()
	delete(f.doms, name)
	f.mu.Unlock()
	return nil
}

func (f *Fixture) deleteVMI(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) error {
	err := f.kv.Delete().Namespace(vmi.Namespace).Resource("virtualmachineinstances").Name(vmi.Name).
		Body(&metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &vmi.UID}}).Do(ctx).Error()
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// createVMI makes the VM's instance from its template, as virt-controller.
func (f *Fixture) createVMI(ctx context.Context, vm *kubevirtv1.VirtualMachine) error {
	t := true
	vmi := &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{
			Name: vm.Name, Namespace: vm.Namespace,
			Labels:      vm.Spec.Template.ObjectMeta.Labels,
			Annotations: vm.Spec.Template.ObjectMeta.Annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: kubevirtv1.SchemeGroupVersion.String(), Kind: "VirtualMachine",
				Name: vm.Name, UID: vm.UID, Controller: &t, BlockOwnerDeletion: &t,
			}},
		},
		Spec: *vm.Spec.Template.Spec.DeepCopy(),
	}
	vmi.TypeMeta = metav1.TypeMeta{APIVersion: kubevirtv1.SchemeGroupVersion.String(), Kind: "VirtualMachineInstance"}
	err := f.kv.Post().Namespace(vm.Namespace).Resource("virtualmachineinstances").Body(vmi).Do(ctx).Error()
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// runDomain defines and starts the libvirt domain of an instance.
func (f *Fixture) runDomain(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) (*domain, error) {
	spec := labvirt.DomainSpec{
		Name: f.prefix + vmi.Name, MemoryMiB: 128, VCPUs: 1,
		SerialLog: f.SerialLog(vmi.Name),
	}
	if fw := vmi.Spec.Domain.Firmware; fw != nil {
		spec.UUID = string(fw.UUID)
		if fw.Bootloader != nil && fw.Bootloader.EFI != nil {
			spec.UEFI, spec.MemoryMiB = true, 256
			// KubeVirt's default is secure boot on: OVMF's secboot
			// build with SMM, from variables with Microsoft's keys
			// enrolled. Its VM webhook refuses secure boot without SMM.
			if sb := fw.Bootloader.EFI.SecureBoot; sb == nil || *sb {
				if ft := vmi.Spec.Domain.Features; ft == nil || ft.SMM == nil || (ft.SMM.Enabled != nil && !*ft.SMM.Enabled) {
					return nil, fmt.Errorf("instance %s: SMM should be enabled for EFI secure boot (spec.domain.features.smm)", vmi.Name)
				}
				spec.SecureBoot = true
			}
		}
	}
	paths := map[string]string{}
	for _, v := range vmi.Spec.Volumes {
		switch {
		case v.HostDisk != nil:
			paths[v.Name] = v.HostDisk.Path
		case v.DataVolume != nil:
			// virt-launcher mounts the DataVolume's PVC; KubeVirt holds
			// the instance back until the DataVolume is ready.
			p := f.DataVolumePath(v.DataVolume.Name)
			if p == "" {
				return nil, fmt.Errorf("DataVolume %s of %s is not imported (yet)", v.DataVolume.Name, vmi.Name)
			}
			paths[v.Name] = p
		}
	}
	cdFirst := false
	var best uint
	for _, d := range vmi.Spec.Domain.Devices.Disks {
		p := paths[d.Name]
		switch {
		case d.CDRom != nil:
			spec.CDROM = p
		case d.Disk != nil && p != "":
			spec.Disks = append(spec.Disks, labvirt.DiskSpec{Path: p, Format: "raw"})
		}
		if d.BootOrder != nil && (best == 0 || *d.BootOrder < best) {
			best, cdFirst = *d.BootOrder, d.CDRom != nil
		}
	}
	spec.BootOrder = []string{"hd", "cdrom"}
	if cdFirst {
		spec.BootOrder = []string{"cdrom", "hd"}
	}
	if _, err := labvirt.Wrap(f.lab.Client).DefineDomain(ctx, spec); err != nil {
		return nil, err
	}
	d := &domain{uid: vmi.UID, name: spec.Name}
	f.mu.Lock()
	f.doms[vmi.Name] = d
	f.mu.Unlock()
	if _, err := labvirt.Wrap(f.lab.Client).StartDomain(ctx, spec.Name); err != nil {
		return nil, err
	}
	return d, nil
}

// putStatus writes an object's status: through the status subresource for
// a VirtualMachine; KubeVirt's VirtualMachineInstance CRD has none, so an
// instance is updated whole (as virt-handler does).
func (f *Fixture) putStatus(ctx context.Context, resource, name string, obj any) error {
	req := f.kv.Put().Namespace(f.Namespace).Resource(resource).Name(name)
	if resource == "virtualmachines" {
		req = req.SubResource("status")
	}
	return f.wrap("status of "+resource+" "+name, req.Body(obj).Do(ctx).Error())
}

func (f *Fixture) wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// running writes a Running instance's status, as virt-handler.
func (f *Fixture) running(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) error {
	c := vmi.DeepCopy()
	now := metav1.Now()
	c.Status.Phase = kubevirtv1.Running
	c.Status.NodeName = "fixture"
	c.Status.PhaseTransitionTimestamps = append(c.Status.PhaseTransitionTimestamps,
		kubevirtv1.VirtualMachineInstancePhaseTransitionTimestamp{Phase: kubevirtv1.Running, PhaseTransitionTimestamp: now})
	c.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{
		Type: kubevirtv1.VirtualMachineInstanceReady, Status: corev1.ConditionTrue, LastTransitionTime: now,
	}}
	return f.putStatus(ctx, "virtualmachineinstances", c.Name, c)
}

// finish ends an instance with a final phase.
func (f *Fixture) finish(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, phase kubevirtv1.VirtualMachineInstancePhase) error {
	c := vmi.DeepCopy()
	c.Status.Phase = phase
	c.Status.Conditions = []kubevirtv1.VirtualMachineInstanceCondition{{
		Type: kubevirtv1.VirtualMachineInstanceReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now(),
	}}
	return f.putStatus(ctx, "virtualmachineinstances", c.Name, c)
}

// setVMStatus writes a VM's printableStatus, ready and created and its
// Ready condition, when they change.
func (f *Fixture) setVMStatus(ctx context.Context, vm *kubevirtv1.VirtualMachine, ps kubevirtv1.VirtualMachinePrintableStatus, created bool) error {
	ready := ps == kubevirtv1.VirtualMachineStatusRunning
	if vm.Status.PrintableStatus == ps && vm.Status.Ready == ready && vm.Status.Created == created {
		return nil
	}
	c := vm.DeepCopy()
	c.Status.PrintableStatus, c.Status.Ready, c.Status.Created = ps, ready, created
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	c.Status.Conditions = []kubevirtv1.VirtualMachineCondition{{
		Type: kubevirtv1.VirtualMachineReady, Status: st, LastTransitionTime: metav1.Now(),
	}}
	return f.putStatus(ctx, "virtualmachines", c.Name, c)
}

// startProxy serves the subresource API and forwards the rest to
// kube-apiserver.
func (f *Fixture) startProxy(t testing.TB) {
	up, _ := url.Parse(f.API.URL)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(f.API.CA)
	rp := httputil.NewSingleHostReverseProxy(up)
	rp.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	rp.FlushInterval = -1 // watches stream
	// kube-apiserver down is part of some tests: no log line per refused
	// request.
	rp.ErrorLog = log.New(io.Discard, "", 0)
	mux := http.NewServeMux()
	mux.Handle("/", rp)
	mux.HandleFunc("PUT /apis/subresources.kubevirt.io/v1/namespaces/{ns}/{res}/{name}/{action}", f.serveSubresource)
	mux.HandleFunc("GET /apis/subresources.kubevirt.io/v1/namespaces/{ns}/virtualmachineinstances/{name}/console", f.serveConsole)
	srv := httptest.NewUnstartedServer(mux)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{f.API.ServingCert(t)}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	f.Proxy = srv.URL
	f.Kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := f.API.WriteKubeconfig(f.Kubeconfig, f.Proxy, f.API.CA); err != nil {
		t.Fatal(err)
	}
}

// ProxyConfig is a client configuration that reaches the front proxy.
func (f *Fixture) ProxyConfig() *rest.Config {
	c := f.API.RestConfig()
	c.Host = f.Proxy
	return c
}

// serveSubresource plays virt-api's lifecycle subresources
// (pkg/virt-api/rest/lifecycle.go), writing to the real API server.
func (f *Fixture) serveSubresource(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+f.API.Token {
		writeStatus(w, apierrors.NewUnauthorized("token"))
		return
	}
	ns, res, name, action := r.PathValue("ns"), r.PathValue("res"), r.PathValue("name"), r.PathValue("action")
	var body struct {
		GracePeriod        *int64 `json:"gracePeriod"`
		GracePeriodSeconds *int64 `json:"gracePeriodSeconds"`
	}
	_ = json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&body)
	ctx := r.Context()
	vm := &kubevirtv1.VirtualMachine{}
	if err := f.kv.Get().Namespace(ns).Resource("virtualmachines").Name(name).Do(ctx).Into(vm); err != nil {
		writeStatus(w, err)
		return
	}
	_, vmi := f.get(name)
	gr := kubevirtv1.Resource(strings.TrimSuffix(res, "s"))
	conflict := func(msg string) { writeStatus(w, apierrors.NewConflict(gr, name, fmt.Errorf("%s", msg))) }
	rs, _ := vm.RunStrategy()
	running := vmi != nil && !vmi.IsFinal()
	var err error
	switch res + "/" + action {
	case "virtualmachines/start":
		if rs == kubevirtv1.RunStrategyAlways && running {
			conflict("VM is already running")
			return
		}
		err = f.setRunStrategy(ctx, vm, kubevirtv1.RunStrategyAlways)
	case "virtualmachines/stop":
		if rs == kubevirtv1.RunStrategyHalted && (!running || body.GracePeriod == nil) {
			conflict("VM is not running")
			return
		}
		if running && body.GracePeriod != nil {
			err = f.setGrace(ctx, vmi, *body.GracePeriod)
		}
		if err == nil {
			err = f.setRunStrategy(ctx, vm, kubevirtv1.RunStrategyHalted)
		}
	case "virtualmachines/restart":
		if !running {
			conflict("VM is not running")
			return
		}
		if body.GracePeriodSeconds != nil {
			err = f.setGrace(ctx, vmi, *body.GracePeriodSeconds)
		}
		if err == nil {
			err = f.deleteVMI(ctx, vmi)
		}
	case "virtualmachineinstances/softreboot":
		if !running || vmi.Status.Phase != kubevirtv1.Running {
			conflict("VMI is not running")
			return
		}
		f.mu.Lock()
		d := f.doms[name]
		f.mu.Unlock()
		if d == nil {
			conflict("VMI has no domain")
			return
		}
		if dom, lerr := f.lab.Client.DomainLookupByName(d.name); lerr != nil {
			err = lerr
		} else {
			err = f.lab.Client.DomainReboot(dom, 0)
		}
	default:
		writeStatus(w, apierrors.NewNotFound(gr, action))
		return
	}
	if err != nil {
		writeStatus(w, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// serveConsole plays virt-api's console subresource: a WebSocket
// (subprotocol plain.kubevirt.io, raw bytes in binary messages) onto the
// serial console of the instance's libvirt domain.
func (f *Fixture) serveConsole(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+f.API.Token {
		writeStatus(w, apierrors.NewUnauthorized("token"))
		return
	}
	name := r.PathValue("name")
	_, vmi := f.get(name)
	if vmi == nil || vmi.Status.Phase != kubevirtv1.Running || vmi.Spec.Domain.Firmware == nil {
		writeStatus(w, apierrors.NewConflict(kubevirtv1.Resource("virtualmachineinstance"), name, fmt.Errorf("VMI is not running")))
		return
	}
	con, err := f.lab.Backend.OpenConsole(r.Context(), string(vmi.Spec.Domain.Firmware.UUID))
	if err != nil {
		writeStatus(w, err)
		return
	}
	up := websocket.Upgrader{Subprotocols: []string{"plain.kubevirt.io"}}
	conn, err := up.Upgrade(w, r, nil)
	if err != nil {
		con.Close()
		return
	}
	go func() {
		defer conn.Close()
		buf := make([]byte, 4096)
		for {
			n, err := con.Read(buf)
			if n > 0 && conn.WriteMessage(websocket.BinaryMessage, buf[:n]) != nil {
				return
			}
			if err != nil {
				conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
				return
			}
		}
	}()
	defer con.Close()
	for {
		_, msg, err := conn.ReadMessage()
		if err != nil {
			return
		}
		if _, err := con.Write(msg); err != nil {
			return
		}
	}
}

func (f *Fixture) setRunStrategy(ctx context.Context, vm *kubevirtv1.VirtualMachine, rs kubevirtv1.VirtualMachineRunStrategy) error {
	patch := fmt.Sprintf(`{"spec":{"runStrategy":%q,"running":null}}`, rs)
	return f.kv.Patch(types.MergePatchType).Namespace(vm.Namespace).Resource("virtualmachines").Name(vm.Name).Body([]byte(patch)).Do(ctx).Error()
}

func (f *Fixture) setGrace(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, g int64) error {
	patch := fmt.Sprintf(`{"spec":{"terminationGracePeriodSeconds":%d}}`, g)
	return f.kv.Patch(types.MergePatchType).Namespace(vmi.Namespace).Resource("virtualmachineinstances").Name(vmi.Name).Body([]byte(patch)).Do(ctx).Error()
}

func writeStatus(w http.ResponseWriter, err error) {
	st := apierrors.APIStatus(nil)
	if s, ok := err.(apierrors.APIStatus); ok {
		st = s
	} else {
		st = apierrors.NewInternalError(err)
	}
	s := st.Status()
	s.Kind, s.APIVersion = "Status", "v1"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(s.Code))
	json.NewEncoder(w).Encode(s)
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
