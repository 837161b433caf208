package kubevirt

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/bmlab/bmlab/internal/machine"
)

func u(n uint) *uint { return &n }

func spec() *kubevirtv1.VirtualMachineInstanceSpec {
	return &kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{
		Disks: []kubevirtv1.Disk{
			{Name: "root", BootOrder: u(1), DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{}}},
			{Name: "data", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{}}},
			{Name: "cd", DiskDevice: kubevirtv1.DiskDevice{CDRom: &kubevirtv1.CDRomTarget{}}},
		},
		Interfaces: []kubevirtv1.Interface{{Name: "prov", BootOrder: u(2)}},
	}}}
}

// TestApplyBoot: an override puts its kind's devices first and keeps the
// others' relative order; None restores the VM's own order exactly.
func TestApplyBoot(t *testing.T) {
	own := bootOrders(spec())
	for _, tc := range []struct {
		target machine.BootSource
		want   map[string]uint
	}{
		{machine.BootCd, map[string]uint{"disk/cd": 1, "disk/root": 2, "iface/prov": 3}},
		{machine.BootPxe, map[string]uint{"iface/prov": 1, "disk/root": 2}},
		{machine.BootHdd, map[string]uint{"disk/root": 1, "disk/data": 2, "iface/prov": 3}},
		{machine.BootNone, map[string]uint{"disk/root": 1, "iface/prov": 2}},
	} {
		s := spec()
		applyBoot(s, tc.target, own)
		if diff := cmp.Diff(tc.want, bootOrders(s)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.target, diff)
		}
		if tc.target != machine.BootNone && firstBoot(s) != tc.target {
			t.Errorf("%s: first boot %s", tc.target, firstBoot(s))
		}
		applyBoot(s, machine.BootNone, own)
		if diff := cmp.Diff(own, bootOrders(s)); diff != "" {
			t.Errorf("%s then None does not restore the own order (-want +got):\n%s", tc.target, diff)
		}
	}
}

// TestPowerOf maps printableStatus and the instance phase.
func TestPowerOf(t *testing.T) {
	running := &kubevirtv1.VirtualMachineInstance{Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running}}
	pending := &kubevirtv1.VirtualMachineInstance{}
	for _, tc := range []struct {
		ps   kubevirtv1.VirtualMachinePrintableStatus
		vmi  *kubevirtv1.VirtualMachineInstance
		want machine.PowerState
	}{
		{kubevirtv1.VirtualMachineStatusStopped, nil, machine.PowerOff},
		{kubevirtv1.VirtualMachineStatusStarting, pending, machine.PowerPoweringOn},
		{kubevirtv1.VirtualMachineStatusStarting, running, machine.PowerOn},
		{kubevirtv1.VirtualMachineStatusRunning, running, machine.PowerOn},
		{kubevirtv1.VirtualMachineStatusStopping, running, machine.PowerPoweringOff},
		{kubevirtv1.VirtualMachineStatusTerminating, nil, machine.PowerPoweringOff},
		{kubevirtv1.VirtualMachineStatusProvisioning, nil, machine.PowerPoweringOn},
		{"", nil, machine.PowerOff},
	} {
		vm := &kubevirtv1.VirtualMachine{Status: kubevirtv1.VirtualMachineStatus{PrintableStatus: tc.ps}}
		if got := powerOf(vm, tc.vmi); got != tc.want {
			t.Errorf("%q, vmi %v: %s, want %s", tc.ps, tc.vmi != nil, got, tc.want)
		}
	}
}

// TestFirmwareUUID: the spec's UUID, else KubeVirt's derivation from the
// name (the value virt-controller's firmware controller writes; the want
// is Python's uuid.uuid5(UUID("6a1a24a1-4061-4607-8bf4-a3963d0c5895"),
// "testvm"), KubeVirt's name space).
func TestFirmwareUUID(t *testing.T) {
	vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "testvm"}}
	if got, want := FirmwareUUID(vm), "5a9fc181-957e-5c32-9e5a-2de5e9673531"; got != want {
		t.Errorf("derived UUID %s, want %s", got, want)
	}
	vm.Spec.Template = &kubevirtv1.VirtualMachineInstanceTemplateSpec{}
	vm.Spec.Template.Spec.Domain.Firmware = &kubevirtv1.Firmware{UUID: "0D7C3C2A-0000-4000-8000-000000000001"}
	if got := FirmwareUUID(vm); got != "0d7c3c2a-0000-4000-8000-000000000001" {
		t.Errorf("spec UUID: got %s", got)
	}
}

