package kubevirttest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/digitalocean/go-libvirt"
	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/bmlab/bmlab/internal/kubevirt"
	"github.com/bmlab/bmlab/internal/kubevirt/kubetest"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/pace"
	"github.com/bmlab/bmlab/internal/virt"
	virtdomain "github.com/bmlab/bmlab/internal/virt/domain"
	"github.com/bmlab/bmlab/internal/virttest"
)

// The fixture's node: what KubeVirt leaves to a node, which this machine
// cannot be (no container runtime, no kubelet, no images):
//
//   - the scheduler: a pending virt-launcher or hotplug attachment pod
//     whose node selector the node's labels satisfy is bound to it;
//   - the kubelet: a bound pod is reported Running with its containers
//     running and ready; a deleted pod's containers end (a launcher's
//     domain is shut down within the pod's grace period, destroyed after
//     it) and the pod is removed; a launcher whose instance ended is
//     reported Succeeded;
//   - virt-handler (running as its ServiceAccount, kubevirt-handler, with
//     the RBAC virt-operator gives it) and virt-launcher: an instance
//     virt-controller scheduled to the node becomes a libvirt domain made
//     from its spec and is reported Running; a guest that powers off, or
//     a deleted instance whose domain stopped, is reported Succeeded; a
//     domain that vanished under a running instance is reported Failed;
//     a hot-plugged CD (DeclarativeHotplugVolumes) is inserted into and
//     ejected from the running domain's CD-ROM and its volume status
//     reported; and virt-handler's REST server, which virt-api calls with
//     its client certificate: console (the domain's serial console as a
//     WebSocket), softreboot (ACPI reboot) and reset (a hard reset).
//
// The node object carries the labels and the heartbeat virt-handler keeps
// on it, and a virt-handler pod object on it tells virt-api where the
// handler listens (127.0.0.1 and the port virt-api was given).
type node struct {
	f    *Fixture
	name string
	cs   kubernetes.Interface // the kubelet and scheduler: admin
	kvh  *rest.RESTClient     // virt-handler: ServiceAccount kubevirt-handler
	lab  *virttest.Lab

	pods, vmis cache.SharedIndexInformer
	queue      chan string

	mu       sync.Mutex
	doms     map[string]*domain // by instance name; only the worker changes it
	holdPods bool               // see Fixture.HoldPodRemoval
}

// HoldPodRemoval makes the node slow to tear pods down: a deleted pod's
// containers end, but the pod stays until it is called with false (a
// kubelet that lags). KubeVirt keeps the stopped instance until its pod
// is gone, and with it the stop request on the VM.
func (f *Fixture) HoldPodRemoval(hold bool) {
	f.node.mu.Lock()
	f.node.holdPods = hold
	f.node.mu.Unlock()
	if !hold {
		f.node.kickAll(nil)
	}
}

// domain is the libvirt domain running an instance.
type domain struct {
	uid      types.UID // of the instance
	name     string    // libvirt's name
	uuid     string
	stopAt   time.Time // zero: not stopping; else destroy when passed
	acpiSent bool
	cd       map[string]string // CD-ROM disk name → the file in it
}

const fixtureNode = "fixture-node"

// nodeLabels are the node's labels: the kubelet's, and those virt-handler's
// node labeller sets that KubeVirt's launcher pods select on here (the
// machine types this host's qemu runs; the CPU model is host-model, which
// selects on no label).
var nodeLabels = map[string]string{
	"kubernetes.io/hostname": fixtureNode, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
	kubevirtv1.NodeSchedulable:                   "true",
	kubevirtv1.SupportedMachineTypeLabel + "q35": "true",
	kubevirtv1.SupportedMachineTypeLabel + "pc":  "true",
}

func podConditionIs(p *corev1.Pod, t corev1.PodConditionType, st corev1.ConditionStatus) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status == st
		}
	}
	return false
}

