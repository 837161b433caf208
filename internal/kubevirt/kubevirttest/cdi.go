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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// CDI as the fixture plays it (CDI's module is not served, see
// docs/kubevirt.md): a DataVolume with an http source gets its PVC (named
// as the DataVolume, owned by it, reported Bound: the PV provisioner's and
// binder's part, with no PersistentVolume) and is imported into a
// file, the PVC's data, which the node's domains use. Status is written as
// CDI's datavolume controller writes it: phase ImportScheduled,
// ImportInProgress with progress, Succeeded with "100.0%", all through the
// status subresource. An import that fails is retried, as CDI restarts
// its importer pod: the phase stays ImportInProgress, status.restartCount
// grows and the Running condition carries the importer's message (the
// kubelet's crash-loop back-off is shortened to RetryEvery). A deleted
// DataVolume's PVC and file go (the garbage collector's part). Not played:
// other sources, storage classes, scratch space, format conversion.

// RetryEvery is how soon the fixture's importer runs again after a
// failure: the fixture's own pace, so that a test sees
// kubevirt.MaxImportRestarts reached in seconds. A kubelet waits 10 s,
// then 20 s, 40 s... (its crash-loop back-off); no test runs at that pace.
const RetryEvery = time.Second

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
	_, _ = f.dvs.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: kick, UpdateFunc: func(_, o any) { kick(o) }, DeleteFunc: kick})
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
				again, err := f.importDV(ctx, name)
				if err != nil && ctx.Err() == nil && !apierrors.IsConflict(err) {
					f.t.Logf("fixture: DataVolume %s: %v", name, err)
				}
				if (err != nil || again > 0) && ctx.Err() == nil {
					time.AfterFunc(max(again, 100*time.Millisecond), func() { q <- name })
				}
			}
		}
	}()
}

// DataVolumePath is the file holding DataVolume (or PVC) name's data once
// it is imported; "" before.
func (f *Fixture) DataVolumePath(name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.imported[name]
}

// FailImports makes every import attempt from now on fail with msg, as
// CDI's importer reports an unreachable or broken source, CDI restarting
// it every RetryEvery; "" lets them succeed again.
func (f *Fixture) FailImports(msg string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failImports = msg
}

// HoldImports makes imports stay in progress (0.00%) until it is called
// with false, as a large image over a slow link would.
func (f *Fixture) HoldImports(hold bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.holdImports = hold
}

func (f *Fixture) dvFile(name string) string { return filepath.Join(f.serial, "dv-"+name+".img") }

// importDV moves DataVolume name one step; again > 0 asks to be called
// again after that long.
func (f *Fixture) importDV(ctx context.Context, name string) (again time.Duration, err error) {
	o, ok, _ := f.dvs.GetStore().GetByKey(f.Namespace + "/" + name)
	if !ok {
		f.mu.Lock()
		delete(f.imported, name)
		f.mu.Unlock()
		os.Remove(f.dvFile(name))
		err := f.API.Clientset(f.t).CoreV1().PersistentVolumeClaims(f.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			err = nil
		}
		return 0, err
	}
	dv := o.(*cdiv1.DataVolume)
	switch dv.Status.Phase {
	case cdiv1.Succeeded, cdiv1.Failed:
		return 0, nil
	}
	src := dv.Spec.Source
	if src == nil || src.HTTP == nil {
		return 0, f.dvStatus(ctx, dv, cdiv1.Failed, "N/A", "the fixture plays only http sources")
	}
	if dv.Status.Phase == "" {
		if err := f.ensurePVC(ctx, dv); err != nil {
			return 0, err
		}
		return 0, f.dvStatus(ctx, dv, cdiv1.ImportScheduled, "N/A", "")
	}
	u, err := url.Parse(src.HTTP.URL)
	if err != nil || !loopback(u.Hostname()) {
		// The tests send traffic to loopback only.
		return 0, f.dvStatus(ctx, dv, cdiv1.Failed, "N/A", fmt.Sprintf("the fixture imports from loopback only, not %q", src.HTTP.URL))
	}
	f.mu.Lock()
	fail, hold := f.failImports, f.holdImports
	f.mu.Unlock()
	if dv.Status.Phase == cdiv1.ImportScheduled {
		return 0, f.dvStatus(ctx, dv, cdiv1.ImportInProgress, "0.00%", "")
	}
	if hold {
		return 200 * time.Millisecond, nil
	}
	path := f.dvFile(name)
	var size int64
	if fail == "" {
		size, err = fetch(ctx, src.HTTP.URL, path)
		if err != nil {
			fail = "Unable to process data: " + err.Error()
		}
	}
	if fail != "" {
		// The importer pod exits non-zero and is restarted after the
		// back-off: CDI keeps the phase and counts the restart.
		f.mu.Lock()
		next, ok := f.retryAt[name]
		f.mu.Unlock()
		if wait := time.Until(next); ok && wait > 0 {
			return wait, nil
		}
		f.mu.Lock()
		f.retryAt[name] = time.Now().Add(RetryEvery)
		f.mu.Unlock()
		c := dv.DeepCopy()
		c.Status.RestartCount++
		return RetryEvery, f.dvStatus(ctx, c, cdiv1.ImportInProgress, "N/A", fail)
	}
	if ctx.Err() == nil { // no logging once the test is over
		f.t.Logf("fixture: DataVolume %s imported (%d bytes from %s)", name, size, src.HTTP.URL)
	}
	f.mu.Lock()
	f.imported[name] = path
	f.mu.Unlock()
	return 0, f.dvStatusFresh(ctx, name, cdiv1.Succeeded, "100.0%", "")
}

