package kubevirt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/pace"
)

// Config says which cluster and which VirtualMachines the backend serves.
type Config struct {
	// Rest reaches the API server.
	Rest *rest.Config
	// Namespaces to watch; none means every namespace.
	Namespaces []string
	// Selector is a label selector; only matching VirtualMachines get a BMC.
	Selector string
	// Wait bounds how long Start, a forced Stop and Reset wait for KubeVirt
	// to act (a new instance, the old one gone). Default 60 s.
	Wait time.Duration
	// Probe is how often the API server's /readyz is asked while it is
	// unreachable or healthy, for UnavailableOffline. Default 1 s.
	Probe time.Duration
	// Images serves inserted images to CDI's importer; nil refuses
	// virtual media.
	Images *ImageServer
	// ImportWait bounds how long an insert waits for CDI to import the
	// image into its DataVolume while the import goes on (one that keeps
	// failing ends after MaxImportRestarts importer restarts). Default
	// 10 min: a large image over a slow link.
	ImportWait time.Duration
	// ConfigEvery is how often the KubeVirt CR is read for the feature
	// gates that decide how virtual media attaches. Default 30 s.
	ConfigEvery time.Duration
}

// Backend serves KubeVirt VirtualMachines as machines.
type Backend struct {
	cfg Config
	log *zap.Logger
	kv  *rest.RESTClient // kubevirt.io/v1
	sub *rest.RESTClient // subresources.kubevirt.io/v1
	cdi *rest.RESTClient // cdi.kubevirt.io/v1beta1

	informers []cache.SharedIndexInformer
	vmiStores []cache.Store // the instances' informers' stores

	mu      sync.RWMutex
	entries map[string]*entry // by SystemName
	byID    map[string]string // firmware UUID → SystemName
	names   []string          // sorted SystemNames
	down    string            // why the API server cannot be reached, "" when it can

	gen  atomic.Uint64
	subs machine.Broadcaster

	hotplugCD atomic.Bool // see HotplugCD
	kvErr     atomic.Bool // reading the KubeVirt CR failed (logged once)
	prepared  prepared
}

type entry struct {
	vm        *kubevirtv1.VirtualMachine
	vmi       *kubevirtv1.VirtualMachineInstance
	m         *machine.Machine
	indicator bool
}

var _ machine.Backend = (*Backend)(nil)

// New returns a backend; Run starts it.
func New(cfg Config, log *zap.Logger) (*Backend, error) {
	if cfg.Wait <= 0 {
		cfg.Wait = 60 * time.Second
	}
	if cfg.Probe <= 0 {
		cfg.Probe = time.Second
	}
	if cfg.ImportWait <= 0 {
		cfg.ImportWait = 10 * time.Minute
	}
	if cfg.ConfigEvery <= 0 {
		cfg.ConfigEvery = 30 * time.Second
	}
	kv, err := NewRESTClient(cfg.Rest, kubevirtv1.SchemeGroupVersion)
	if err != nil {
		return nil, fmt.Errorf("kubevirt client: %w", err)
	}
	sub, err := NewRESTClient(cfg.Rest, kubevirtv1.SubresourceGroupVersions[0])
	if err != nil {
		return nil, fmt.Errorf("kubevirt subresource client: %w", err)
	}
	cdi, err := NewRESTClient(cfg.Rest, cdiv1.SchemeGroupVersion)
	if err != nil {
		return nil, fmt.Errorf("CDI client: %w", err)
	}
	return &Backend{cfg: cfg, log: log, kv: kv, sub: sub, cdi: cdi, entries: map[string]*entry{}, byID: map[string]string{},
		prepared: prepared{m: map[string]*preparedImport{}}}, nil
}

