package kubevirt

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/bmlab/bmlab/internal/machine"
)

// Virtual media on KubeVirt: the image vbmcd fetched (its cache, address
// policy and checks as on libvirt) is served by the ImageServer, a CDI
// DataVolume imports it from there into a PVC, and the BMC's CD drive (a
// SATA CD-ROM disk "bmc-cd" on the VM's template) takes the DataVolume.
//
// With KubeVirt's DeclarativeHotplugVolumes feature gate (and not the
// older HotplugVolumes, which turns declarative hot-plug off), a CD-ROM
// takes and gives up its volume live: the drive stays in the template
// (vbmcd adds it, empty, before each start), an insert adds a hotpluggable
// DataVolume volume, which KubeVirt's VM controller hot-plugs into the
// running instance, and an eject removes it. Without the gate a CD-ROM
// without a volume is refused by KubeVirt's webhook and a running instance
// takes no new CD: the drive comes and goes with the medium, and a running
// VM gets it at its next start (machine.Disk.NextStart).
//
// The import runs outside the machine's lock (PrepareMedia, called by the
// model before it takes the lock): a Boot PATCH, a power action or an
// eject of that machine answers while CDI imports; an eject cancels the
// import and deletes its DataVolume.
const (
	// AnnotationMedia on a VirtualMachine records the medium vbmcd put in
	// its CD (mediaRecord as JSON).
	AnnotationMedia = "bmlab.io/vmedia-cd"
	// LabelMedia marks the DataVolumes vbmcd made for virtual media
	// (value: the member, Cd); each also has its VM as owner, so deleting
	// the VM deletes them.
	LabelMedia = "bmlab.io/vmedia"
	// LabelMediaVM is the UID of the VM a DataVolume was made for.
	LabelMediaVM = "bmlab.io/vmedia-vm"
	// mediaDisk is the name of the BMC's CD-ROM disk (and its volume).
	mediaDisk = "bmc-cd"
	// annImmediateBinding asks CDI to bind the DataVolume's PVC and import
	// at once, also on a storage class that waits for the first consumer:
	// vbmcd attaches the volume only once it is imported.
	annImmediateBinding = "cdi.kubevirt.io/storage.bind.immediate.requested"
	// MaxImportRestarts is how many times CDI may restart a failing
	// importer (DataVolume status.restartCount) before the insert fails
	// with CDI's last message. The time that takes is the kubelet's
	// crash-loop back-off between restarts: with its defaults (10 s,
	// doubling) about 70 s after the first failure, computed, not
	// measured; the tests count restarts at their fixture's 1 s pace
	// (kubevirttest.RetryEvery).
	MaxImportRestarts = 3
)

// mediaRecord is what AnnotationMedia holds.
type mediaRecord struct {
	Disk       string `json:"disk"`              // the CD-ROM disk (and volume) name
	AddedDisk  bool   `json:"addedDisk"`         // vbmcd added the disk with the medium, and removes it on eject
	DataVolume string `json:"dataVolume"`        // the DataVolume vbmcd made
	Path       string `json:"path"`              // the local file it was imported from (vbmcd's cache)
	Hotplug    bool   `json:"hotplug,omitempty"` // the volume is hotpluggable (DeclarativeHotplugVolumes)
}

func mediaOf(vm *kubevirtv1.VirtualMachine) (mediaRecord, bool) {
	var r mediaRecord
	s, ok := vm.Annotations[AnnotationMedia]
	if !ok || json.Unmarshal([]byte(s), &r) != nil || r.Disk == "" {
		return mediaRecord{}, false
	}
	return r, true
}

// dataVolumeName names a new DataVolume for vm's CD. Each insert gets its
// own name, so that an instance still running with an earlier medium is
// not taken for one that has this one.
func dataVolumeName(vm string) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	suffix := "-" + mediaDisk + "-" + hex.EncodeToString(b[:])
	if len(vm)+len(suffix) > 253 {
		vm = vm[:253-len(suffix)]
	}
	return vm + suffix
}

// addDrive gives spec the BMC's CD drive, empty, unless it has a disk of
// that name.
func addDrive(spec *kubevirtv1.VirtualMachineInstanceSpec, name string) bool {
	if slices.ContainsFunc(spec.Domain.Devices.Disks, func(d kubevirtv1.Disk) bool { return d.Name == name }) {
		return false
	}
	ro := true
	spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, kubevirtv1.Disk{Name: name,
		DiskDevice: kubevirtv1.DiskDevice{CDRom: &kubevirtv1.CDRomTarget{Bus: kubevirtv1.DiskBusSATA, ReadOnly: &ro}}})
	return true
}

