package kubevirt

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
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
// DataVolume imports it from there into a PVC, and a SATA CD-ROM disk on
// the VM's template takes the DataVolume. KubeVirt hot-plugs disks and
// LUNs (the addvolume subresource, SCSI) but not CD-ROMs, so the CD comes
// with the next start of the instance; until then the member reads
// Inserted with ConnectedVia NotConnected (machine.Disk.NextStart).
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
	// mediaDisk is the name of the CD-ROM disk and volume vbmcd adds to a
	// VM that has none.
	mediaDisk = "bmc-cd"
	// annImmediateBinding asks CDI to bind the DataVolume's PVC and import
	// at once, also on a storage class that waits for the first consumer:
	// vbmcd attaches the volume only once it is imported.
	annImmediateBinding = "cdi.kubevirt.io/storage.bind.immediate.requested"
)

// mediaRecord is what AnnotationMedia holds.
type mediaRecord struct {
	Disk       string `json:"disk"`       // the CD-ROM disk (and volume) name
	AddedDisk  bool   `json:"addedDisk"`  // vbmcd added the disk, and removes it on eject
	DataVolume string `json:"dataVolume"` // the DataVolume vbmcd made
	Path       string `json:"path"`       // the local file it was imported from (vbmcd's cache)
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

// mediaDrives shows vbmcd's medium in the CD drive of m (Source is the
// cached file it came from, so the model sees its insert; NextStart when
// the running instance does not have it yet), and gives a VM without a CD
// drive an empty one: a BMC always has its virtual drive, and an insert
// adds it to the VM.
func mediaDrives(m *machine.Machine, vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) {
	rec, ok := mediaOf(vm)
	spec := specOf(vm)
	cd := -1
	for i := range m.Disks {
		if m.Disks[i].Device == machine.DeviceCDROM {
			cd = i
			break
		}
	}
	if cd < 0 {
		m.Disks = append(m.Disks, machine.Disk{ID: mediaDisk, Device: machine.DeviceCDROM, Bus: string(kubevirtv1.DiskBusSATA), ReadOnly: true})
		return
	}
	if !ok || m.Disks[cd].ID != rec.Disk {
		return
	}
	for _, v := range spec.Volumes {
		if v.Name == rec.Disk && v.DataVolume != nil && v.DataVolume.Name == rec.DataVolume {
			m.Disks[cd].Source = rec.Path
			m.Disks[cd].Volume = "datavolumes/" + vm.Namespace + "/" + rec.DataVolume
		}
	}
	if m.Disks[cd].Source != "" && vmi != nil && m.Power != machine.PowerOff {
		m.Disks[cd].NextStart = !slices.ContainsFunc(vmi.Spec.Volumes, func(v kubevirtv1.Volume) bool {
			return v.DataVolume != nil && v.DataVolume.Name == rec.DataVolume
		})
	}
}

// SetMedia implements machine.Backend for the CD: src is imported into a
// DataVolume through the ImageServer and the VM's CD takes it (from the
// next start of an instance); "" detaches it and deletes the DataVolume.
// The removable member has no KubeVirt counterpart.
func (b *Backend) SetMedia(ctx context.Context, id string, slot machine.MediaSlot, src string) error {
	if slot != machine.SlotCD {
		return fmt.Errorf("%w: virtual media %s on KubeVirt (only the CD is mapped, to a DataVolume)", machine.ErrUnsupported, slot)
	}
	vm, _, _, err := b.current(id)
	if err != nil {
		return err
	}
	if src == "" {
		return b.eject(ctx, vm)
	}
	if b.cfg.Images == nil {
		return fmt.Errorf("%w: virtual media on KubeVirt needs vbmcd's image server (--kubevirt-media-addr), which CDI imports the images from", machine.ErrUnsupported)
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
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	dv, err := b.importImage(ctx, vm, src, fi.Size())
	if err != nil {
		b.cfg.Images.Stop(src)
		return err
	}
	err = b.patchVM(ctx, vm, func(c *kubevirtv1.VirtualMachine) {
		spec := specOf(c)
		rec := mediaRecord{Disk: mediaDisk, DataVolume: dv, Path: src}
		if i := slices.IndexFunc(spec.Domain.Devices.Disks, func(d kubevirtv1.Disk) bool { return d.CDRom != nil }); i >= 0 {
			rec.Disk = spec.Domain.Devices.Disks[i].Name // the VM's own drive, without a volume
		} else {
			rec.AddedDisk = true
			ro := true
			spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, kubevirtv1.Disk{Name: mediaDisk,
				DiskDevice: kubevirtv1.DiskDevice{CDRom: &kubevirtv1.CDRomTarget{Bus: kubevirtv1.DiskBusSATA, ReadOnly: &ro}}})
		}
		spec.Volumes = slices.DeleteFunc(spec.Volumes, func(v kubevirtv1.Volume) bool { return v.Name == rec.Disk })
		spec.Volumes = append(spec.Volumes, kubevirtv1.Volume{Name: rec.Disk,
			VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: dv}}})
		raw, _ := json.Marshal(rec)
		c.Annotations[AnnotationMedia] = string(raw)
		// A boot override set before the insert puts the new CD in its place.
		if st, err := settingsOf(c); err == nil && st.Boot.Effective() != machine.BootNone && st.Boot.Effective() != "" {
			applyBoot(spec, st.Boot.Effective(), ownOrder(c))
		}
	})
	if err != nil {
		b.deleteDataVolume(context.WithoutCancel(ctx), vm.Namespace, dv)
		b.cfg.Images.Stop(src)
	}
	return err
}