// NewRESTClient returns a client of one of KubeVirt's API groups
// (kubevirt.io/v1, subresources.kubevirt.io/v1) or CDI's
// (cdi.kubevirt.io/v1beta1) that speaks JSON with their API types.
func NewRESTClient(base *rest.Config, gv schema.GroupVersion) (*rest.RESTClient, error) {
	scheme := runtime.NewScheme()
	if err := kubevirtv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := cdiv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	metav1.AddToGroupVersion(scheme, gv)
	c := rest.CopyConfig(base)
	c.APIPath = "/apis"
	c.GroupVersion = &gv
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	c.ContentType = runtime.ContentTypeJSON
	if c.UserAgent == "" {
		c.UserAgent = "vbmcd"
	}
	return rest.RESTClientFor(c)
}

// Run starts the informers and waits until they have listed every
// VirtualMachine and instance once (at most within). They run until ctx
// ends; a lost watch is re-listed by client-go, and while the API server
// is unreachable every machine is served as Unavailable.
func (b *Backend) Run(ctx context.Context, within time.Duration) error {
	nss := b.cfg.Namespaces
	if len(nss) == 0 {
		nss = []string{metav1.NamespaceAll}
	}
	sel := func(o *metav1.ListOptions) { o.LabelSelector = b.cfg.Selector }
	for _, ns := range nss {
		vmInf := cache.NewSharedIndexInformer(cache.NewFilteredListWatchFromClient(b.kv, "virtualmachines", ns, sel), &kubevirtv1.VirtualMachine{}, 0, nil)
		// An instance carries its VM's labels only when the template has
		// them, so instances are watched unfiltered and matched by name.
		vmiInf := cache.NewSharedIndexInformer(cache.NewFilteredListWatchFromClient(b.kv, "virtualmachineinstances", ns, func(*metav1.ListOptions) {}), &kubevirtv1.VirtualMachineInstance{}, 0, nil)
		b.vmiStores = append(b.vmiStores, vmiInf.GetStore())
		for _, inf := range []cache.SharedIndexInformer{vmInf, vmiInf} {
			_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
				AddFunc:    func(o any) { b.observe(o, false) },
				UpdateFunc: func(_, o any) { b.observe(o, false) },
				DeleteFunc: func(o any) { b.observe(o, true) },
			})
			if err != nil {
				return err
			}
			inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
				b.setDown("watch: " + err.Error())
			})
			b.informers = append(b.informers, inf)
			go inf.RunWithContext(ctx)
		}
	}
	synced := make([]cache.InformerSynced, len(b.informers))
	for i, inf := range b.informers {
		synced[i] = inf.HasSynced
	}
	sctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	if !cache.WaitForCacheSync(sctx.Done(), synced...) {
		return fmt.Errorf("list VirtualMachines and instances: not done within %s", within)
	}
	b.readConfig(sctx)
	go b.probe(ctx)
	go pace.Every(ctx, b.cfg.ConfigEvery, func() bool {
		b.readConfig(ctx)
		return true
	})
	return nil
}

// readConfig reads the KubeVirt CRs for the feature gates that decide how
// virtual media attaches (HotplugCD). vbmcd needs list on
// kubevirts.kubevirt.io cluster-wide for it (contrib/kubevirt/vbmcd.yaml's
// ClusterRole); without it, CDs attach at the next start, and that is
// logged once.
func (b *Backend) readConfig(ctx context.Context) {
	list := &kubevirtv1.KubeVirtList{}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := b.kv.Get().Resource("kubevirts").Do(rctx).Into(list); err != nil {
		if ctx.Err() == nil && !b.kvErr.Swap(true) {
			b.log.Warn("cannot read the KubeVirt CR: virtual media attaches at the next start, not live", zap.Error(err))
		}
		return
	}
	b.kvErr.Store(false)
	on := false
	for _, kv := range list.Items {
		if kv.DeletionTimestamp != nil || kv.Status.Phase == "" {
			continue
		}
		if dc := kv.Spec.Configuration.DeveloperConfiguration; dc != nil &&
			slices.Contains(dc.FeatureGates, "DeclarativeHotplugVolumes") && !slices.Contains(dc.FeatureGates, "HotplugVolumes") {
			on = true
		}
	}
	if b.hotplugCD.Swap(on) != on {
		b.log.Info("KubeVirt's CD-ROM hot-plug (DeclarativeHotplugVolumes)", zap.Bool("on", on))
	}
}

