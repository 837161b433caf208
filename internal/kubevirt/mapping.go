package kubevirt

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/uuid"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/bmlab/bmlab/internal/machine"
)

// Annotations on a VirtualMachine that hold what KubeVirt does not.
const (
	// AnnotationSettings is the BMC's state (machine.Settings as JSON):
	// boot override, BIOS settings current and pending, firmware versions,
	// accounts, secure boot keys.
	AnnotationSettings = "bmlab.io/bmc-settings"
	// AnnotationBootOrder is the VM's own boot order and the order vbmcd
	// last wrote (bootOrderRecord as JSON): the own order is restored when
	// an override ends, and a spec whose order differs from the one vbmcd
	// wrote was edited by the VM's owner, whose order becomes the own one.
	AnnotationBootOrder = "bmlab.io/boot-order"
)

// legacyUUIDSpace is the name space KubeVirt's virt-controller derives a
// VM's firmware UUID from when the spec has none
// (pkg/virt-controller/watch/vm/firmware.go, CalculateLegacyUUID).
var legacyUUIDSpace = uuid.MustParse("6a1a24a1-4061-4607-8bf4-a3963d0c5895")

// FirmwareUUID returns the firmware UUID of vm: the spec's, else the one
// KubeVirt derives from its name.
func FirmwareUUID(vm *kubevirtv1.VirtualMachine) string {
	if t := vm.Spec.Template; t != nil && t.Spec.Domain.Firmware != nil && t.Spec.Domain.Firmware.UUID != "" {
		return strings.ToLower(string(t.Spec.Domain.Firmware.UUID))
	}
	return uuid.NewSHA1(legacyUUIDSpace, []byte(vm.Name)).String()
}

// SystemName is how a VM is addressed: <namespace>.<name>.
func SystemName(namespace, name string) string { return namespace + "." + name }

// settingsOf reads the BMC state from vm's annotation; a VM without one
// gets the defaults for the firmware its spec asks for.
func settingsOf(vm *kubevirtv1.VirtualMachine) (machine.Settings, error) {
	if s, ok := vm.Annotations[AnnotationSettings]; ok {
		var st machine.Settings
		if err := json.Unmarshal([]byte(s), &st); err != nil {
			return machine.DefaultSettings(firmwareOf(specOf(vm))), fmt.Errorf("annotation %s: %w", AnnotationSettings, err)
		}
		return st, nil
	}
	return machine.DefaultSettings(firmwareOf(specOf(vm))), nil
}

func specOf(vm *kubevirtv1.VirtualMachine) *kubevirtv1.VirtualMachineInstanceSpec {
	if vm.Spec.Template == nil {
		return &kubevirtv1.VirtualMachineInstanceSpec{}
	}
	return &vm.Spec.Template.Spec
}

// firmwareOf returns the firmware a spec boots with: EFI (secure boot on
// unless the spec turns it off, as KubeVirt defaults it) or BIOS (the
// default).
func firmwareOf(s *kubevirtv1.VirtualMachineInstanceSpec) (machine.BootMode, bool) {
	fw := s.Domain.Firmware
	if fw == nil || fw.Bootloader == nil || fw.Bootloader.EFI == nil {
		return machine.BootModeLegacy, false
	}
	sb := fw.Bootloader.EFI.SecureBoot
	return machine.BootModeUEFI, sb == nil || *sb
}

// device kinds a boot override can put first.
func kindOfDisk(d kubevirtv1.Disk) machine.BootSource {
	switch {
	case d.CDRom != nil:
		return machine.BootCd
	case d.Disk != nil:
		return machine.BootHdd
	}
	return ""
}

// bootTarget reads the override a spec carries: the kind of the device
// with the lowest bootOrder, when that is not the VM's own order.
func firstBoot(s *kubevirtv1.VirtualMachineInstanceSpec) machine.BootSource {
	best, first := uint(0), machine.BootSource("")
	for _, d := range s.Domain.Devices.Disks {
		if d.BootOrder != nil && (first == "" || *d.BootOrder < best) {
			best, first = *d.BootOrder, kindOfDisk(d)
		}
	}
	for _, n := range s.Domain.Devices.Interfaces {
		if n.BootOrder != nil && (first == "" || *n.BootOrder < best) {
			best, first = *n.BootOrder, machine.BootPxe
		}
	}
	return first
}