// importImage makes the DataVolume of vm's CD from src and waits until
// CDI imported it (at most ImportWait). A DataVolume of that name left
// by an insert that did not finish is replaced.
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
	// DataVolumes of inserts that did not finish (vbmcd stopped while CDI
	// imported) go first; the CD holds none now.
	list := &cdiv1.DataVolumeList{}
	if err := b.cdi.Get().Namespace(vm.Namespace).Resource("datavolumes").Param("labelSelector", LabelMediaVM+"="+string(vm.UID)).Do(ctx).Into(list); err != nil {
		return "", apiError("list DataVolumes of "+vm.Name, err)
	}
	for _, old := range list.Items {
		b.deleteDataVolume(ctx, vm.Namespace, old.Name)
	}
	created := &cdiv1.DataVolume{}
	if err := b.cdi.Post().Namespace(vm.Namespace).Resource("datavolumes").Body(dv).Do(ctx).Into(created); err != nil {
		return "", apiError("create DataVolume "+name, err)
	}
	wctx, cancel := context.WithTimeout(ctx, b.cfg.ImportWait)
	defer cancel()
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		cur := &cdiv1.DataVolume{}
		err := b.cdi.Get().Namespace(vm.Namespace).Resource("datavolumes").Name(name).Do(wctx).Into(cur)
		switch {
		case err == nil && cur.UID != created.UID:
			return "", fmt.Errorf("%w: DataVolume %s was replaced by someone else", machine.ErrConflict, name)
		case err == nil && cur.Status.Phase == cdiv1.Succeeded:
			return name, nil
		case err == nil && cur.Status.Phase == cdiv1.Failed:
			b.deleteDataVolume(ctx, vm.Namespace, name)
			return "", &machine.MediaError{Kind: machine.MediaFailed, Image: src, Err: fmt.Errorf("CDI failed to import DataVolume %s: %s", name, dvReason(cur))}
		case apierrors.IsNotFound(err):
			return "", fmt.Errorf("%w: DataVolume %s was deleted while CDI imported it", machine.ErrConflict, name)
		case err != nil && wctx.Err() == nil:
			b.log.Debug("reading DataVolume", zap.Error(err))
		}
		select {
		case <-wctx.Done():
			b.deleteDataVolume(context.WithoutCancel(ctx), vm.Namespace, name)
			return "", fmt.Errorf("%w: CDI did not import DataVolume %s within %s (phase %s)", machine.ErrUnavailable, name, b.cfg.ImportWait, cur.Status.Phase)
		case <-t.C:
		}
	}
}

func dvReason(dv *cdiv1.DataVolume) string {
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

// eject takes vbmcd's medium out of the VM's template (the disk too when
// vbmcd added it) and deletes its DataVolume. A running instance keeps the
// CD until it ends; its PVC stays until then (Kubernetes' PVC protection).
func (b *Backend) eject(ctx context.Context, vm *kubevirtv1.VirtualMachine) error {
	rec, ok := mediaOf(vm)
	if !ok {
		return nil
	}
	err := b.patchVM(ctx, vm, func(c *kubevirtv1.VirtualMachine) {
		spec := specOf(c)
		if rec.AddedDisk {
			spec.Domain.Devices.Disks = slices.DeleteFunc(spec.Domain.Devices.Disks, func(d kubevirtv1.Disk) bool { return d.Name == rec.Disk })
		}
		spec.Volumes = slices.DeleteFunc(spec.Volumes, func(v kubevirtv1.Volume) bool { return v.Name == rec.Disk })
		delete(c.Annotations, AnnotationMedia)
	})
	if err != nil {
		return err
	}
	b.deleteDataVolume(ctx, vm.Namespace, rec.DataVolume)
	if b.cfg.Images != nil {
		b.cfg.Images.Stop(rec.Path)
	}
	return nil
}