// hasVolume reports whether spec has a volume on DataVolume dv.
func hasVolume(spec *kubevirtv1.VirtualMachineInstanceSpec, dv string) bool {
	return slices.ContainsFunc(spec.Volumes, func(v kubevirtv1.Volume) bool { return v.DataVolume != nil && v.DataVolume.Name == dv })
}

// volumeReady reports whether a running instance reports volume name
// ready (a hot-plugged volume is in the guest once it is).
func volumeReady(vmi *kubevirtv1.VirtualMachineInstance, name string) bool {
	for _, s := range vmi.Status.VolumeStatus {
		if s.Name == name {
			return s.Phase == kubevirtv1.VolumeReady
		}
	}
	return false
}

// mediaDrives shows the BMC's CD drive as the machine's first CD-ROM (the
// Cd member is the first CD-ROM, and the VM's own CD-ROMs stay the
// owner's), with vbmcd's medium in it: Source is the cached file it came
// from (so the model sees its insert), NextStart when the running
// instance does not have it yet. A VM without the drive shows it empty: a
// BMC always has its virtual drive, and an insert adds it to the VM.
func mediaDrives(m *machine.Machine, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) {
	rec, ok := mediaOf(vm)
	spec := specOf(vm)
	at := slices.IndexFunc(m.Disks, func(d machine.Disk) bool { return d.ID == mediaDisk })
	drive := machine.Disk{ID: mediaDisk, Device: machine.DeviceCDROM, Bus: string(kubevirtv1.DiskBusSATA), ReadOnly: true}
	if at >= 0 {
		drive = m.Disks[at]
		m.Disks = slices.Delete(m.Disks, at, at+1)
	}
	if ok && rec.Disk == mediaDisk && hasVolume(spec, rec.DataVolume) {
		drive.Source = rec.Path
		drive.Volume = "datavolumes/" + vm.Namespace + "/" + rec.DataVolume
		if vmi != nil && m.Power != machine.PowerOff {
			in := hasVolume(&vmi.Spec, rec.DataVolume)
			if in && rec.Hotplug {
				in = volumeReady(vmi, mediaDisk)
			}
			drive.NextStart = !in
		}
	}
	first := slices.IndexFunc(m.Disks, func(d machine.Disk) bool { return d.Device == machine.DeviceCDROM })
	if first < 0 {
		first = len(m.Disks)
	}
	m.Disks = slices.Insert(m.Disks, first, drive)
}

// HotplugCD reports whether KubeVirt hot-plugs CD-ROM media: a KubeVirt
// CR turns DeclarativeHotplugVolumes on and HotplugVolumes off (KubeVirt's
// VM controller does declarative hot-plug only then).
func (b *Backend) HotplugCD() bool { return b.hotplugCD.Load() }

// preparedImport is a DataVolume imported for an insert that the model
// has not attached yet (PrepareMedia).
type preparedImport struct {
	dv       string
	consumed bool
}

type prepared struct {
	mu sync.Mutex
	m  map[string]*preparedImport // machine/slot/file → import
}

func preparedKey(name string, slot machine.MediaSlot, src string) string {
	return name + "/" + string(slot) + "/" + src
}

// PrepareMedia implements machine.MediaPreparer: it imports src into a
// DataVolume of the machine's VM through CDI (the long part of an insert)
// without the machine's lock. SetMedia with the same file then attaches
// that DataVolume. release deletes the DataVolume unless SetMedia took it;
// a cancelled ctx (an eject) stops the import and deletes it.
func (b *Backend) PrepareMedia(ctx context.Context, id string, slot machine.MediaSlot, src string) (release func(), err error) {
	if err := b.MediaSupported(slot); err != nil {
		return nil, err
	}
	vm, _, m, err := b.current(id)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(src)
	if err != nil {
		return nil, err
	}
	dv, err := b.importImage(ctx, vm, src, fi.Size())
	if err != nil {
		return nil, err
	}
	key := preparedKey(m.Name, slot, src)
	p := &preparedImport{dv: dv}
	b.prepared.mu.Lock()
	if old := b.prepared.m[key]; old != nil && !old.consumed {
		b.deleteDataVolume(context.WithoutCancel(ctx), vm.Namespace, old.dv)
	}
	b.prepared.m[key] = p
	b.prepared.mu.Unlock()
	return func() {
		b.prepared.mu.Lock()
		if b.prepared.m[key] == p {
			delete(b.prepared.m, key)
		}
		consumed := p.consumed
		b.prepared.mu.Unlock()
		if !consumed {
			b.deleteDataVolume(context.Background(), vm.Namespace, dv)
			b.cfg.Images.Stop(src)
		}
	}, nil
}