// bootOrders returns the bootOrder of every disk and interface ("disk/NAME",
// "iface/NAME"; absent when unset).
func bootOrders(s *kubevirtv1.VirtualMachineInstanceSpec) map[string]uint {
	m := map[string]uint{}
	for _, d := range s.Domain.Devices.Disks {
		if d.BootOrder != nil {
			m["disk/"+d.Name] = *d.BootOrder
		}
	}
	for _, n := range s.Domain.Devices.Interfaces {
		if n.BootOrder != nil {
			m["iface/"+n.Name] = *n.BootOrder
		}
	}
	return m
}

// applyBoot sets the bootOrder of s's devices for target: the devices of
// that kind first (in their own order), then the others in own's order;
// target None restores own exactly. own is the VM's order without an
// override (bootOrders before the first one).
func applyBoot(s *kubevirtv1.VirtualMachineInstanceSpec, target machine.BootSource, own map[string]uint) {
	type dev struct {
		key  string
		kind machine.BootSource
		set  func(*uint)
	}
	var devs []dev
	for i := range s.Domain.Devices.Disks {
		d := &s.Domain.Devices.Disks[i]
		devs = append(devs, dev{"disk/" + d.Name, kindOfDisk(*d), func(o *uint) { d.BootOrder = o }})
	}
	for i := range s.Domain.Devices.Interfaces {
		n := &s.Domain.Devices.Interfaces[i]
		devs = append(devs, dev{"iface/" + n.Name, machine.BootPxe, func(o *uint) { n.BootOrder = o }})
	}
	if target == machine.BootNone || target == "" {
		for _, d := range devs {
			if o, ok := own[d.key]; ok {
				d.set(&o)
			} else {
				d.set(nil)
			}
		}
		return
	}
	// The target's devices, then the devices that had an order, by it; the
	// rest keep none. A device that had no order of its own but is of the
	// target's kind boots too (a CD with no bootOrder still boots Once Cd).
	rank := func(d dev) (int, uint) {
		o, ok := own[d.key]
		switch {
		case d.kind == target && ok:
			return 0, o
		case d.kind == target:
			return 1, 0
		case ok:
			return 2, o
		}
		return 3, 0
	}
	order := slices.Clone(devs)
	slices.SortStableFunc(order, func(a, b dev) int {
		ra, oa := rank(a)
		rb, ob := rank(b)
		if ra != rb {
			return ra - rb
		}
		return int(oa) - int(ob)
	})
	next := uint(1)
	for _, d := range order {
		if r, _ := rank(d); r == 3 {
			d.set(nil)
			continue
		}
		o := next
		d.set(&o)
		next++
	}
}

// bootOrderRecord is what AnnotationBootOrder holds.
type bootOrderRecord struct {
	Own     map[string]uint `json:"own"`
	Applied map[string]uint `json:"applied"`
}

// parseBootOrder reads AnnotationBootOrder. The record of vbmcd before
// this format (the own order alone, {"disk/root":1}) reads as Own with
// Applied unknown (nil).
func parseBootOrder(raw string) (bootOrderRecord, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &keys); err != nil {
		return bootOrderRecord{}, err
	}
	_, own := keys["own"]
	_, applied := keys["applied"]
	if !own && !applied {
		var legacy map[string]uint
		if err := json.Unmarshal([]byte(raw), &legacy); err != nil {
			return bootOrderRecord{}, fmt.Errorf("neither {\"own\":…,\"applied\":…} nor a device → bootOrder map: %w", err)
		}
		return bootOrderRecord{Own: legacy}, nil
	}
	var r bootOrderRecord
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return bootOrderRecord{}, err
	}
	if r.Own == nil {
		return bootOrderRecord{}, fmt.Errorf("no \"own\" order")
	}
	return r, nil
}