// TestStale: a running instance is stale when its boot order or firmware
// differ from the VM's spec.
func TestStale(t *testing.T) {
	vm := &kubevirtv1.VirtualMachine{Spec: kubevirtv1.VirtualMachineSpec{Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: *spec()}}}
	vmi := &kubevirtv1.VirtualMachineInstance{Spec: *spec()}
	if stale(vm, vmi) {
		t.Fatal("same spec reads stale")
	}
	applyBoot(&vm.Spec.Template.Spec, machine.BootCd, bootOrders(spec()))
	if !stale(vm, vmi) {
		t.Fatal("changed boot order reads fresh")
	}
	vm.Spec.Template.Spec = *spec()
	applyFirmware(&vm.Spec.Template.Spec, machine.BootModeUEFI, false)
	if !stale(vm, vmi) {
		t.Fatal("changed firmware reads fresh")
	}
}

// TestPatchOps: the JSON patch Save sends, applied to the VM as it was,
// gives the VM as Save made it, and touches nothing else (an unknown field
// of a newer KubeVirt survives, which a whole update would drop).
func TestPatchOps(t *testing.T) {
	orig := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "vm", ResourceVersion: "42"},
		Spec:       kubevirtv1.VirtualMachineSpec{Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: *spec()}},
	}
	mod := orig.DeepCopy()
	mod.Annotations = map[string]string{AnnotationSettings: `{"x":1}`, AnnotationBootOrder: `{"disk/root":1}`}
	applyBoot(&mod.Spec.Template.Spec, machine.BootCd, bootOrders(spec()))
	applyFirmware(&mod.Spec.Template.Spec, machine.BootModeUEFI, true)
	ops := patchOps(orig, mod)
	raw, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	p, err := jsonpatch.DecodePatch(raw)
	if err != nil {
		t.Fatal(err)
	}
	withUnknown := func(vm *kubevirtv1.VirtualMachine) []byte {
		var m map[string]any
		b, _ := json.Marshal(vm)
		json.Unmarshal(b, &m)
		m["spec"].(map[string]any)["fromNewerKubeVirt"] = "kept"
		b, _ = json.Marshal(m)
		return b
	}
	got, err := p.Apply(withUnknown(orig))
	if err != nil {
		t.Fatalf("apply %s: %v", raw, err)
	}
	var gotV, wantV any
	json.Unmarshal(got, &gotV)
	json.Unmarshal(withUnknown(mod), &wantV)
	if diff := cmp.Diff(wantV, gotV); diff != "" {
		t.Errorf("patched VM (-want +got):\n%s\npatch: %s", diff, raw)
	}
	if ops[0].Op != "test" || ops[0].Path != "/metadata/resourceVersion" || ops[0].Value != "42" {
		t.Errorf("the patch is not guarded by the resourceVersion: %+v", ops[0])
	}
}

// applyOps applies patchOps(orig, mod) to orig and compares with mod.
func applyOps(t *testing.T, orig, mod *kubevirtv1.VirtualMachine) {
	t.Helper()
	raw, err := json.Marshal(patchOps(orig, mod))
	if err != nil {
		t.Fatal(err)
	}
	p, err := jsonpatch.DecodePatch(raw)
	if err != nil {
		t.Fatal(err)
	}
	src, _ := json.Marshal(orig)
	got, err := p.Apply(src)
	if err != nil {
		t.Fatalf("apply %s: %v", raw, err)
	}
	var gotV, wantV any
	json.Unmarshal(got, &gotV)
	want, _ := json.Marshal(mod)
	json.Unmarshal(want, &wantV)
	if diff := cmp.Diff(wantV, gotV); diff != "" {
		t.Errorf("patched VM (-want +got):\n%s\npatch: %s", diff, raw)
	}
}