// take returns (and marks consumed) the DataVolume PrepareMedia imported
// src into, if any.
func (b *Backend) take(name string, slot machine.MediaSlot, src string) (string, bool) {
	b.prepared.mu.Lock()
	defer b.prepared.mu.Unlock()
	p := b.prepared.m[preparedKey(name, slot, src)]
	if p == nil || p.consumed {
		return "", false
	}
	p.consumed = true
	return p.dv, true
}

// MediaSupported implements machine.MediaChecker: only the CD member, and
// only with vbmcd's image server.
func (b *Backend) MediaSupported(slot machine.MediaSlot) error {
	if slot != machine.SlotCD {
		return fmt.Errorf("%w: virtual media %s on KubeVirt: a USB stick would be a hot-plugged disk, and KubeVirt hot-plugs disks only on the scsi or virtio bus, never usb (its storage hot-plug admission); only the Cd member is mapped, to a CD-ROM on a DataVolume", machine.ErrUnsupported, slot)
	}
	if b.cfg.Images == nil {
		return fmt.Errorf("%w: virtual media on KubeVirt needs vbmcd's image server (--kubevirt-media-addr), which CDI imports the images from", machine.ErrUnsupported)
	}
	return nil
}

// SetMedia implements machine.Backend for the CD: src, imported into a
// DataVolume (by PrepareMedia, or here when it was not), goes into the
// BMC's CD drive; "" ejects it and deletes the DataVolume. With
// DeclarativeHotplugVolumes, on a running instance that has the drive,
// both are live and SetMedia returns once the instance reports the
// volume ready (or gone); otherwise the CD is there from the next start.
func (b *Backend) SetMedia(ctx context.Context, id string, slot machine.MediaSlot, src string) error {
	if src == "" && slot != machine.SlotCD {
		return nil // nothing of that member is ever inserted here
	}
	vm, _, m, err := b.current(id)
	if err != nil {
		return err
	}
	if src == "" {
		return b.eject(ctx, vm)
	}
	if err := b.MediaSupported(slot); err != nil {
		return err
	}
	if _, ok := mediaOf(vm); ok {
		// The model inserts only into an empty drive: a record without
		// its volume (someone edited the VM) is cleared first.
		if err := b.eject(ctx, vm); err != nil {
			return err
		}
		if vm, _, _, err = b.current(id); err != nil {
			return err
		}
	}
	dv, ok := b.take(m.Name, slot, src)
	if !ok {
		fi, err := os.Stat(src)
		if err != nil {
			return err
		}
		if dv, err = b.importImage(ctx, vm, src, fi.Size()); err != nil {
			return err
		}
	}
	hotplug := b.HotplugCD()
	err = b.patchVM(ctx, vm, func(c *kubevirtv1.VirtualMachine) error {
		spec := specOf(c)
		rec := mediaRecord{Disk: mediaDisk, DataVolume: dv, Path: src, Hotplug: hotplug}
		// Without hot-plug the drive comes with the medium (KubeVirt
		// refuses a CD-ROM without a volume); with it the drive stays.
		rec.AddedDisk = addDrive(spec, mediaDisk) && !hotplug
		spec.Volumes = slices.DeleteFunc(spec.Volumes, func(v kubevirtv1.Volume) bool { return v.Name == rec.Disk })
		spec.Volumes = append(spec.Volumes, kubevirtv1.Volume{Name: rec.Disk,
			VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: dv, Hotpluggable: hotplug}}})
		raw, _ := json.Marshal(rec)
		c.Annotations[AnnotationMedia] = string(raw)
		// A boot override set before the insert puts the new CD in its place.
		if st, err := settingsOf(c); err == nil && st.Boot.Effective() != machine.BootNone && st.Boot.Effective() != "" {
			return setBoot(c, st.Boot.Effective())
		}
		return nil
	})
	if err != nil {
		b.deleteDataVolume(context.WithoutCancel(ctx), vm.Namespace, dv)
		b.cfg.Images.Stop(src)
		return err
	}
	if hotplug {
		return b.waitLive(ctx, vm, "hot-plug the CD", func(vmi *kubevirtv1.VirtualMachineInstance) bool {
			return hasVolume(&vmi.Spec, dv) && volumeReady(vmi, mediaDisk)
		})
	}
	return nil
}