// setBoot sets the boot order of vm's devices for target (None: the VM's
// own order) and records the own order and the one it wrote in
// AnnotationBootOrder. The own order is the recorded one, unless the
// spec's order is not the one vbmcd last wrote: then the VM's owner
// edited it, and the spec's order as it is now becomes the own one (an
// edit is followed, not reverted). Without a record, the spec's order is
// the own one. A malformed record is an ErrConflict and nothing changes:
// vbmcd cannot know the VM's own order, and clearing every bootOrder would
// lose it.
func setBoot(vm *kubevirtv1.VirtualMachine, target machine.BootSource) error {
	spec := specOf(vm)
	cur := bootOrders(spec)
	rec := bootOrderRecord{Own: cur}
	if raw, ok := vm.Annotations[AnnotationBootOrder]; ok {
		r, err := parseBootOrder(raw)
		if err != nil {
			return fmt.Errorf("%w: the annotation %s of VirtualMachine %s/%s is malformed (%v): remove it to take the VM's current boot order as its own, or set it to {\"own\":{\"disk/NAME\":1,…},\"applied\":{…}}",
				machine.ErrConflict, AnnotationBootOrder, vm.Namespace, vm.Name, err)
		}
		if r.Applied == nil || maps.Equal(r.Applied, cur) {
			rec.Own = r.Own
		}
	}
	applyBoot(spec, target, rec.Own)
	rec.Applied = bootOrders(spec)
	raw, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if vm.Annotations == nil {
		vm.Annotations = map[string]string{}
	}
	vm.Annotations[AnnotationBootOrder] = string(raw)
	return nil
}

// applyFirmware sets s's bootloader for mode and secure boot.
func applyFirmware(s *kubevirtv1.VirtualMachineInstanceSpec, mode machine.BootMode, secure bool) {
	if s.Domain.Firmware == nil {
		s.Domain.Firmware = &kubevirtv1.Firmware{}
	}
	switch mode {
	case machine.BootModeUEFI:
		sb := secure
		s.Domain.Firmware.Bootloader = &kubevirtv1.Bootloader{EFI: &kubevirtv1.EFI{SecureBoot: &sb}}
		if secure {
			// KubeVirt refuses secure boot without SMM.
			if s.Domain.Features == nil {
				s.Domain.Features = &kubevirtv1.Features{}
			}
			on := true
			s.Domain.Features.SMM = &kubevirtv1.FeatureState{Enabled: &on}
		}
	default:
		s.Domain.Firmware.Bootloader = &kubevirtv1.Bootloader{BIOS: &kubevirtv1.BIOS{}}
	}
}

// powerOf maps a VM's printableStatus and its instance's phase onto a
// power state.
func powerOf(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) machine.PowerState {
	if vmi != nil && vmi.DeletionTimestamp == nil && vmi.Status.Phase == kubevirtv1.Running {
		if vm.Status.PrintableStatus == kubevirtv1.VirtualMachineStatusStopping {
			return machine.PowerPoweringOff
		}
		return machine.PowerOn
	}
	switch vm.Status.PrintableStatus {
	case kubevirtv1.VirtualMachineStatusRunning, kubevirtv1.VirtualMachineStatusMigrating:
		return machine.PowerOn
	case kubevirtv1.VirtualMachineStatusStarting, kubevirtv1.VirtualMachineStatusProvisioning,
		kubevirtv1.VirtualMachineStatusWaitingForVolumeBinding:
		return machine.PowerPoweringOn
	case kubevirtv1.VirtualMachineStatusStopping, kubevirtv1.VirtualMachineStatusTerminating:
		return machine.PowerPoweringOff
	}
	return machine.PowerOff
}