func startNode(ctx context.Context, t testing.TB, f *Fixture) *node {
	t.Helper()
	n := &node{f: f, name: fixtureNode, cs: f.API.Clientset(t), lab: f.lab, queue: make(chan string, 4096), doms: map[string]*domain{}}
	kvh, err := kubevirt.NewRESTClient(f.API.ServiceAccountConfig(t, KubeVirtNamespace, "kubevirt-handler"), kubevirtv1.SchemeGroupVersion)
	if err != nil {
		t.Fatal(err)
	}
	n.kvh = kvh
	n.register(ctx, t)
	n.serveHandler(t)

	lw := func(c cache.Getter, res string, sel string) *cache.ListWatch {
		return cache.NewFilteredListWatchFromClient(c, res, f.Namespace, func(o *metav1.ListOptions) { o.LabelSelector = sel })
	}
	n.pods = cache.NewSharedIndexInformer(lw(n.cs.CoreV1().RESTClient(), "pods", kubevirtv1.AppLabel+" in (virt-launcher,hotplug-disk)"), &corev1.Pod{}, 0, nil)
	n.vmis = cache.NewSharedIndexInformer(lw(f.kv, "virtualmachineinstances", ""), &kubevirtv1.VirtualMachineInstance{}, 0, nil)
	_, _ = n.vmis.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: n.kick, UpdateFunc: func(_, o any) { n.kick(o) }, DeleteFunc: n.kick,
	})
	_, _ = n.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: n.kickAll, UpdateFunc: func(_, o any) { n.kickAll(o) }, DeleteFunc: n.kickAll,
	})
	go n.pods.RunWithContext(ctx)
	go n.vmis.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), n.pods.HasSynced, n.vmis.HasSynced) {
		t.Fatal("the fixture node's informers did not sync")
	}
	// A guest that powers off stops its domain: its instance ends.
	events, stop := n.lab.Backend.Subscribe()
	go func() {
		defer stop()
		machine.ForEach(ctx, events, func(ev machine.Event) {
			if ev.Machine != nil && strings.HasPrefix(ev.Machine.Name, f.prefix) {
				n.enqueue(strings.TrimPrefix(ev.Machine.Name, f.prefix))
			}
		})
	}()
	go n.work(ctx)
	go n.heartbeat(ctx)
	t.Cleanup(func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		for _, d := range n.doms {
			_ = virtdomain.Delete(context.Background(), n.lab.Client, d.name)
		}
	})
	return n
}

func (n *node) enqueue(name string) {
	select {
	case n.queue <- name:
	default: // a full queue holds the name already, or will be drained
	}
}

func (n *node) kick(o any) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	if m, ok := o.(metav1.Object); ok {
		n.enqueue(m.GetName())
	}
}

// kickAll reconciles every instance after a pod changed (a handful in a
// test; a pod names its instance by UID only).
func (n *node) kickAll(any) {
	for _, k := range n.vmis.GetStore().ListKeys() {
		_, name, _ := cache.SplitMetaNamespaceKey(k)
		n.enqueue(name)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for name := range n.doms {
		n.enqueue(name)
	}
}

// register makes the Node and the virt-handler pod on it.
func (n *node) register(ctx context.Context, t testing.TB) {
	t.Helper()
	nd := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: nodeLabels,
		Annotations: map[string]string{kubevirtv1.VirtHandlerHeartbeat: heartbeatNow()}}}
	created, err := n.cs.CoreV1().Nodes().Create(ctx, nd, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status = corev1.NodeStatus{
		Capacity:    corev1.ResourceList{"cpu": resource.MustParse("64"), "memory": resource.MustParse("256Gi"), "pods": resource.MustParse("1000")},
		Allocatable: corev1.ResourceList{"cpu": resource.MustParse("64"), "memory": resource.MustParse("256Gi"), "pods": resource.MustParse("1000")},
		Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		Addresses:   []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: n.name}},
	}
	if _, err := n.cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "virt-handler-fixture", Namespace: KubeVirtNamespace, Labels: map[string]string{kubevirtv1.AppLabel: "virt-handler"}},
		Spec: corev1.PodSpec{NodeName: n.name, ServiceAccountName: "kubevirt-handler",
			Containers: []corev1.Container{{Name: "virt-handler", Image: "quay.io/kubevirt/virt-handler:v1.8.0"}}},
	}
	h, err = n.cs.CoreV1().Pods(KubeVirtNamespace).Create(ctx, h, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	runningStatus(h)
	if _, err := n.cs.CoreV1().Pods(KubeVirtNamespace).UpdateStatus(ctx, h, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func heartbeatNow() string {
	b, _ := metav1.Now().MarshalJSON()
	return strings.Trim(string(b), `"`)
}

// heartbeat refreshes the node's virt-handler heartbeat, as virt-handler
// does, so virt-controller never takes the node for dead.
func (n *node) heartbeat(ctx context.Context) {
	pace.Every(ctx, 30*time.Second, func() bool {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, kubevirtv1.VirtHandlerHeartbeat, heartbeatNow())
		_, _ = n.cs.CoreV1().Nodes().Patch(ctx, n.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return true
	})
}

// runningStatus is what the kubelet reports of a running pod.
func runningStatus(p *corev1.Pod) {
	now := metav1.Now()
	p.Status.Phase = corev1.PodRunning
	p.Status.HostIP, p.Status.PodIP = "127.0.0.1", "127.0.0.1"
	p.Status.HostIPs, p.Status.PodIPs = []corev1.HostIP{{IP: "127.0.0.1"}}, []corev1.PodIP{{IP: "127.0.0.1"}}
	p.Status.StartTime = &now
	p.Status.Conditions = nil
	for _, c := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	p.Status.InitContainerStatuses = nil
	for _, c := range p.Spec.InitContainers {
		p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: true,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now}},
		})
	}
	p.Status.ContainerStatuses = nil
	started := true
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: true, Started: &started,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
}