// waitLive waits, when vm runs an instance that has the BMC's drive,
// until done holds for that instance (a hot-plug or unplug reached the
// guest), bounded by Wait. Without such an instance the change waits for
// the next start and waitLive returns at once.
func (b *Backend) waitLive(ctx context.Context, vm *kubevirtv1.VirtualMachine, what string, done func(*kubevirtv1.VirtualMachineInstance) bool) error {
	return b.wait(ctx, vm, what, func(e *entry) bool {
		vmi := e.vmi
		if vmi == nil || vmi.IsFinal() || vmi.DeletionTimestamp != nil || vmi.Status.Phase != kubevirtv1.Running ||
			!slices.ContainsFunc(vmi.Spec.Domain.Devices.Disks, func(d kubevirtv1.Disk) bool { return d.Name == mediaDisk && d.CDRom != nil }) {
			return true
		}
		return done(vmi)
	})
}

// importImage makes the DataVolume of vm's CD from src and waits until
// CDI imported it: Succeeded. An import CDI fails (phase Failed) or keeps
// failing (MaxImportRestarts restarts of its importer) ends with CDI's
// message, one that does not end within ImportWait with that; the
// DataVolume is deleted then, and when ctx ends (an eject).
func (b *Backend) importImage(ctx context.Context, vm *kubevirtv1.VirtualMachine, src string, size int64) (string, error) {
	name := dataVolumeName(vm.Name)
	// The PVC gets the image's size rounded up to MiB; CDI adds its
	// file-system overhead on top (the storage API).
	mib := (size + 1<<20 - 1) >> 20
	dv := &cdiv1.DataVolume{
		TypeMeta: metav1.TypeMeta{APIVersion: cdiv1.SchemeGroupVersion.String(), Kind: "DataVolume"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: vm.Namespace,
			Labels:      map[string]string{LabelMedia: string(machine.SlotCD), LabelMediaVM: string(vm.UID), "app.kubernetes.io/managed-by": "vbmcd"},
			Annotations: map[string]string{annImmediateBinding: "true"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: kubevirtv1.SchemeGroupVersion.String(), Kind: "VirtualMachine", Name: vm.Name, UID: vm.UID,
			}},
		},
		Spec: cdiv1.DataVolumeSpec{
			Source: &cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: b.cfg.Images.Serve(src)}},
			Storage: &cdiv1.StorageSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceStorage: *resource.NewQuantity(max(mib, 1)<<20, resource.BinarySI)}},
			},
		},
	}
	fail := func(err error) (string, error) {
		b.cfg.Images.Stop(src)
		return "", err
	}
	// DataVolumes of inserts that did not finish (vbmcd stopped while CDI
	// imported) go first, unless an instance uses them or an import of
	// this process prepared them.
	list := &cdiv1.DataVolumeList{}
	if err := b.cdi.Get().Namespace(vm.Namespace).Resource("datavolumes").Param("labelSelector", LabelMediaVM+"="+string(vm.UID)).Do(ctx).Into(list); err != nil {
		return fail(apiError("list DataVolumes of "+vm.Name, err))
	}
	rec, _ := mediaOf(vm)
	for _, old := range list.Items {
		if old.Name != rec.DataVolume && !b.preparedDV(old.Name) && !b.inUse(vm, old.Name) {
			b.deleteDataVolume(ctx, vm.Namespace, old.Name)
		}
	}
	created := &cdiv1.DataVolume{}
	if err := b.cdi.Post().Namespace(vm.Namespace).Resource("datavolumes").Body(dv).Do(ctx).Into(created); err != nil {
		return fail(apiError("create DataVolume "+name, err))
	}
	gone := func() { b.deleteDataVolume(context.WithoutCancel(ctx), vm.Namespace, name) }
	wctx, cancel := context.WithTimeout(ctx, b.cfg.ImportWait)
	defer cancel()
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	cur := &cdiv1.DataVolume{}
	for {
		got := &cdiv1.DataVolume{}
		err := b.cdi.Get().Namespace(vm.Namespace).Resource("datavolumes").Name(name).Do(wctx).Into(got)
		if err == nil {
			cur = got
		}
		switch {
		case err == nil && cur.UID != created.UID:
			return fail(fmt.Errorf("%w: DataVolume %s was replaced by someone else", machine.ErrConflict, name))
		case err == nil && cur.Status.Phase == cdiv1.Succeeded:
			return name, nil
		case err == nil && cur.Status.Phase == cdiv1.Failed:
			gone()
			return fail(&machine.MediaError{Kind: machine.MediaFailed, Image: src, Err: fmt.Errorf("CDI failed to import DataVolume %s: %s", name, dvReason(cur))})
		case err == nil && cur.Status.RestartCount >= MaxImportRestarts:
			gone()
			return fail(&machine.MediaError{Kind: machine.MediaFailed, Image: src, Err: fmt.Errorf("CDI restarted the importer of DataVolume %s %d times: %s",
				name, cur.Status.RestartCount, dvReason(cur))})
		case apierrors.IsNotFound(err):
			return fail(fmt.Errorf("%w: DataVolume %s was deleted while CDI imported it", machine.ErrConflict, name))
		case err != nil && wctx.Err() == nil:
			b.log.Debug("reading DataVolume", zap.Error(err))
		}
		select {
		case <-wctx.Done():
			gone()
			if ctx.Err() != nil {
				return fail(fmt.Errorf("import of DataVolume %s stopped: %w", name, ctx.Err()))
			}
			return fail(fmt.Errorf("%w: CDI did not import DataVolume %s within %s (phase %s, progress %s)", machine.ErrUnavailable, name, b.cfg.ImportWait, cur.Status.Phase, cur.Status.Progress))
		case <-t.C:
		}
	}
}

