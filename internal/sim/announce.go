package sim

import (
	"bytes"
	"encoding/json"
	"maps"
	"time"

	"github.com/bmlab/bmlab/internal/machine"
)

// What sushy-tools' fake driver announces. For a system with
// external_notifier it sends the whole system, its entry of
// SUSHY_EMULATOR_FAKE_SYSTEMS with what it stored since (pending_power,
// boot_device, boot_mode, secure_boot, boot_image), to
// EXTERNAL_NOTIFICATION_URL whenever it stores a change
// (sushy_tools/emulator/resources/systems/fakedriver.py: _update,
// _send_external_notification). A power request is stored first as
// pending_power, {"power_state": "On", "apply_time": UNIX SECONDS}, and
// reached later (pending_power null). Metal3's fake-ipa (utility-images,
// fake-ipa/fake_ipa/main.py) boots its agent for a system on a
// pending_power On whose boot_device is not Hdd, and stops it on any
// other pending_power.
//
// The sim announces the same for machines whose System says Notify: a
// start, a stop and a warm reset (pending_power ForceRestart) or a guest
// reboot (GracefulRestart) first as pending, then as reached; a change of
// the boot override (boot_device, "Hdd" when none), the firmware mode or
// secure boot; a virtual media insert or eject (boot_image, by member:
// [the file in the drive or null, true, inserted]). An announcement equal
// to the last one is not sent again. Unlike the fake driver's, boot_device,
// boot_mode and secure_boot are always there: fake-ipa reads boot_device
// without a default.

// WithNotify has fn told what the fake driver would announce about the
// machines whose System says Notify: the machine's name and the JSON body.
// fn is called with the backend's lock held, in the order of the changes,
// and must not block (the notifier queues).
func WithNotify(fn func(name string, body []byte)) Option {
	return func(b *Backend) { b.notify = fn }
}

// fakeState is what a machine's announcements carry beyond its snapshot.
type fakeState struct {
	pending *pendingPower // the power state to come
	// powered: a pending_power was announced; from then on the key is in
	// every announcement, null when nothing is pending, as the fake driver
	// keeps it.
	powered bool
	media   bool   // virtual media changed: boot_image is in the announcements
	last    []byte // the last announcement
}

type pendingPower struct {
	PowerState string `json:"power_state"`
	ApplyTime  int64  `json:"apply_time"`
}

// pendingPower is the fake driver's record of a power state to come after
// d, in whole seconds as it keeps apply_time.
func (b *Backend) pendingPower(state string, d time.Duration) *pendingPower {
	t := time.Now().Add(d)
	sec := t.Unix()
	if d > 0 && t.Nanosecond() > 0 {
		sec++
	}
	return &pendingPower{PowerState: state, ApplyTime: sec}
}

// pending announces a power state to come after d. Callers hold b.mu.
func (b *Backend) pending(n *node, state string, d time.Duration) {
	n.fake.pending = b.pendingPower(state, d)
	b.announce(n)
}

// announce tells WithNotify's function what the fake driver would
// announce about n now, when n's system asks for announcements and that
// changed. Callers hold b.mu.
func (b *Backend) announce(n *node) {
	if b.notify == nil || b.specs == nil || !b.specs[n.k].Notify {
		return
	}
	if n.fake.pending != nil {
		n.fake.powered = true
	}
	body, err := json.Marshal(b.fakeSystem(n))
	if err != nil || bytes.Equal(body, n.fake.last) {
		return // the entry's values came from JSON or a Python literal: err is never set
	}
	n.fake.last = body
	b.notify(n.m.Name, body)
}

// fakeSystem is machine n in the fake driver's terms.
func (b *Backend) fakeSystem(n *node) map[string]any {
	s := &b.specs[n.k]
	m := n.m
	out := make(map[string]any, len(s.Fake)+9)
	if s.Fake != nil {
		maps.Copy(out, s.Fake) // uuid, name and nics as the file gives them
	} else {
		nics := make([]map[string]string, len(s.NICs))
		for i, nic := range s.NICs {
			nics[i] = map[string]string{"mac": nic.MAC}
			if nic.IP != "" {
				nics[i]["ip"] = nic.IP
			}
		}
		out["uuid"], out["name"], out["nics"], out["external_notifier"] = m.ID, m.Name, nics, true
	}
	// The fake driver keeps a state until it is reached: the one before a
	// transition.
	switch m.Power {
	case machine.PowerPoweringOn:
		out["power_state"] = string(machine.PowerOff)
	case machine.PowerPoweringOff:
		out["power_state"] = string(machine.PowerOn)
	default:
		out["power_state"] = string(m.Power)
	}
	dev := m.Settings.Boot.Effective()
	if dev == machine.BootNone {
		dev = machine.BootHdd
	}
	out["boot_device"] = string(dev)
	out["boot_mode"] = string(m.Settings.Boot.Mode)
	out["secure_boot"] = m.Settings.SecureBoot
	if n.fake.powered {
		out["pending_power"] = n.fake.pending // null when none
	}
	if n.fake.media {
		images := map[string]any{}
		for _, slot := range machine.MediaSlots {
			md := machine.MediaOf(m, slot)
			var file any
			if md.Inserted {
				file = md.Path
			}
			images[string(slot)] = []any{file, true, md.Inserted}
		}
		out["boot_image"] = images
	}
	return out
}