// probe asks /readyz every Probe: an API server that does not answer
// makes every machine Unavailable, one that answers again makes them
// available (the informers re-list on their own).
func (b *Backend) probe(ctx context.Context) {
	pace.Every(ctx, b.cfg.Probe, func() bool {
		pctx, cancel := context.WithTimeout(ctx, 2*b.cfg.Probe+time.Second)
		err := b.kv.Get().AbsPath("/readyz").Do(pctx).Error()
		cancel()
		if ctx.Err() != nil {
			return false
		}
		if err != nil {
			b.setDown("API server: " + err.Error())
		} else {
			b.setDown("")
		}
		return true
	})
}

// setDown records whether the API server is reachable and re-makes every
// snapshot when that changes.
func (b *Backend) setDown(why string) {
	if len(why) > 200 {
		why = why[:200]
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if (b.down == "") == (why == "") {
		if why != "" {
			b.down = why
		}
		return
	}
	if why == "" {
		b.log.Info("KubeVirt API server reachable again")
	} else {
		b.log.Warn("KubeVirt API server unreachable", zap.String("reason", why))
	}
	b.down = why
	for _, name := range b.names {
		b.refresh(b.entries[name])
	}
}

// observe takes an informer's object into the cache.
func (b *Backend) observe(o any, deleted bool) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o, deleted = d.Obj, true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch obj := o.(type) {
	case *kubevirtv1.VirtualMachine:
		name := SystemName(obj.Namespace, obj.Name)
		e := b.entries[name]
		if deleted {
			if e != nil {
				delete(b.entries, name)
				delete(b.byID, e.m.ID)
				b.names = slices.DeleteFunc(b.names, func(n string) bool { return n == name })
				b.subs.Send(machine.Event{Kind: machine.EventRemoved, ID: e.m.ID, Prev: e.m})
			}
			return
		}
		if e == nil {
			e = &entry{}
			b.entries[name] = e
			i, _ := slices.BinarySearch(b.names, name)
			b.names = slices.Insert(b.names, i, name)
			// The instances' informer may have listed this VM's instance
			// before the VMs' informer listed the VM.
			e.vmi = b.storedVMI(obj.Namespace, obj.Name)
		} else if older(obj.ResourceVersion, e.vm.ResourceVersion) {
			return // a write of ours was taken in already
		}
		e.vm = obj
		b.refresh(e)
	case *kubevirtv1.VirtualMachineInstance:
		e := b.entries[SystemName(obj.Namespace, obj.Name)]
		if e == nil {
			return
		}
		if deleted {
			if e.vmi == nil || e.vmi.UID != obj.UID {
				return
			}
			e.vmi = nil
		} else {
			e.vmi = obj
		}
		b.refresh(e)
	}
}

// storedVMI returns the instance named ns/name the informers hold, or nil.
func (b *Backend) storedVMI(ns, name string) *kubevirtv1.VirtualMachineInstance {
	for _, st := range b.vmiStores {
		if o, ok, _ := st.GetByKey(ns + "/" + name); ok {
			if vmi, ok := o.(*kubevirtv1.VirtualMachineInstance); ok {
				return vmi
			}
		}
	}
	return nil
}

// older reports whether resource version a is older than b, when both are
// numbers (etcd's revisions, which they are in practice).
func older(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return err1 == nil && err2 == nil && x < y
}