// endedStatus is what the kubelet reports of a pod whose containers
// exited (0: Succeeded).
func endedStatus(p *corev1.Pod) {
	now := metav1.Now()
	p.Status.Phase = corev1.PodSucceeded
	for i := range p.Status.ContainerStatuses {
		cs := &p.Status.ContainerStatuses[i]
		started := false
		cs.Ready, cs.Started = false, &started
		cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: now}}
	}
	for i := range p.Status.Conditions {
		if c := &p.Status.Conditions[i]; c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
			c.Status, c.LastTransitionTime = corev1.ConditionFalse, now
		}
	}
}

// work reconciles one instance at a time; a failed reconcile is tried
// again, and so is one whose domain is stopping (its deadline).
func (n *node) work(ctx context.Context) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			n.mu.Lock()
			for name, d := range n.doms {
				if !d.stopAt.IsZero() {
					n.enqueue(name)
				}
			}
			n.mu.Unlock()
		case name := <-n.queue:
			if err := n.reconcile(ctx, name); err != nil && ctx.Err() == nil {
				if !apierrors.IsConflict(err) {
					n.f.t.Logf("fixture node: %s: %v", name, err)
				}
				time.AfterFunc(200*time.Millisecond, func() { n.enqueue(name) }) // retry back-off
			}
		}
	}
}

func (n *node) vmi(name string) *kubevirtv1.VirtualMachineInstance {
	if o, ok, _ := n.vmis.GetStore().GetByKey(n.f.Namespace + "/" + name); ok {
		return o.(*kubevirtv1.VirtualMachineInstance)
	}
	return nil
}

// podsOf returns the launcher pods of instance uid and the attachment
// pods owned by them.
func (n *node) podsOf(uid types.UID) (launchers, attachments []*corev1.Pod) {
	all := n.pods.GetStore().List()
	for _, o := range all {
		p := o.(*corev1.Pod)
		if p.Labels[kubevirtv1.CreatedByLabel] == string(uid) {
			launchers = append(launchers, p)
		}
	}
	for _, o := range all {
		p := o.(*corev1.Pod)
		for _, ref := range p.OwnerReferences {
			if slices.ContainsFunc(launchers, func(l *corev1.Pod) bool { return l.UID == ref.UID }) {
				attachments = append(attachments, p)
			}
		}
	}
	return launchers, attachments
}

func (n *node) reconcile(ctx context.Context, name string) error {
	vmi := n.vmi(name)
	n.mu.Lock()
	d := n.doms[name]
	n.mu.Unlock()
	// A domain of an instance that is gone, or of an earlier one, goes.
	if d != nil && (vmi == nil || vmi.UID != d.uid) {
		if err := n.dropDomain(ctx, name, d); err != nil {
			return err
		}
		d = nil
	}
	if err := n.orphanPods(ctx); err != nil {
		return err
	}
	if vmi == nil {
		return nil
	}
	launchers, attachments := n.podsOf(vmi.UID)
	for _, p := range append(launchers, attachments...) {
		if err := n.kubelet(ctx, vmi, p, d); err != nil {
			return err
		}
	}
	if vmi.Status.NodeName != n.name {
		return nil
	}
	return n.handler(ctx, vmi, d)
}