// TestPatchOpsMedia: an insert adds the CD disk, its DataVolume volume
// (to a VM with no volumes at all) and the media annotation with a boot
// order change in the same patch; an eject removes a disk from the middle
// of the list, its volume and the annotation. Failed before disks were
// matched by name (an added disk indexed past the original list).
func TestPatchOpsMedia(t *testing.T) {
	orig := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "vm", ResourceVersion: "7", Annotations: map[string]string{AnnotationSettings: "{}"}},
		Spec:       kubevirtv1.VirtualMachineSpec{Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: *spec()}},
	}
	orig.Spec.Template.Spec.Domain.Devices.Disks = orig.Spec.Template.Spec.Domain.Devices.Disks[:2] // no CD
	ins := orig.DeepCopy()
	s := &ins.Spec.Template.Spec
	s.Domain.Devices.Disks = append(s.Domain.Devices.Disks, kubevirtv1.Disk{Name: mediaDisk, DiskDevice: kubevirtv1.DiskDevice{CDRom: &kubevirtv1.CDRomTarget{Bus: kubevirtv1.DiskBusSATA}}})
	s.Volumes = []kubevirtv1.Volume{{Name: mediaDisk, VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: "vm-bmc-cd"}}}}
	ins.Annotations[AnnotationMedia] = `{"disk":"bmc-cd"}`
	applyBoot(s, machine.BootCd, bootOrders(specOf(orig)))
	applyOps(t, orig, ins)

	ins.ResourceVersion = "8"
	// Eject, with the CD between two disks and another volume after it.
	ins.Spec.Template.Spec.Domain.Devices.Disks = append(ins.Spec.Template.Spec.Domain.Devices.Disks, kubevirtv1.Disk{Name: "late", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{}}})
	ins.Spec.Template.Spec.Volumes = append(ins.Spec.Template.Spec.Volumes, kubevirtv1.Volume{Name: "late", VolumeSource: kubevirtv1.VolumeSource{HostDisk: &kubevirtv1.HostDisk{Path: "/x"}}})
	ej := ins.DeepCopy()
	s = &ej.Spec.Template.Spec
	s.Domain.Devices.Disks = slices.Delete(s.Domain.Devices.Disks, 2, 3)
	s.Volumes = s.Volumes[1:]
	delete(ej.Annotations, AnnotationMedia)
	applyOps(t, ins, ej)
}

// TestMediaDrives: a VM without a CD shows an empty virtual drive; vbmcd's
// DataVolume shows as the cached file it came from, NextStart while the
// running instance does not have it, connected once it does.
func TestMediaDrives(t *testing.T) {
	vm := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "lab"},
		Spec:       kubevirtv1.VirtualMachineSpec{Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: *spec()}},
	}
	s := &vm.Spec.Template.Spec
	s.Domain.Devices.Disks = s.Domain.Devices.Disks[:2]
	m := snapshot(vm, nil)
	if d := m.Disks[len(m.Disks)-1]; d.Device != machine.DeviceCDROM || d.Source != "" || d.ID != mediaDisk {
		t.Errorf("a VM without a CD: last drive %+v, want the empty virtual CD", d)
	}
	vmi := &kubevirtv1.VirtualMachineInstance{Spec: *s.DeepCopy(), Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running}}
	s.Domain.Devices.Disks = append(s.Domain.Devices.Disks, kubevirtv1.Disk{Name: mediaDisk, DiskDevice: kubevirtv1.DiskDevice{CDRom: &kubevirtv1.CDRomTarget{}}})
	s.Volumes = append(s.Volumes, kubevirtv1.Volume{Name: mediaDisk, VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: "vm-bmc-cd"}}})
	vm.Annotations = map[string]string{AnnotationMedia: `{"disk":"bmc-cd","addedDisk":true,"dataVolume":"vm-bmc-cd","path":"/cache/a.iso"}`}
	cd := func(m *machine.Machine) machine.Disk {
		for _, d := range m.Disks {
			if d.Device == machine.DeviceCDROM {
				return d
			}
		}
		t.Fatal("no CD drive")
		return machine.Disk{}
	}
	if d := cd(snapshot(vm, vmi)); d.Source != "/cache/a.iso" || !d.NextStart || d.Volume != "datavolumes/lab/vm-bmc-cd" {
		t.Errorf("inserted while running: %+v, want the cached file, NextStart, the DataVolume", d)
	}
	if d := cd(snapshot(vm, nil)); d.Source != "/cache/a.iso" || d.NextStart {
		t.Errorf("inserted while off: %+v, want the cached file, not NextStart", d)
	}
	vmi.Spec = *s.DeepCopy()
	if d := cd(snapshot(vm, vmi)); d.Source != "/cache/a.iso" || d.NextStart {
		t.Errorf("instance started with it: %+v, want connected", d)
	}
}