// refresh remakes e's snapshot and announces it. Callers hold b.mu.
func (b *Backend) refresh(e *entry) {
	if e == nil || e.vm == nil {
		return
	}
	m := snapshot(e.vm, e.vmi)
	m.IndicatorLED = e.indicator
	m.Unavailable = b.down
	prev := e.m
	if prev != nil && prev.ID != m.ID {
		delete(b.byID, prev.ID)
	}
	b.byID[m.ID] = m.Name
	m.Generation = b.gen.Add(1)
	e.m = m
	b.subs.Send(machine.Event{Kind: machine.EventChanged, ID: m.ID, Machine: m, Prev: prev})
}

// List implements machine.Backend.
func (b *Backend) List() []*machine.Machine {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([]*machine.Machine, len(b.names))
	for i, n := range b.names {
		out[i] = b.entries[n].m
	}
	return out
}

// find returns the entry of a machine named by firmware UUID (any case) or
// <namespace>.<name>. Callers hold b.mu.
func (b *Backend) find(id string) (*entry, error) {
	if name, ok := b.byID[strings.ToLower(id)]; ok {
		return b.entries[name], nil
	}
	if e, ok := b.entries[id]; ok {
		return e, nil
	}
	return nil, fmt.Errorf("%w: %q", machine.ErrNotFound, id)
}

// Get implements machine.Backend.
func (b *Backend) Get(id string) (*machine.Machine, error) {
	return machine.Read(&b.mu, b.find, id, func(e *entry) (*machine.Machine, error) { return e.m, nil })
}

// current returns a machine's VM and instance for an action; an
// unreachable API server refuses it.
func (b *Backend) current(id string) (*kubevirtv1.VirtualMachine, *kubevirtv1.VirtualMachineInstance, *machine.Machine, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	e, err := b.find(id)
	if err != nil {
		return nil, nil, nil, err
	}
	if b.down != "" {
		return nil, nil, nil, fmt.Errorf("%w: %s", machine.ErrUnavailable, b.down)
	}
	return e.vm, e.vmi, e.m, nil
}