// orphanPods ends the pods of instances that are gone (the kubelet's part
// of a pod whose owner went).
func (n *node) orphanPods(ctx context.Context) error {
	for _, o := range n.pods.GetStore().List() {
		p := o.(*corev1.Pod)
		if p.DeletionTimestamp != nil && p.Spec.NodeName == n.name && p.Labels[kubevirtv1.AppLabel] == "hotplug-disk" {
			if err := n.removePod(ctx, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// kubelet plays the scheduler and the kubelet for pod p of instance vmi
// (d its domain, if any).
func (n *node) kubelet(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, p *corev1.Pod, d *domain) error {
	launcher := p.Labels[kubevirtv1.AppLabel] == "virt-launcher"
	switch {
	case p.DeletionTimestamp != nil:
		// The containers get SIGTERM: virt-launcher shuts the domain down
		// within the pod's grace period; then the pod goes.
		if launcher && d != nil && !n.domainOff(d) {
			grace := int64(30)
			if p.DeletionGracePeriodSeconds != nil {
				grace = *p.DeletionGracePeriodSeconds
			}
			return n.stopDomain(d, time.Duration(grace)*time.Second)
		}
		return n.removePod(ctx, p)
	case p.Spec.NodeName == "":
		for k, v := range p.Spec.NodeSelector {
			if nodeLabels[k] != v {
				// Unschedulable: the node lacks a label the pod asks for.
				if podConditionIs(p, corev1.PodScheduled, corev1.ConditionFalse) {
					return nil
				}
				c := p.DeepCopy()
				c.Status.Conditions = append(c.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
					Reason: corev1.PodReasonUnschedulable, Message: fmt.Sprintf("0/1 nodes are available: the node lacks label %s=%s", k, v), LastTransitionTime: metav1.Now()})
				_, err := n.cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, c, metav1.UpdateOptions{})
				return err
			}
		}
		return n.cs.CoreV1().Pods(p.Namespace).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, UID: p.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: n.name},
		}, metav1.CreateOptions{})
	case p.Spec.NodeName != n.name:
		return nil
	case p.Status.Phase == corev1.PodPending || p.Status.Phase == "":
		c := p.DeepCopy()
		runningStatus(c)
		_, err := n.cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, c, metav1.UpdateOptions{})
		return err
	case launcher && p.Status.Phase == corev1.PodRunning && vmi.IsFinal() && (d == nil || n.domainOff(d)):
		// virt-launcher exits once its domain is gone.
		c := p.DeepCopy()
		endedStatus(c)
		_, err := n.cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, c, metav1.UpdateOptions{})
		return err
	}
	return nil
}