// TestMediaDrivesHotplug: the BMC's drive is the first CD-ROM even when
// the VM has a CD-ROM of its own; a hot-plugged medium is connected once
// the instance reports its volume Ready, not before.
func TestMediaDrivesHotplug(t *testing.T) {
	vm := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "lab"},
		Spec:       kubevirtv1.VirtualMachineSpec{Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: *spec()}},
	}
	s := &vm.Spec.Template.Spec
	if m := snapshot(vm, nil); m.Disks[2].ID != mediaDisk || m.Disks[3].ID != "cd" {
		t.Fatalf("drives %+v: want the BMC's empty drive before the VM's own CD-ROM", m.Disks)
	}
	addDrive(s, mediaDisk)
	s.Volumes = append(s.Volumes, kubevirtv1.Volume{Name: mediaDisk, VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: "dv1", Hotpluggable: true}}})
	vm.Annotations = map[string]string{AnnotationMedia: `{"disk":"bmc-cd","dataVolume":"dv1","path":"/cache/a.iso","hotplug":true}`}
	vmi := &kubevirtv1.VirtualMachineInstance{Spec: *s.DeepCopy(), Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running,
		VolumeStatus: []kubevirtv1.VolumeStatus{{Name: mediaDisk, Phase: kubevirtv1.HotplugVolumeAttachedToNode}}}}
	m := snapshot(vm, vmi)
	if d := m.Disks[2]; d.ID != mediaDisk || d.Source != "/cache/a.iso" || !d.NextStart {
		t.Errorf("hot-plug under way: %+v, want the medium, not connected yet", d)
	}
	vmi.Status.VolumeStatus[0].Phase = kubevirtv1.VolumeReady
	if d := snapshot(vm, vmi).Disks[2]; d.Source != "/cache/a.iso" || d.NextStart {
		t.Errorf("hot-plugged: %+v, want connected", d)
	}
}

// TestSetBoot: the VM's own order is recorded and restored; an owner's
// edit of the order after vbmcd wrote it becomes the own order (followed,
// not reverted); a malformed record is an error that changes nothing; the
// record of an older vbmcd (the own order alone) still reads.
func TestSetBoot(t *testing.T) {
	vm := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "lab"},
		Spec:       kubevirtv1.VirtualMachineSpec{Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: *spec()}},
	}
	own := bootOrders(spec())
	if err := setBoot(vm, machine.BootCd); err != nil {
		t.Fatal(err)
	}
	if firstBoot(specOf(vm)) != machine.BootCd {
		t.Fatalf("Cd override: first boot %s", firstBoot(specOf(vm)))
	}
	if err := setBoot(vm, machine.BootNone); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(own, bootOrders(specOf(vm))); diff != "" {
		t.Fatalf("override ended: own order not restored (-want +got):\n%s", diff)
	}
	// The owner puts the NIC first.
	specOf(vm).Domain.Devices.Interfaces[0].BootOrder = u(1)
	specOf(vm).Domain.Devices.Disks[0].BootOrder = u(2)
	edited := bootOrders(specOf(vm))
	if err := setBoot(vm, machine.BootHdd); err != nil {
		t.Fatal(err)
	}
	if err := setBoot(vm, machine.BootNone); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(edited, bootOrders(specOf(vm))); diff != "" {
		t.Errorf("the owner's edit was reverted (-want +got):\n%s", diff)
	}

	before := vm.DeepCopy()
	vm.Annotations[AnnotationBootOrder] = `{"own":`
	before.Annotations[AnnotationBootOrder] = vm.Annotations[AnnotationBootOrder]
	err := setBoot(vm, machine.BootCd)
	if !errors.Is(err, machine.ErrConflict) || !strings.Contains(err.Error(), AnnotationBootOrder) {
		t.Errorf("malformed record: %v, want an ErrConflict naming the annotation", err)
	}
	if diff := cmp.Diff(before, vm); diff != "" {
		t.Errorf("a malformed record changed the VM (-want +got):\n%s", diff)
	}

	vm.Annotations[AnnotationBootOrder] = `{"disk/root":1,"iface/prov":2}` // an older vbmcd's
	if err := setBoot(vm, machine.BootNone); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(own, bootOrders(specOf(vm))); diff != "" {
		t.Errorf("older record: own order not restored (-want +got):\n%s", diff)
	}
}

// TestPatchOpsRunStrategy: moving a VM to runStrategy Manual replaces the
// strategy, or drops the deprecated running field for it.
func TestPatchOpsRunStrategy(t *testing.T) {
	halted, manual := kubevirtv1.RunStrategyHalted, kubevirtv1.RunStrategyManual
	yes := true
	for _, orig := range []*kubevirtv1.VirtualMachine{
		{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: "1"}, Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &halted}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b", ResourceVersion: "1"}, Spec: kubevirtv1.VirtualMachineSpec{Running: &yes}},
		{ObjectMeta: metav1.ObjectMeta{Name: "c", ResourceVersion: "1"}},
	} {
		mod := orig.DeepCopy()
		mod.Spec.RunStrategy, mod.Spec.Running = &manual, nil
		applyOps(t, orig, mod)
	}
}