// apiError turns an API error into the model's sentinels.
func apiError(what string, err error) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s: %w: %v", what, machine.ErrNotFound, err)
	case apierrors.IsConflict(err):
		return fmt.Errorf("%s: %w: %v", what, machine.ErrConflict, err)
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return fmt.Errorf("%s: %w: %v", what, machine.ErrInvalid, err)
	case apierrors.IsServiceUnavailable(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err),
		errors.Is(err, context.DeadlineExceeded), isConnError(err):
		return fmt.Errorf("%s: %w: %v", what, machine.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func isConnError(err error) bool {
	s := err.Error()
	return strings.Contains(s, "connection refused") || strings.Contains(s, "connection reset") || strings.Contains(s, "EOF")
}

// Save implements machine.Backend: the settings go into the VM's
// annotation, the boot override into its devices' bootOrder and the
// firmware into spec.template...firmware, in one JSON patch guarded by
// the resourceVersion it was made from.
func (b *Backend) Save(ctx context.Context, id string, s machine.Settings) error {
	vm, _, _, err := b.current(id)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return b.patchVM(ctx, vm, func(c *kubevirtv1.VirtualMachine) error {
		c.Annotations[AnnotationSettings] = string(raw)
		if c.Spec.Template == nil {
			return nil
		}
		if err := setBoot(c, s.Boot.Effective()); err != nil {
			return err
		}
		spec := specOf(c)
		if mode, sb := firmwareOf(spec); mode != s.Boot.Mode || sb != s.SecureBoot {
			applyFirmware(spec, s.Boot.Mode, s.SecureBoot)
		}
		return nil
	})
}

// patchVM changes a VM by change, in one JSON patch guarded by the
// resourceVersion it was made from; when someone else changed the VM
// meanwhile, it is read again and change redone on what is there.
func (b *Backend) patchVM(ctx context.Context, vm *kubevirtv1.VirtualMachine, change func(*kubevirtv1.VirtualMachine) error) error {
	for attempt := 0; ; attempt++ {
		c := vm.DeepCopy()
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		if err := change(c); err != nil {
			return err
		}
		ops := patchOps(vm, c)
		if len(ops) == 1 {
			return nil // only the resourceVersion test: nothing to change
		}
		patch, err := json.Marshal(ops)
		if err != nil {
			return err
		}
		out := &kubevirtv1.VirtualMachine{}
		err = b.kv.Patch(types.JSONPatchType).Namespace(c.Namespace).Resource("virtualmachines").Name(c.Name).Body(patch).Do(ctx).Into(out)
		if err != nil && attempt < 5 && (apierrors.IsConflict(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)) {
			// The resourceVersion test failed (someone else changed the
			// VM): read it again and redo the change on what is there.
			fresh := &kubevirtv1.VirtualMachine{}
			if gerr := b.kv.Get().Namespace(c.Namespace).Resource("virtualmachines").Name(c.Name).Do(ctx).Into(fresh); gerr != nil {
				return apiError("get VirtualMachine "+c.Name, gerr)
			}
			if fresh.ResourceVersion != vm.ResourceVersion {
				vm = fresh
				continue
			}
		}
		if err != nil {
			return apiError("patch VirtualMachine "+SystemName(c.Namespace, c.Name), err)
		}
		b.observe(out, false)
		return nil
	}
}

// subresource PUTs a subresource of a VM or instance; errors are the API
// server's (apierrors).
func (b *Backend) subresource(ctx context.Context, vm *kubevirtv1.VirtualMachine, resource, action string, body any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return b.sub.Put().Namespace(vm.Namespace).Resource(resource).Name(vm.Name).SubResource(action).
		Body(raw).SetHeader("Content-Type", "application/json").Do(ctx).Error()
}

// wait waits until cond holds for the machine's entry, bounded by Wait.
func (b *Backend) wait(ctx context.Context, vm *kubevirtv1.VirtualMachine, what string, cond func(*entry) bool) error {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.Wait)
	defer cancel()
	events, stop := b.subs.Subscribe()
	defer stop()
	name := SystemName(vm.Namespace, vm.Name)
	check := func() bool {
		b.mu.RLock()
		defer b.mu.RUnlock()
		e := b.entries[name]
		return e != nil && cond(e)
	}
	for !check() {
		select {
		case <-events:
		case <-ctx.Done():
			return fmt.Errorf("%s: KubeVirt did not %s within %s: %w", name, what, b.cfg.Wait, ctx.Err())
		}
	}
	return nil
}

func uidOf(vmi *kubevirtv1.VirtualMachineInstance) string {
	if vmi == nil {
		return ""
	}
	return string(vmi.UID)
}

// newInstance reports whether e has an instance other than the one with
// UID old, not being deleted.
func newInstance(old string) func(*entry) bool {
	return func(e *entry) bool {
		return e.vmi != nil && string(e.vmi.UID) != old && e.vmi.DeletionTimestamp == nil
	}
}

// Power on KubeVirt: vbmcd puts a VM it powers on or off under
// runStrategy Manual, where KubeVirt's VM controller starts and stops the
// instance only when asked (the start, stop and restart subresources) and
// never on its own: a guest that powers itself off stays off, as a server
// does, and so does an instance that failed (its node died, qemu crashed),
// as a server whose power was cut. Halted would not take a start request
// (the start subresource turns it into Always), and Always and
// RerunOnFailure restart a guest that shut itself down or failed.