// removePod deletes a pod whose containers ended, as the kubelet does at
// the end of a graceful deletion.
func (n *node) removePod(ctx context.Context, p *corev1.Pod) error {
	n.mu.Lock()
	hold := n.holdPods
	n.mu.Unlock()
	if hold {
		return nil
	}
	zero := int64(0)
	err := n.cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &p.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// handler plays virt-handler for an instance on the node.
func (n *node) handler(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, d *domain) error {
	switch {
	case vmi.IsFinal():
		if d != nil {
			return n.dropDomain(ctx, vmi.Name, d)
		}
		return nil
	case vmi.Status.Phase == kubevirtv1.Scheduled && d == nil:
		if vmi.DeletionTimestamp != nil {
			return n.setPhase(ctx, vmi, kubevirtv1.Succeeded)
		}
		if _, err := n.runDomain(ctx, vmi); err != nil {
			return err
		}
		return n.setPhase(ctx, vmi, kubevirtv1.Running)
	case vmi.Status.Phase == kubevirtv1.Scheduled || vmi.Status.Phase == kubevirtv1.Running:
		if d == nil {
			// The domain is gone under a running instance: it failed.
			return n.setPhase(ctx, vmi, kubevirtv1.Failed)
		}
		if vmi.DeletionTimestamp != nil && !n.domainOff(d) {
			grace := int64(kubevirtv1.DefaultGracePeriodSeconds)
			if g := vmi.Spec.TerminationGracePeriodSeconds; g != nil {
				grace = *g
			}
			return n.stopDomain(d, time.Until(vmi.DeletionTimestamp.Add(time.Duration(grace)*time.Second)))
		}
		if n.domainOff(d) {
			return n.setPhase(ctx, vmi, kubevirtv1.Succeeded)
		}
		if vmi.Status.Phase == kubevirtv1.Scheduled {
			return n.setPhase(ctx, vmi, kubevirtv1.Running)
		}
		return n.hotplug(ctx, vmi, d)
	}
	return nil
}

// setPhase writes an instance's phase as virt-handler does (an update of
// the whole instance: its CRD has no status subresource), with the phase
// transition time and, for Running, the machine type and SELinux context.
func (n *node) setPhase(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, phase kubevirtv1.VirtualMachineInstancePhase) error {
	return n.updateVMI(ctx, vmi, func(c *kubevirtv1.VirtualMachineInstance) {
		if c.Status.Phase == phase {
			return
		}
		c.Status.Phase = phase
		c.Status.PhaseTransitionTimestamps = append(c.Status.PhaseTransitionTimestamps,
			kubevirtv1.VirtualMachineInstancePhaseTransitionTimestamp{Phase: phase, PhaseTransitionTimestamp: metav1.Now()})
		if phase == kubevirtv1.Running && c.Status.SelinuxContext == "" {
			// What virt-handler reports on a node without SELinux;
			// virt-controller's hot-plug attachment pods need it.
			c.Status.SelinuxContext = "none"
		}
		if phase == kubevirtv1.Running && c.Status.Machine == nil {
			mt := "q35"
			if m := c.Spec.Domain.Machine; m != nil && m.Type != "" {
				mt = m.Type
			}
			c.Status.Machine = &kubevirtv1.Machine{Type: mt}
		}
	})
}

func (n *node) updateVMI(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, change func(*kubevirtv1.VirtualMachineInstance)) error {
	c := vmi.DeepCopy()
	change(c)
	if equality.Semantic.DeepEqual(c.Status, vmi.Status) {
		return nil
	}
	return n.kvh.Put().Namespace(vmi.Namespace).Resource("virtualmachineinstances").Name(vmi.Name).Body(c).Do(ctx).Error()
}

func (n *node) domainOff(d *domain) bool {
	st, err := virtdomain.Power(context.Background(), n.lab.Client, d.name)
	return err == nil && (st == "Off" || st == "absent")
}

// stopDomain shuts a domain down: an ACPI power button press now, and a
// destroy once within has passed (at once when it has already).
func (n *node) stopDomain(d *domain, within time.Duration) error {
	at := time.Now().Add(max(within, 0))
	n.mu.Lock()
	if d.stopAt.IsZero() || at.Before(d.stopAt) {
		d.stopAt = at
	}
	at, sent := d.stopAt, d.acpiSent
	d.acpiSent = true
	n.mu.Unlock()
	dom, err := n.lab.Client.DomainLookupByName(d.name)
	if err != nil {
		return nil // gone already
	}
	if !time.Now().Before(at) {
		if err := n.lab.Client.DomainDestroy(dom); err != nil && !n.domainOff(d) {
			return err
		}
		return nil
	}
	if !sent {
		_ = n.lab.Client.DomainShutdown(dom)
	}
	return nil
}

func (n *node) dropDomain(ctx context.Context, name string, d *domain) error {
	if err := virtdomain.Delete(ctx, n.lab.Client, d.name); err != nil {
		return err
	}
	n.mu.Lock()
	delete(n.doms, name)
	n.mu.Unlock()
	return nil
}

// volumeFile is the file behind a volume on the node: a hostDisk's path,
// or the file CDI's fixture imported a DataVolume (or its PVC) into.
func (n *node) volumeFile(v kubevirtv1.Volume) (string, error) {
	claim := ""
	switch {
	case v.HostDisk != nil:
		return v.HostDisk.Path, nil
	case v.DataVolume != nil:
		claim = v.DataVolume.Name
	case v.PersistentVolumeClaim != nil:
		claim = v.PersistentVolumeClaim.ClaimName
	default:
		return "", nil
	}
	p := n.f.DataVolumePath(claim)
	if p == "" {
		return "", fmt.Errorf("volume %s: claim %s holds no imported data", v.Name, claim)
	}
	return p, nil
}

// runDomain defines and starts the libvirt domain of an instance, as
// virt-launcher would: its disks and CD-ROM from the volumes, the boot
// order from bootOrder, EFI or BIOS.
func (n *node) runDomain(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) (*domain, error) {
	spec := virtdomain.Spec{
		Name: n.f.prefix + vmi.Name, MemoryMiB: 128, VCPUs: 1,
		SerialLog: n.f.SerialLog(vmi.Name),
	}
	if fw := vmi.Spec.Domain.Firmware; fw != nil {
		spec.UUID = string(fw.UUID)
		if fw.Bootloader != nil && fw.Bootloader.EFI != nil {
			spec.UEFI, spec.MemoryMiB = true, 256
			// KubeVirt's default is secure boot on: OVMF's secboot build
			// with SMM, from variables with Microsoft's keys enrolled.
			if sb := fw.Bootloader.EFI.SecureBoot; sb == nil || *sb {
				spec.SecureBoot = true
			}
		}
	}
	paths := map[string]string{}
	for _, v := range vmi.Spec.Volumes {
		p, err := n.volumeFile(v)
		if err != nil {
			return nil, err
		}
		paths[v.Name] = p
	}
	d := &domain{uid: vmi.UID, name: spec.Name, uuid: spec.UUID, cd: map[string]string{}}
	cdFirst := false
	var best uint
	for _, disk := range vmi.Spec.Domain.Devices.Disks {
		p := paths[disk.Name]
		switch {
		case disk.CDRom != nil:
			spec.CDROM = p
			d.cd[disk.Name] = p
		case disk.Disk != nil && p != "":
			spec.Disks = append(spec.Disks, virtdomain.Disk{Path: p, Format: "raw"})
		}
		if disk.BootOrder != nil && (best == 0 || *disk.BootOrder < best) {
			best, cdFirst = *disk.BootOrder, disk.CDRom != nil
		}
	}
	spec.BootOrder = []string{"hd", "cdrom"}
	if cdFirst {
		spec.BootOrder = []string{"cdrom", "hd"}
	}
	if _, err := virtdomain.Define(ctx, n.lab.Client, spec, virt.DetectFirmware()); err != nil {
		return nil, err
	}
	n.mu.Lock()
	n.doms[vmi.Name] = d
	n.mu.Unlock()
	if _, err := virtdomain.Start(ctx, n.lab.Client, spec.Name); err != nil {
		return nil, err
	}
	return d, nil
}

// hotplug plays virt-handler's part of a hot-plugged CD: once
// virt-controller reports the volume attached to the node (its attachment
// pod runs), the file behind it goes into the running domain's CD-ROM and
// the volume is reported Ready with its target, as virt-handler reports a
// volume it attached; a CD-ROM whose volume left the spec is emptied and
// its volume reported UnMountedFromPod (virt-controller then deletes the
// attachment pod and drops the status).
func (n *node) hotplug(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, d *domain) error {
	vols := map[string]kubevirtv1.Volume{}
	for _, v := range vmi.Spec.Volumes {
		vols[v.Name] = v
	}
	status := map[string]kubevirtv1.VolumeStatus{}
	for _, s := range vmi.Status.VolumeStatus {
		status[s.Name] = s
	}
	ready := map[string]string{} // volume → its target, now in the CD
	gone := map[string]bool{}    // volumes taken out of the CD
	for i, disk := range vmi.Spec.Domain.Devices.Disks {
		if disk.CDRom == nil {
			continue
		}
		v, has := vols[disk.Name]
		st, hasStatus := status[disk.Name]
		in := d.cd[disk.Name]
		switch {
		case has && (v.DataVolume != nil || v.PersistentVolumeClaim != nil):
			if !hasStatus || st.HotplugVolume == nil || (st.Phase != kubevirtv1.HotplugVolumeAttachedToNode && st.Phase != kubevirtv1.VolumeReady) {
				continue // not attached to the node yet (or not hot-plugged)
			}
			p, err := n.volumeFile(v)
			if err != nil {
				return err
			}
			if in != p {
				if err := n.lab.Backend.SetMedia(ctx, d.uuid, machine.SlotCD, p); err != nil {
					return fmt.Errorf("insert %s into %s: %w", p, d.name, err)
				}
				n.mu.Lock()
				d.cd[disk.Name] = p
				n.mu.Unlock()
			}
			if st.Phase != kubevirtv1.VolumeReady {
				ready[disk.Name] = fmt.Sprintf("sd%c", 'a'+i)
			}
		case !has && hasStatus && st.HotplugVolume != nil && (st.Phase == kubevirtv1.VolumeReady || st.Phase == kubevirtv1.HotplugVolumeMounted):
			if in != "" {
				if err := n.lab.Backend.SetMedia(ctx, d.uuid, machine.SlotCD, ""); err != nil {
					return fmt.Errorf("eject the CD of %s: %w", d.name, err)
				}
				n.mu.Lock()
				d.cd[disk.Name] = ""
				n.mu.Unlock()
			}
			gone[disk.Name] = true
		}
	}
	if len(ready) == 0 && len(gone) == 0 {
		return nil
	}
	return n.updateVMI(ctx, vmi, func(c *kubevirtv1.VirtualMachineInstance) {
		for i := range c.Status.VolumeStatus {
			s := &c.Status.VolumeStatus[i]
			if target, ok := ready[s.Name]; ok {
				s.Phase, s.Reason, s.Target = kubevirtv1.VolumeReady, "VolumeReady", target
				s.Message = fmt.Sprintf("Successfully attach hotplugged volume %s to VM", s.Name)
			}
			if gone[s.Name] {
				s.Phase, s.Reason, s.Target = kubevirtv1.HotplugVolumeUnMounted, "VolumeUnMountedFromPod", ""
				s.Message = fmt.Sprintf("Volume %s has been unmounted from virt-launcher pod", s.Name)
			}
		}
	})
}

// serveHandler runs virt-handler's REST server on the port virt-api was
// told, with virt-handler's checks: a client certificate from KubeVirt's
// CA naming kubevirt.io:system:client:virt-handler.
func (n *node) serveHandler(t testing.TB) {
	t.Helper()
	cp := n.f.cp
	cert := cp.ca.TLSCert(t, kubetest.Leaf{CN: "kubevirt.io:system:node:virt-handler", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true})
	mux := http.NewServeMux()
	const base = "/v1/namespaces/{ns}/virtualmachineinstances/{name}/"
	mux.HandleFunc("GET "+base+"console", n.serveConsole)
	mux.HandleFunc("PUT "+base+"softreboot", n.domainAction(func(dom libvirt.Domain) error { return n.lab.Client.DomainReboot(dom, 0) }))
	mux.HandleFunc("PUT "+base+"reset", n.domainAction(func(dom libvirt.Domain) error { return n.lab.Client.DomainReset(dom, 0) }))
	srv := &http.Server{Handler: mux, TLSConfig: &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientCAs:    cp.ca.Pool(),
		ClientAuth:   tls.RequireAndVerifyClientCert,
		VerifyPeerCertificate: func(_ [][]byte, chains [][]*x509.Certificate) error {
			if len(chains) == 0 || chains[0][0].Subject.CommonName != "kubevirt.io:system:client:virt-handler" {
				return fmt.Errorf("not virt-api's client certificate")
			}
			return nil
		},
	}}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(cp.handlerPort)))
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.ServeTLS(l, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
}