// preparedDV reports whether DataVolume name is one PrepareMedia imported
// and SetMedia has not taken yet.
func (b *Backend) preparedDV(name string) bool {
	b.prepared.mu.Lock()
	defer b.prepared.mu.Unlock()
	for _, p := range b.prepared.m {
		if p.dv == name {
			return true
		}
	}
	return false
}

// inUse reports whether vm's instance has DataVolume name.
func (b *Backend) inUse(vm *kubevirtv1.VirtualMachine, name string) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	e := b.entries[SystemName(vm.Namespace, vm.Name)]
	return e != nil && e.vmi != nil && hasVolume(&e.vmi.Spec, name)
}

// dvReason is CDI's message of a DataVolume: that of its Running
// condition (the importer's), else of any condition, else its phase.
func dvReason(dv *cdiv1.DataVolume) string {
	for _, c := range dv.Status.Conditions {
		if c.Type == cdiv1.DataVolumeRunning && c.Message != "" {
			return c.Message
		}
	}
	for _, c := range dv.Status.Conditions {
		if c.Message != "" {
			return c.Message
		}
	}
	return string(dv.Status.Phase)
}

// deleteDataVolume deletes a DataVolume vbmcd made (its label says so);
// one that is gone already is fine.
func (b *Backend) deleteDataVolume(ctx context.Context, ns, name string) {
	cur := &cdiv1.DataVolume{}
	if err := b.cdi.Get().Namespace(ns).Resource("datavolumes").Name(name).Do(ctx).Into(cur); err != nil {
		return
	}
	if _, ours := cur.Labels[LabelMedia]; !ours {
		return
	}
	bg := metav1.DeletePropagationBackground
	err := b.cdi.Delete().Namespace(ns).Resource("datavolumes").Name(name).
		Body(&metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cur.UID}, PropagationPolicy: &bg}).Do(ctx).Error()
	if err != nil && !apierrors.IsNotFound(err) {
		b.log.Warn("deleting a virtual media DataVolume failed", zap.String("datavolume", ns+"/"+name), zap.Error(err))
	}
}

// eject takes vbmcd's medium out of the VM's template (the drive too when
// vbmcd added it with the medium) and deletes its DataVolume. With
// hot-plug, a running instance gives the volume up live, and eject returns
// once it did; without, a running instance keeps the CD until it ends (its
// PVC stays until then, by Kubernetes' PVC protection).
func (b *Backend) eject(ctx context.Context, vm *kubevirtv1.VirtualMachine) error {
	rec, ok := mediaOf(vm)
	if !ok {
		return nil
	}
	err := b.patchVM(ctx, vm, func(c *kubevirtv1.VirtualMachine) error {
		spec := specOf(c)
		if rec.AddedDisk {
			spec.Domain.Devices.Disks = slices.DeleteFunc(spec.Domain.Devices.Disks, func(d kubevirtv1.Disk) bool { return d.Name == rec.Disk })
		}
		spec.Volumes = slices.DeleteFunc(spec.Volumes, func(v kubevirtv1.Volume) bool { return v.Name == rec.Disk })
		delete(c.Annotations, AnnotationMedia)
		return nil
	})
	if err != nil {
		return err
	}
	if rec.Hotplug {
		err = b.waitLive(ctx, vm, "unplug the CD", func(vmi *kubevirtv1.VirtualMachineInstance) bool {
			return !hasVolume(&vmi.Spec, rec.DataVolume) && !slices.ContainsFunc(vmi.Status.VolumeStatus, func(s kubevirtv1.VolumeStatus) bool { return s.Name == rec.Disk })
		})
	}
	b.deleteDataVolume(ctx, vm.Namespace, rec.DataVolume)
	if b.cfg.Images != nil {
		b.cfg.Images.Stop(rec.Path)
	}
	return err
}