// ensurePVC makes the DataVolume's PVC, as CDI does, and reports it Bound
// (the storage provisioner's and binder's part).
func (f *Fixture) ensurePVC(ctx context.Context, dv *cdiv1.DataVolume) error {
	cs := f.API.Clientset(f.t)
	size := resource.MustParse("1Mi")
	if s := dv.Spec.Storage; s != nil {
		if q, ok := s.Resources.Requests[corev1.ResourceStorage]; ok {
			size = q
		}
	}
	fs := corev1.PersistentVolumeFilesystem
	t := true
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: dv.Name, Namespace: dv.Namespace,
			Labels: map[string]string{"app": "containerized-data-importer", "app.kubernetes.io/component": "storage"},
			Annotations: map[string]string{"cdi.kubevirt.io/storage.import.endpoint": dv.Spec.Source.HTTP.URL,
				"cdi.kubevirt.io/storage.contentType": "kubevirt"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: cdiv1.SchemeGroupVersion.String(), Kind: "DataVolume",
				Name: dv.Name, UID: dv.UID, Controller: &t, BlockOwnerDeletion: &t}},
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			VolumeMode:  &fs,
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
	created, err := cs.CoreV1().PersistentVolumeClaims(dv.Namespace).Create(ctx, pvc, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return err
	}
	created.Status = corev1.PersistentVolumeClaimStatus{
		Phase:       corev1.ClaimBound,
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Capacity:    corev1.ResourceList{corev1.ResourceStorage: size},
	}
	_, err = cs.CoreV1().PersistentVolumeClaims(dv.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	return err
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
	cond := func(t cdiv1.DataVolumeConditionType, ok bool, reason, msg string) cdiv1.DataVolumeCondition {
		st := corev1.ConditionFalse
		if ok {
			st = corev1.ConditionTrue
		}
		return cdiv1.DataVolumeCondition{Type: t, Status: st, Reason: reason, Message: msg, LastTransitionTime: now, LastHeartbeatTime: now}
	}
	bound := cond(cdiv1.DataVolumeBound, true, "Bound", "PVC "+dv.Name+" Bound")
	switch {
	case phase == cdiv1.ImportScheduled:
		c.Status.ClaimName = dv.Name
		c.Status.Conditions = []cdiv1.DataVolumeCondition{bound, cond(cdiv1.DataVolumeReady, false, "ImportScheduled", ""), cond(cdiv1.DataVolumeRunning, false, "", "")}
	case phase == cdiv1.ImportInProgress && msg != "":
		c.Status.Conditions = []cdiv1.DataVolumeCondition{bound, cond(cdiv1.DataVolumeReady, false, "ImportInProgress", ""), cond(cdiv1.DataVolumeRunning, false, "Error", msg)}
	case phase == cdiv1.ImportInProgress:
		c.Status.Conditions = []cdiv1.DataVolumeCondition{bound, cond(cdiv1.DataVolumeReady, false, "ImportInProgress", ""), cond(cdiv1.DataVolumeRunning, true, "Pod is running", "")}
	case phase == cdiv1.Succeeded:
		c.Status.Conditions = []cdiv1.DataVolumeCondition{bound, cond(cdiv1.DataVolumeReady, true, "", ""), cond(cdiv1.DataVolumeRunning, false, "Completed", "")}
	case phase == cdiv1.Failed:
		c.Status.Conditions = []cdiv1.DataVolumeCondition{cond(cdiv1.DataVolumeReady, false, "Error", msg), cond(cdiv1.DataVolumeRunning, false, "Error", msg)}
	}
	return f.wrap("status of DataVolume "+dv.Name, f.cdi.Put().Namespace(f.Namespace).Resource("datavolumes").Name(dv.Name).SubResource("status").Body(c).Do(ctx).Error())
}