// runningDomain returns the domain of a running instance on the node.
func (n *node) runningDomain(ns, name string) (*domain, error) {
	vmi := n.vmi(name)
	if ns != n.f.Namespace || vmi == nil || vmi.Status.Phase != kubevirtv1.Running {
		return nil, fmt.Errorf("VMI %s/%s is not running on this node", ns, name)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	d := n.doms[name]
	if d == nil || d.uid != vmi.UID {
		return nil, fmt.Errorf("VMI %s/%s has no domain on this node", ns, name)
	}
	return d, nil
}

func (n *node) domainAction(do func(libvirt.Domain) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		d, err := n.runningDomain(r.PathValue("ns"), r.PathValue("name"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		dom, err := n.lab.Client.DomainLookupByName(d.name)
		if err == nil {
			err = do(dom)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
}

// serveConsole is virt-handler's console: a WebSocket (subprotocol
// plain.kubevirt.io, raw bytes in binary messages) onto the serial console
// of the instance's domain.
func (n *node) serveConsole(w http.ResponseWriter, r *http.Request) {
	d, err := n.runningDomain(r.PathValue("ns"), r.PathValue("name"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	con, err := n.lab.Backend.OpenConsole(r.Context(), d.uuid)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
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
			k, err := con.Read(buf)
			if k > 0 && conn.WriteMessage(websocket.BinaryMessage, buf[:k]) != nil {
				return
			}
			if err != nil {
				_ = conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
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