// inventoryOf reads the hardware a VM's spec describes.
func inventoryOf(s *kubevirtv1.VirtualMachineInstanceSpec) machine.Inventory {
	inv := machine.Inventory{Arch: "x86_64", MachineType: "q35", Sockets: 1, Cores: 1, Threads: 1}
	if c := s.Domain.CPU; c != nil {
		inv.Sockets, inv.Cores, inv.Threads = max(int(c.Sockets), 1), max(int(c.Cores), 1), max(int(c.Threads), 1)
	}
	inv.VCPUs = inv.Sockets * inv.Cores * inv.Threads
	if m := s.Domain.Memory; m != nil && m.Guest != nil {
		inv.MemoryBytes = m.Guest.Value()
	} else if q, ok := s.Domain.Resources.Requests["memory"]; ok {
		inv.MemoryBytes = q.Value()
	}
	if s.Domain.Machine != nil && s.Domain.Machine.Type != "" {
		inv.MachineType = s.Domain.Machine.Type
	}
	if s.Architecture != "" {
		inv.Arch = map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[s.Architecture]
		if inv.Arch == "" {
			inv.Arch = s.Architecture
		}
	}
	for _, d := range s.Domain.Devices.Disks {
		disk := machine.Disk{ID: d.Name, Device: machine.DeviceDisk, Bus: "virtio"}
		switch {
		case d.CDRom != nil:
			disk.Device, disk.ReadOnly, disk.Bus = machine.DeviceCDROM, true, string(d.CDRom.Bus)
		case d.Disk != nil:
			disk.Bus, disk.ReadOnly = string(d.Disk.Bus), d.Disk.ReadOnly
		case d.LUN != nil:
			disk.Bus = string(d.LUN.Bus)
		}
		for _, v := range s.Volumes {
			if v.Name == d.Name {
				disk.Source = volumeSource(v)
			}
		}
		inv.Disks = append(inv.Disks, disk)
	}
	for _, n := range s.Domain.Devices.Interfaces {
		nic := machine.NIC{MAC: strings.ToLower(n.MacAddress), Model: n.Model, Network: n.Name}
		if nic.Model == "" {
			nic.Model = "virtio"
		}
		inv.NICs = append(inv.NICs, nic)
	}
	return inv
}

// volumeSource names where a volume's data comes from.
func volumeSource(v kubevirtv1.Volume) string {
	switch {
	case v.HostDisk != nil:
		return v.HostDisk.Path
	case v.PersistentVolumeClaim != nil:
		return "pvc/" + v.PersistentVolumeClaim.ClaimName
	case v.DataVolume != nil:
		return "dv/" + v.DataVolume.Name
	case v.ContainerDisk != nil:
		return v.ContainerDisk.Image
	}
	return ""
}

// snapshot makes the machine a VM and its instance (nil when none) are.
func snapshot(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) *machine.Machine {
	spec := specOf(vm)
	st, _ := settingsOf(vm)
	m := &machine.Machine{
		ID:        FirmwareUUID(vm),
		Name:      SystemName(vm.Namespace, vm.Name),
		Inventory: inventoryOf(spec),
		Power:     powerOf(vm, vmi),
		Settings:  st,
	}
	running := spec
	if vmi != nil && m.Power != machine.PowerOff {
		running = &vmi.Spec
	}
	m.Mode, m.SecureBootActive = firmwareOf(running)
	mediaDrives(m, vm, vmi)
	return m
}

// stale reports whether a running instance boots otherwise than its VM's
// spec would now.
func stale(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance) bool {
	if vmi == nil {
		return false
	}
	spec := specOf(vm)
	m1, s1 := firmwareOf(spec)
	m2, s2 := firmwareOf(&vmi.Spec)
	if m1 != m2 || s1 != s2 {
		return true
	}
	a, b := bootOrders(spec), bootOrders(&vmi.Spec)
	if len(a) != len(b) {
		return true
	}
	for k, v := range a {
		if b[k] != v {
			return true
		}
	}
	return false
}