// lifecycle PUTs a lifecycle subresource. KubeVirt refuses a request that
// comes while it is still carrying out an earlier one: those refusals are
// waited out, as a BMC waits for the power sequence under way, and the
// request made again, within Wait. There are two. virt-api answers a state
// change request while an earlier one is not taken up yet with a 500, an
// internal error (not a conflict), "stop/start already underway": the one
// the tests meet (TestE2EKubeVirtStartRefused). And it answers a start
// while the VM's last instance is not final yet with a 409 "VM is already
// running" (StartVMRequestHandler in KubeVirt's
// pkg/virt-api/rest/lifecycle.go, read, not run), waited out here while
// KubeVirt is busy with the machine; no test meets it, as the machine
// model waits while a machine reads PoweringOff before it asks for a
// start. Other refusals return, as ErrConflict with KubeVirt's
// message, unless done says the refusal means the request has nothing to
// do.
func (b *Backend) lifecycle(ctx context.Context, vm *kubevirtv1.VirtualMachine, resource, action string, body any, done func(error) bool) error {
	name := SystemName(vm.Namespace, vm.Name)
	ctx, cancel := context.WithTimeout(ctx, b.cfg.Wait)
	defer cancel()
	events, stop := b.subs.Subscribe()
	defer stop()
	for {
		err := b.subresource(ctx, vm, resource, action, body)
		if err == nil || done != nil && done(err) {
			return nil
		}
		// "stop/start already underway" is KubeVirt's answer to a state
		// change request while an earlier one is not taken up yet
		// (virt-api's lifecycle.go, getChangeRequestJson): it clears
		// once the VM controller took that one up, which vbmcd's view of
		// the VM may not show yet.
		underway := apierrors.IsInternalError(err) && strings.Contains(err.Error(), "already underway")
		if !underway && !(apierrors.IsConflict(err) && b.busy(name)) {
			return apiError(action+" "+name, err)
		}
		b.log.Debug("KubeVirt is still carrying out an earlier request; waiting", zap.String("machine", name),
			zap.String("request", action), zap.Error(err))
		t := time.NewTimer(time.Second)
		select {
		case <-events:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s %s: %w: KubeVirt kept refusing it for %s while it carried out an earlier request: %v",
				action, name, machine.ErrUnavailable, b.cfg.Wait, err)
		}
		t.Stop()
	}
}

// busy reports whether KubeVirt is carrying out a power change of a
// machine: state change requests not taken up yet, or an instance being
// deleted or not running yet.
func (b *Backend) busy(name string) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	e := b.entries[name]
	if e == nil {
		return false
	}
	if len(e.vm.Status.StateChangeRequests) > 0 {
		return true
	}
	vmi := e.vmi
	return vmi != nil && !vmi.IsFinal() && (vmi.DeletionTimestamp != nil || vmi.Status.Phase != kubevirtv1.Running)
}

// prepareStart puts the VM under runStrategy Manual (see above) and, when
// KubeVirt hot-plugs CD-ROM media (DeclarativeHotplugVolumes), gives it
// the BMC's empty CD drive, which an instance must have from its start for
// an insert to reach it live. One patch, when anything changes.
func (b *Backend) prepareStart(ctx context.Context, vm *kubevirtv1.VirtualMachine, start bool) error {
	hotplug := start && b.HotplugCD()
	return b.patchVM(ctx, vm, func(c *kubevirtv1.VirtualMachine) error {
		if rs, _ := c.RunStrategy(); rs != kubevirtv1.RunStrategyManual || c.Spec.Running != nil {
			manual := kubevirtv1.RunStrategyManual
			c.Spec.RunStrategy, c.Spec.Running = &manual, nil
		}
		if hotplug && c.Spec.Template != nil {
			addDrive(specOf(c), mediaDisk)
		}
		return nil
	})
}

// Start implements machine.Backend: the start subresource (a state change
// request under Manual), then a wait until KubeVirt made the new instance,
// so that the VM's spec may change (a Once override spent) without
// touching the boot that began.
func (b *Backend) Start(ctx context.Context, id string) error {
	vm, vmi, m, err := b.current(id)
	if err != nil {
		return err
	}
	if err := m.CheckOff(); err != nil {
		return err
	}
	if err := b.prepareStart(ctx, vm, true); err != nil {
		return err
	}
	old := uidOf(vmi)
	if vm, _, _, err = b.current(id); err != nil {
		return err
	}
	if err := b.lifecycle(ctx, vm, "virtualmachines", "start", kubevirtv1.StartOptions{}, nil); err != nil {
		return err
	}
	return b.wait(ctx, vm, "start an instance", newInstance(old))
}

