package kubevirttest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// CDI as the fixture plays it: a DataVolume with an http source is
// imported into a file (the "PVC", which the instance's libvirt domain
// then uses as its disk or CD), with status as CDI writes it: phase
// ImportScheduled, ImportInProgress with progress, Succeeded with
// "100.0%" and claimName, or Failed with a Running condition saying why.
// A deleted DataVolume's file is removed. Not played: other sources,
// PVC objects, storage classes, scratch space, conversion (the image is
// taken raw, as CDI takes an ISO).

// startCDI watches the namespace's DataVolumes and imports them.
func (f *Fixture) startCDI(ctx context.Context) {
	lw := cache.NewFilteredListWatchFromClient(f.cdi, "datavolumes", f.Namespace, func(*metav1.ListOptions) {})
	f.dvs = cache.NewSharedIndexInformer(lw, &cdiv1.DataVolume{}, 0, nil)
	q := make(chan string, 1024)
	kick := func(o any) {
		if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		if m, ok := o.(metav1.Object); ok {
			q <- m.GetName()
		}
	}
	f.dvs.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: kick, UpdateFunc: func(_, o any) { kick(o) }, DeleteFunc: kick})
	go f.dvs.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), f.dvs.HasSynced) {
		f.t.Fatal("fixture DataVolume informer did not sync")
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case name := <-q:
				if err := f.importDV(ctx, name); err != nil && ctx.Err() == nil {
					if !apierrors.IsConflict(err) {
						f.t.Logf("fixture: DataVolume %s: %v", name, err)
					}
					time.AfterFunc(100*time.Millisecond, func() { q <- name })
				}
			}
		}
	}()
}

// DataVolumePath is the file holding DataVolume name's data once it is
// imported; "" before.
func (f *Fixture) DataVolumePath(name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.imported[name]
}

// FailImports makes every import from now on fail with msg, as CDI's
// importer reports an unreachable or broken source; "" lets them succeed
// again.
func (f *Fixture) FailImports(msg string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failImports = msg
}

func (f *Fixture) dvFile(name string) string { return filepath.Join(f.serial, "dv-"+name+".img") }

func (f *Fixture) importDV(ctx context.Context, name string) error {
	o, ok, _ := f.dvs.GetStore().GetByKey(f.Namespace + "/" + name)
	if !ok {
		f.mu.Lock()
		delete(f.imported, name)
		f.mu.Unlock()
		os.Remove(f.dvFile(name))
		return nil
	}
	dv := o.(*cdiv1.DataVolume)
	switch dv.Status.Phase {
	case cdiv1.Succeeded, cdiv1.Failed:
		return nil
	}
	src := dv.Spec.Source
	if src == nil || src.HTTP == nil {
		return f.dvStatus(ctx, dv, cdiv1.Failed, "N/A", "the fixture plays only http sources")
	}
	if dv.Status.Phase == "" {
		return f.dvStatus(ctx, dv, cdiv1.ImportScheduled, "N/A", "")
	}
	u, err := url.Parse(src.HTTP.URL)
	if err != nil || !loopback(u.Hostname()) {
		// The tests send traffic to loopback only.
		return f.dvStatus(ctx, dv, cdiv1.Failed, "N/A", fmt.Sprintf("the fixture imports from loopback only, not %q", src.HTTP.URL))
	}
	if err := f.dvStatus(ctx, dv, cdiv1.ImportInProgress, "0.00%", ""); err != nil {
		return err
	}
	f.mu.Lock()
	fail := f.failImports
	f.mu.Unlock()
	if fail != "" {
		return f.dvStatusFresh(ctx, name, cdiv1.Failed, "N/A", fail)
	}
	path := f.dvFile(name)
	size, err := fetch(ctx, src.HTTP.URL, path)
	if err != nil {
		return f.dvStatusFresh(ctx, name, cdiv1.Failed, "N/A", "Unable to process data: "+err.Error())
	}
	if ctx.Err() == nil { // no logging once the test is over
		f.t.Logf("fixture: DataVolume %s imported (%d bytes from %s)", name, size, src.HTTP.URL)
	}
	f.mu.Lock()
	f.imported[name] = path
	f.mu.Unlock()
	// The domains' reconcile may be waiting for this volume.
	for _, vm := range f.vms.GetStore().ListKeys() {
		_, n, _ := cache.SplitMetaNamespaceKey(vm)
		f.queue <- n
	}
	return f.dvStatusFresh(ctx, name, cdiv1.Succeeded, "100.0%", "")
}

func loopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// fetch copies url into path.
func fetch(ctx context.Context, url, path string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("HTTP %s", resp.Status)
	}
	out, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, resp.Body)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// dvStatusFresh writes the status on the DataVolume as it is now.
func (f *Fixture) dvStatusFresh(ctx context.Context, name string, phase cdiv1.DataVolumePhase, progress, msg string) error {
	dv := &cdiv1.DataVolume{}
	if err := f.cdi.Get().Namespace(f.Namespace).Resource("datavolumes").Name(name).Do(ctx).Into(dv); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	return f.dvStatus(ctx, dv, phase, progress, msg)
}

// dvStatus writes a DataVolume's phase, progress and conditions through
// its status subresource, as CDI's datavolume controller.
func (f *Fixture) dvStatus(ctx context.Context, dv *cdiv1.DataVolume, phase cdiv1.DataVolumePhase, progress, msg string) error {
	c := dv.DeepCopy()
	c.Status.Phase, c.Status.Progress = phase, cdiv1.DataVolumeProgress(progress)
	now := metav1.Now()
	cond := func(t cdiv1.DataVolumeConditionType, ok bool, reason string) cdiv1.DataVolumeCondition {
		st := corev1.ConditionFalse
		if ok {
			st = corev1.ConditionTrue
		}
		return cdiv1.DataVolumeCondition{Type: t, Status: st, Reason: reason, Message: msg, LastTransitionTime: now, LastHeartbeatTime: now}
	}
	switch phase {
	case cdiv1.ImportScheduled:
		c.Status.ClaimName = dv.Name
		c.Status.Conditions = []cdiv1.DataVolumeCondition{cond(cdiv1.DataVolumeBound, true, "Bound"), cond(cdiv1.DataVolumeReady, false, "ImportScheduled"), cond(cdiv1.DataVolumeRunning, false, "")}
	case cdiv1.ImportInProgress:
		c.Status.Conditions = []cdiv1.DataVolumeCondition{cond(cdiv1.DataVolumeBound, true, "Bound"), cond(cdiv1.DataVolumeReady, false, "ImportInProgress"), cond(cdiv1.DataVolumeRunning, true, "Pod is running")}
	case cdiv1.Succeeded:
		c.Status.Conditions = []cdiv1.DataVolumeCondition{cond(cdiv1.DataVolumeBound, true, "Bound"), cond(cdiv1.DataVolumeReady, true, ""), cond(cdiv1.DataVolumeRunning, false, "Completed")}
	case cdiv1.Failed:
		c.Status.Conditions = []cdiv1.DataVolumeCondition{cond(cdiv1.DataVolumeReady, false, "Error"), cond(cdiv1.DataVolumeRunning, false, "Error")}
	}
	return f.wrap("status of DataVolume "+dv.Name, f.cdi.Put().Namespace(f.Namespace).Resource("datavolumes").Name(dv.Name).SubResource("status").Body(c).Do(ctx).Error())
}