// patchOp is one RFC 6902 JSON patch operation.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// escapePointer escapes a JSON pointer token (RFC 6901).
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// patchOps returns the JSON patch that turns orig into mod, touching only
// what vbmcd changes (the annotations, the run strategy, the devices'
// bootOrder, the firmware's bootloader, SMM, the BMC's disks and volumes)
// and guarded by orig's resourceVersion. A
// whole-object update would drop the fields a newer KubeVirt has that
// kubevirt.io/api at this version does not know.
func patchOps(orig, mod *kubevirtv1.VirtualMachine) []patchOp {
	ops := []patchOp{{Op: "test", Path: "/metadata/resourceVersion", Value: orig.ResourceVersion}}
	if orig.Annotations == nil {
		if len(mod.Annotations) > 0 {
			ops = append(ops, patchOp{Op: "add", Path: "/metadata/annotations", Value: mod.Annotations})
		}
	} else {
		for _, k := range []string{AnnotationSettings, AnnotationBootOrder, AnnotationMedia} {
			v, ok := mod.Annotations[k]
			was, had := orig.Annotations[k]
			switch {
			case ok && (!had || v != was):
				ops = append(ops, patchOp{Op: "add", Path: "/metadata/annotations/" + escapePointer(k), Value: v})
			case !ok && had:
				ops = append(ops, patchOp{Op: "remove", Path: "/metadata/annotations/" + escapePointer(k)})
			}
		}
	}
	if orig.Spec.Running != nil && mod.Spec.Running == nil {
		ops = append(ops, patchOp{Op: "remove", Path: "/spec/running"})
	}
	if mod.Spec.RunStrategy != nil && !equalJSON(orig.Spec.RunStrategy, mod.Spec.RunStrategy) {
		ops = append(ops, patchOp{Op: "add", Path: "/spec/runStrategy", Value: *mod.Spec.RunStrategy})
	}
	if orig.Spec.Template == nil || mod.Spec.Template == nil {
		return ops
	}
	const dom = "/spec/template/spec/domain"
	order := func(path string, was, is *uint) {
		switch {
		case is == nil && was != nil:
			ops = append(ops, patchOp{Op: "remove", Path: path})
		case is != nil && (was == nil || *was != *is):
			ops = append(ops, patchOp{Op: "add", Path: path, Value: *is})
		}
	}
	od, md := orig.Spec.Template.Spec.Domain, mod.Spec.Template.Spec.Domain
	// Disks are matched by name: virtual media adds and removes its CD.
	for i, d := range od.Devices.Disks {
		if j := slices.IndexFunc(md.Devices.Disks, func(x kubevirtv1.Disk) bool { return x.Name == d.Name }); j >= 0 {
			order(fmt.Sprintf("%s/devices/disks/%d/bootOrder", dom, i), d.BootOrder, md.Devices.Disks[j].BootOrder)
		}
	}
	for i := range min(len(md.Devices.Interfaces), len(od.Devices.Interfaces)) {
		order(fmt.Sprintf("%s/devices/interfaces/%d/bootOrder", dom, i), od.Devices.Interfaces[i].BootOrder, md.Devices.Interfaces[i].BootOrder)
	}
	if !equalJSON(od.Firmware, md.Firmware) {
		if od.Firmware == nil {
			ops = append(ops, patchOp{Op: "add", Path: dom + "/firmware", Value: md.Firmware})
		} else {
			ops = append(ops, patchOp{Op: "add", Path: dom + "/firmware/bootloader", Value: md.Firmware.Bootloader})
		}
	}
	if !equalJSON(od.Features, md.Features) {
		if od.Features == nil {
			ops = append(ops, patchOp{Op: "add", Path: dom + "/features", Value: md.Features})
		} else {
			ops = append(ops, patchOp{Op: "add", Path: dom + "/features/smm", Value: md.Features.SMM})
		}
	}
	diskName := func(d kubevirtv1.Disk) string { return d.Name }
	volName := func(v kubevirtv1.Volume) string { return v.Name }
	ops = append(ops, listOps(dom+"/devices/disks", od.Devices.Disks, md.Devices.Disks, diskName)...)
	ops = append(ops, listOps("/spec/template/spec/volumes", orig.Spec.Template.Spec.Volumes, mod.Spec.Template.Spec.Volumes, volName)...)
	return ops
}

// listOps removes the named items of orig that mod does not have (from the
// last, so that the indexes hold) and appends those mod has and orig does
// not.
func listOps[T any](path string, orig, mod []T, name func(T) string) []patchOp {
	var ops []patchOp
	has := func(l []T, n string) bool { return slices.ContainsFunc(l, func(x T) bool { return name(x) == n }) }
	left := len(orig)
	for i := len(orig) - 1; i >= 0; i-- {
		if !has(mod, name(orig[i])) {
			ops = append(ops, patchOp{Op: "remove", Path: fmt.Sprintf("%s/%d", path, i)})
			left--
		}
	}
	for _, x := range mod {
		if has(orig, name(x)) {
			continue
		}
		if left == 0 && len(orig) == 0 {
			ops = append(ops, patchOp{Op: "add", Path: path, Value: []T{x}})
		} else {
			ops = append(ops, patchOp{Op: "add", Path: path + "/-", Value: x})
		}
		left++
	}
	return ops
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