// Stop implements machine.Backend: the stop subresource (a state change
// request under Manual), with a zero grace period when forced (KubeVirt
// kills the instance; and then a wait until it ended). Without force,
// KubeVirt asks the guest to shut down and kills the instance after its
// terminationGracePeriodSeconds (180 s unless the VM says otherwise): a
// guest that ignores ACPI does not stay on, unlike on a server.
func (b *Backend) Stop(ctx context.Context, id string, force bool) error {
	vm, vmi, m, err := b.current(id)
	if err != nil {
		return err
	}
	if m.Power == machine.PowerOff && (vmi == nil || vmi.IsFinal() || !force) {
		return nil
	}
	if err := b.prepareStart(ctx, vm, false); err != nil {
		return err
	}
	if vm, _, _, err = b.current(id); err != nil {
		return err
	}
	opts := kubevirtv1.StopOptions{}
	if force {
		zero := int64(0)
		opts.GracePeriod = &zero
	}
	// KubeVirt refuses to stop an instance that ended: it stopped meanwhile.
	stopped := func(err error) bool {
		return apierrors.IsConflict(err) && strings.Contains(err.Error(), "is not running")
	}
	err = b.lifecycle(ctx, vm, "virtualmachines", "stop", opts, stopped)
	if err != nil || !force {
		return err
	}
	return b.wait(ctx, vm, "stop the instance", func(e *entry) bool {
		return e.vmi == nil || e.vmi.IsFinal() || e.m.Power == machine.PowerOff
	})
}

// Reboot implements machine.Backend: the instance's softreboot
// subresource (virt-handler has the guest reboot by ACPI).
func (b *Backend) Reboot(ctx context.Context, id string) error {
	return b.instanceAction(ctx, id, "softreboot")
}

// Reset implements machine.Backend: the instance's reset subresource, a
// hard reset of the running guest by virt-handler (the instance and its
// configuration stay: a warm reset, as ForceRestart on a server). The
// model asks for it only when the instance runs with the configuration
// Stale says it would boot with; else it stops and starts (a new
// instance).
func (b *Backend) Reset(ctx context.Context, id string) error {
	return b.instanceAction(ctx, id, "reset")
}

// instanceAction calls the running instance's subresource (softreboot,
// reset) of machine id; a machine that is not on is a conflict.
func (b *Backend) instanceAction(ctx context.Context, id, subresource string) error {
	vm, _, m, err := b.current(id)
	if err != nil {
		return err
	}
	if err := m.CheckOn(); err != nil {
		return err
	}
	return apiError(subresource+" "+m.Name, b.subresource(ctx, vm, "virtualmachineinstances", subresource, struct{}{}))
}

// NMI implements machine.Backend; KubeVirt has no API for it.
func (b *Backend) NMI(context.Context, string) error {
	return fmt.Errorf("%w: KubeVirt has no NMI", machine.ErrUnsupported)
}

// SetIndicator implements machine.Backend (in memory).
func (b *Backend) SetIndicator(id string, on bool) error {
	return machine.Change(&b.mu, b.find, id, func(e *entry) error {
		e.indicator = on
		b.refresh(e)
		return nil
	})
}

// Stale implements machine.Backend: the instance runs with another boot
// order or firmware than its VM's spec now says.
func (b *Backend) Stale(id string) bool {
	s, _ := machine.Read(&b.mu, b.find, id, func(e *entry) (bool, error) { return stale(e.vm, e.vmi), nil })
	return s
}

// Subscribe implements machine.Backend.
func (b *Backend) Subscribe() (<-chan machine.Event, func()) { return b.subs.Subscribe() }
