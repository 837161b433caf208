package sim

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/machine"
)

// Described machines have what their System says, and the defaults of
// New's machines for the rest; they are found by name and by UUID in any
// case, and by nothing else.
func TestDescribedMachines(t *testing.T) {
	b, err := NewSystems([]System{{
		Name: "worker-0", UUID: "9B2F0A4C-7D1E-4C3B-8E5F-0A1B2C3D4E5F", Power: machine.PowerOn, VCPUs: 16, MemoryBytes: 64 << 30,
		NICs:       []NIC{{MAC: "52:54:00:10:00:01"}, {MAC: "52:54:00:20:00:01", Network: "provisioning"}},
		Disks:      []Disk{{ID: "sda", Capacity: 480 << 30, Bus: "sata", SSD: true}, {ID: "vdb", Capacity: 1 << 40}},
		BIOS:       map[string]any{"ProcTurboMode": "Disabled"},
		Firmware:   map[machine.FirmwareComponent]string{machine.FirmwareBIOS: "2.10.1"},
		BootDevice: machine.BootPxe, BootMode: machine.BootModeLegacy,
	}, {Name: "plain", UUID: UUIDFor("plain")}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.Get("worker-0")
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != "9b2f0a4c-7d1e-4c3b-8e5f-0a1b2c3d4e5f" || m.Power != machine.PowerOn || m.VCPUs != 16 || m.MemoryBytes != 64<<30 || m.Mode != machine.BootModeLegacy {
		t.Errorf("worker-0: %+v", m)
	}
	nics := []machine.NIC{
		{MAC: "52:54:00:10:00:01", Network: "baremetal", Model: "virtio", PCI: "0000:01:00.0"},
		{MAC: "52:54:00:20:00:01", Network: "provisioning", Model: "virtio", PCI: "0000:02:00.0"},
	}
	if diff := cmp.Diff(nics, m.NICs); diff != "" {
		t.Errorf("NICs (-want +got):\n%s", diff)
	}
	disks := []machine.Disk{
		{ID: "sda", Device: machine.DeviceDisk, Bus: "sata", Source: "/sim/worker-0-sda.qcow2", Capacity: 480 << 30, RotationRate: 1},
		{ID: "vdb", Device: machine.DeviceDisk, Bus: "virtio", Source: "/sim/worker-0-vdb.qcow2", Capacity: 1 << 40},
		{ID: "sdb", Device: machine.DeviceCDROM, Bus: "sata", ReadOnly: true},
	}
	if diff := cmp.Diff(disks, m.Disks); diff != "" {
		t.Errorf("disks (-want +got):\n%s", diff)
	}
	st := m.Settings
	if st.BIOS["ProcTurboMode"] != "Disabled" || st.BIOS["QuietBoot"] != false || st.FirmwareVersion(machine.FirmwareBIOS) != "2.10.1" ||
		st.Boot.Target != machine.BootPxe || st.Boot.Enabled != machine.BootContinuous {
		t.Errorf("worker-0's settings: %+v", st)
	}
	if p, _ := b.Get(UUIDFor("plain")); p.Name != "plain" || p.Power != machine.PowerOff || p.VCPUs != 4 || len(p.Disks) != 2 || p.Disks[1].ID != "sda" {
		t.Errorf("plain: %+v", p)
	}
	for _, q := range []string{"sim-0001", "worker", UUIDFor("worker-0")} {
		if _, err := b.Get(q); !errors.Is(err, machine.ErrNotFound) {
			t.Errorf("Get(%q): %v, want ErrNotFound", q, err)
		}
	}
	if ms := b.List(); len(ms) != 2 || ms[1].Name != "plain" {
		t.Errorf("List: %v", ms)
	}
	// A USB stick takes a name no disk has.
	if err := b.SetMedia(context.Background(), "worker-0", machine.SlotRemovable, "/m/a.img"); err != nil {
		t.Fatal(err)
	}
	if m, _ := b.Get("worker-0"); m.Disks[3].ID != "sdc" || m.Disks[3].Bus != "usb" {
		t.Errorf("after a USB insert: %+v", m.Disks)
	}

	for _, bad := range [][]System{
		{{Name: "a", UUID: "x"}},
		{{Name: "a", UUID: UUIDFor("a")}, {Name: "b", UUID: strings.ToUpper(UUIDFor("a"))}},
		{{Name: "a", UUID: UUIDFor("a")}, {Name: "a", UUID: UUIDFor("b")}},
	} {
		if _, err := NewSystems(bad); err == nil {
			t.Errorf("NewSystems(%+v) accepted", bad)
		}
	}
}

// A machine whose System says Notify is announced as sushy-tools' fake
// driver announces its systems, through the machine model as Ironic drives
// it: a boot override, a power-on (first pending, then reached; the Once
// override spent after), a hard off, a warm reset, virtual media. Its
// entry's own keys come back as given. A machine without Notify is never
// announced.
func TestAnnouncements(t *testing.T) {
	got := make(chan map[string]any, 100)
	fake := map[string]any{"uuid": "27946B59-9E44-4FA7-8E91-F3527A1EF094", "name": "fake", "power_state": "Off",
		"external_notifier": true, "fake_ipa": false, "nics": []any{map[string]any{"mac": "00:5c:52:31:3a:9c", "ip": "172.22.0.100"}}}
	b, err := NewSystems([]System{
		{Name: "fake", UUID: "27946b59-9e44-4fa7-8e91-f3527a1ef094", NICs: []NIC{{MAC: "00:5c:52:31:3a:9c", IP: "172.22.0.100"}}, Notify: true, Fake: fake},
		{Name: "quiet", UUID: UUIDFor("quiet")},
	}, WithNotify(func(name string, body []byte) {
		var v map[string]any
		if err := json.Unmarshal(body, &v); err != nil || name != v["name"] {
			t.Errorf("announcement of %s: %s (%v)", name, body, err)
		}
		got <- v
	}))
	if err != nil {
		t.Fatal(err)
	}
	svc := machine.NewService(b, zap.NewNop(), machine.WithImageFetcher(localImages{}))
	ctx := context.Background()
	type seen struct {
		Power, Pending, Boot string
		Media                any
	}
	next := func() seen {
		t.Helper()
		select {
		case v := <-got:
			if v["uuid"] != fake["uuid"] || v["fake_ipa"] != false || v["external_notifier"] != true || v["boot_mode"] != "UEFI" || v["secure_boot"] != false {
				t.Errorf("announcement lost the entry's keys or the boot fields: %v", v)
			}
			s := seen{Power: v["power_state"].(string), Boot: v["boot_device"].(string), Media: v["boot_image"]}
			if p, ok := v["pending_power"].(map[string]any); ok {
				s.Pending = p["power_state"].(string)
				if at := int64(p["apply_time"].(float64)); at < time.Now().Unix()-5 || at > time.Now().Unix()+1 {
					t.Errorf("apply_time %d is not now", at)
				}
			}
			return s
		case <-time.After(10 * time.Second):
			t.Fatal("no announcement")
		}
		return seen{}
	}
	expect := func(what string, want ...seen) {
		t.Helper()
		for i, w := range want {
			if s := next(); s != w {
				t.Errorf("%s, announcement %d: %+v, want %+v", what, i+1, s, w)
			}
		}
	}
	for _, id := range []string{"fake", "quiet"} {
		cd, once := machine.BootCd, machine.BootOnce
		if _, err := svc.SetBoot(ctx, id, machine.BootPatch{Target: &cd, Enabled: &once}); err != nil {
			t.Fatal(err)
		}
		if err := svc.Reset(ctx, id, machine.ResetOn); err != nil {
			t.Fatal(err)
		}
	}
	expect("a Once Cd override, then On",
		seen{Power: "Off", Boot: "Cd"},
		seen{Power: "Off", Pending: "On", Boot: "Cd"}, // fake-ipa boots its agent on this one
		seen{Power: "On", Boot: "Cd"},
		seen{Power: "On", Boot: "Hdd"}) // the Once override spent
	// The machine runs with the Cd boot it started with, and the next boot
	// is the disk's: the first restart is cold, the next one warm.
	if err := svc.Reset(ctx, "fake", machine.ResetForceRestart); err != nil {
		t.Fatal(err)
	}
	expect("a cold restart",
		seen{Power: "On", Pending: "Off", Boot: "Hdd"}, seen{Power: "Off", Boot: "Hdd"},
		seen{Power: "Off", Pending: "On", Boot: "Hdd"}, seen{Power: "On", Boot: "Hdd"})
	if err := svc.Reset(ctx, "fake", machine.ResetForceRestart); err != nil {
		t.Fatal(err)
	}
	expect("a warm reset", seen{Power: "On", Pending: "ForceRestart", Boot: "Hdd"}, seen{Power: "On", Boot: "Hdd"})
	if err := svc.Reset(ctx, "fake", machine.ResetForceOff); err != nil {
		t.Fatal(err)
	}
	expect("ForceOff", seen{Power: "On", Pending: "Off", Boot: "Hdd"}, seen{Power: "Off", Boot: "Hdd"})

	task, err := svc.InsertMedia(ctx, "fake", machine.SlotCD, machine.InsertRequest{Image: "http://images/boot.iso"})
	if err != nil {
		t.Fatal(err)
	}
	<-task.Done()
	s := next()
	if s.Media == nil {
		s = next() // the record first, then the drive
	}
	want := map[string]any{"Cd": []any{"/cache/boot.iso", true, true}, "Removable": []any{nil, true, false}}
	if diff := cmp.Diff(want, s.Media); diff != "" {
		t.Errorf("boot_image after an insert (-want +got):\n%s", diff)
	}
	if err := svc.EjectMedia(ctx, "fake", machine.SlotCD); err != nil {
		t.Fatal(err)
	}
	for s = next(); s.Media.(map[string]any)["Cd"].([]any)[2] != false; s = next() {
	}
	select {
	case v := <-got:
		t.Errorf("an announcement too many: %v", v)
	case <-time.After(100 * time.Millisecond):
	}
}

// With a power delay, the pending state lasts the delay and apply_time is
// when it ends, in whole seconds as the fake driver keeps it.
func TestPendingPowerLastsTheDelay(t *testing.T) {
	got := make(chan map[string]any, 10)
	b, err := NewSystems([]System{{Name: "n", UUID: UUIDFor("n"), Notify: true}}, WithDelay(1500*time.Millisecond),
		WithNotify(func(_ string, body []byte) {
			var v map[string]any
			_ = json.Unmarshal(body, &v)
			got <- v
		}))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := b.Start(context.Background(), "n"); err != nil {
		t.Fatal(err)
	}
	first := <-got
	p, _ := first["pending_power"].(map[string]any)
	if first["power_state"] != "Off" || p == nil || p["power_state"] != "On" {
		t.Fatalf("first announcement: %v", first)
	}
	if at := int64(p["apply_time"].(float64)); at < start.Add(1500*time.Millisecond).Unix() || at > start.Unix()+3 {
		t.Errorf("apply_time %d, started at %d with a 1.5 s delay", at, start.Unix())
	}
	if first["nics"] == nil || first["uuid"] != UUIDFor("n") || first["external_notifier"] != true {
		t.Errorf("vbmcd's form lacks the fake driver's keys: %v", first)
	}
	second := <-got
	if second["power_state"] != "On" || second["pending_power"] != nil || time.Since(start) < 1500*time.Millisecond {
		t.Errorf("after %v: %v", time.Since(start), second)
	}
}

// localImages "fetches" an image by naming a file after it.
type localImages struct{}

func (localImages) Fetch(_ context.Context, req machine.ImageRequest) (machine.FetchedImage, func(), error) {
	return machine.FetchedImage{Path: "/cache/" + machine.ImageName(req.Image)}, func() {}, nil
}
