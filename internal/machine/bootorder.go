package machine

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Boot options and the persistent boot order, as UEFI keeps them
// (Boot####, BootOrder, BootNext) and Redfish shows them
// (ComputerSystem.Boot.BootOrder, BootNext, the BootOptions collection).
//
// Every bootable device is an option: each disk (Hdd, or Usb on a USB
// bus), each CD drive (Cd), and each NIC twice, for PXE and for UEFI HTTP
// boot. A reference names its device, so it stays the same while the
// device does: "Hdd-vda", "Cd-sdc", "Pxe-525400a1b2c3",
// "UefiHttp-525400a1b2c3".
//
// An empty BootOrder is the machine's own order (Inventory.DefaultBoot);
// a set one is persistent and applies from the next start on, devices left
// out of it do not boot (unless an override names them). A Once or
// Continuous override puts its kind of device (or, for UefiBootNext, the
// option BootNext names) first.

// ErrNoBootNext refuses an UefiBootNext override without BootNext.
var ErrNoBootNext = fmt.Errorf("%w: an UefiBootNext boot needs BootNext", ErrInvalid)

// BootOption is one bootable device.
type BootOption struct {
	// Ref is the BootOptionReference.
	Ref string
	// Alias is the kind of device, as an override target names it.
	Alias BootSource
	// Device is the disk's ID or the NIC's MAC.
	Device string
	// NIC says Device is a MAC.
	NIC         bool
	DisplayName string
}

// BootOptions lists the machine's boot options: disks, CD drives, then each
// NIC's PXE and HTTP options, in the inventory's order.
func (inv Inventory) BootOptions() []BootOption {
	var out []BootOption
	for _, d := range inv.Disks {
		switch d.Device {
		case DeviceDisk:
			alias, what := BootHdd, "disk"
			if d.Bus == "usb" {
				alias, what = BootUsb, "USB disk"
			}
			out = append(out, BootOption{Ref: string(alias) + "-" + d.ID, Alias: alias, Device: d.ID,
				DisplayName: fmt.Sprintf("UEFI %s %s (%s)", strings.ToUpper(d.Bus), what, d.ID)})
		case DeviceCDROM:
			out = append(out, BootOption{Ref: "Cd-" + d.ID, Alias: BootCd, Device: d.ID,
				DisplayName: fmt.Sprintf("UEFI %s CD-ROM (%s)", strings.ToUpper(d.Bus), d.ID)})
		}
	}
	for _, n := range inv.NICs {
		id := strings.ToLower(strings.ReplaceAll(n.MAC, ":", ""))
		out = append(out,
			BootOption{Ref: "Pxe-" + id, Alias: BootPxe, Device: n.MAC, NIC: true,
				DisplayName: "UEFI PXEv4 (MAC:" + id + ")"},
			BootOption{Ref: "UefiHttp-" + id, Alias: BootUefiHttp, Device: n.MAC, NIC: true,
				DisplayName: "UEFI HTTPv4 (MAC:" + id + ")"})
	}
	return out
}

// BootOption finds an option by its reference.
func (inv Inventory) BootOption(ref string) (BootOption, bool) {
	for _, o := range inv.BootOptions() {
		if o.Ref == ref {
			return o, true
		}
	}
	return BootOption{}, false
}

// defaultBoot is the kind order a machine without one boots in.
var defaultBoot = []BootSource{BootHdd, BootCd, BootPxe}

// BootOrder is the machine's boot order: the stored one, else its own,
// every option whose kind its definition boots, by kind.
func (m *Machine) BootOrder() []string {
	if len(m.Settings.BootOrder) > 0 {
		return slices.Clone(m.Settings.BootOrder)
	}
	return defaultOrder(m.Inventory)
}

func defaultOrder(inv Inventory) []string {
	kinds := inv.DefaultBoot
	if len(kinds) == 0 {
		kinds = defaultBoot
	}
	opts := inv.BootOptions()
	var out []string
	for _, k := range kinds {
		for _, o := range opts {
			if o.Alias == k || k == BootHdd && o.Alias == BootUsb {
				out = append(out, o.Ref)
			}
		}
	}
	return out
}

// OverrideKind is the kind of device the boot override boots: its target,
// or for UefiBootNext the kind of the option BootNext names (what IPMI,
// which knows kinds only, can show).
func (m *Machine) OverrideKind() BootSource {
	b := m.Settings.Boot
	if b.Target != BootUefiBootNext {
		return b.Target
	}
	if o, ok := m.BootOption(b.BootNext); ok {
		return o.Alias
	}
	return BootNone
}

// BootPlan is the per-device order the next start boots in, for backends
// that can order single devices: nil when neither a BootOrder nor an
// UefiBootNext override is set (the machine then boots by kind, its own
// order with the override's kind first).
func BootPlan(inv Inventory, st Settings) []BootOption {
	eff := st.Boot.Effective()
	// A USB override needs the USB disk itself first: by kind it would be
	// any disk.
	if len(st.BootOrder) == 0 && eff != BootUefiBootNext && eff != BootUsb {
		return nil
	}
	order := st.BootOrder
	if len(order) == 0 {
		order = defaultOrder(inv)
	}
	var plan []BootOption
	for _, ref := range order {
		if o, ok := inv.BootOption(ref); ok {
			plan = append(plan, o)
		}
	}
	var first []BootOption
	switch eff {
	case BootNone, BootBiosSetup:
	case BootUefiBootNext:
		if o, ok := inv.BootOption(st.Boot.BootNext); ok {
			first = []BootOption{o}
		}
	default:
		kind := eff
		if kind == BootUefiHttp || kind == BootUsbCd {
			// The BMC fetched the image into the CD drive (httpboot.go);
			// the virtual CD is the USB CD.
			kind = BootCd
		}
		for _, o := range inv.BootOptions() {
			if o.Alias == kind {
				first = append(first, o)
			}
		}
	}
	out := first
	for _, o := range plan {
		if !slices.ContainsFunc(first, func(f BootOption) bool { return f.Ref == o.Ref }) {
			out = append(out, o)
		}
	}
	return out
}

// checkBootOrder refuses references that name no option, and repeats.
func checkBootOrder(inv Inventory, refs []string) error {
	for i, r := range refs {
		if _, ok := inv.BootOption(r); !ok {
			return invalidf("boot option %q does not exist; the options are %v", truncated(r), optionRefs(inv))
		}
		if slices.Contains(refs[:i], r) {
			return invalidf("boot option %q is listed twice", r)
		}
	}
	return nil
}

func optionRefs(inv Inventory) []string {
	var out []string
	for _, o := range inv.BootOptions() {
		out = append(out, o.Ref)
	}
	return out
}

func truncated(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// SetBootOrder stores the persistent boot order; it applies from the next
// start on. An empty order returns to the machine's own.
func (s *Service) SetBootOrder(ctx context.Context, id string, refs []string) (*Machine, error) {
	m, unlock, err := s.resolve(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := checkBootOrder(m.Inventory, refs); err != nil {
		return nil, err
	}
	if slices.Equal(refs, m.Settings.BootOrder) {
		return m, nil
	}
	st := m.Settings.Clone()
	st.BootOrder = slices.Clone(refs)
	if err := s.be.Save(ctx, m.ID, st); err != nil {
		return nil, err
	}
	return s.be.Get(m.ID)
}
