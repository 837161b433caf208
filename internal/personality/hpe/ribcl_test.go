package hpe

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/sim"
)

func TestParseRequest(t *testing.T) {
	got, err := ParseRequest([]byte(`<RIBCL VERSION="2.0">
<LOGIN USER_LOGIN="admin" PASSWORD="pw">
<SERVER_INFO MODE="write">
<SET_PERSISTENT_BOOT><DEVICE VALUE="Boot0002"/><DEVICE VALUE="Boot0001"/></SET_PERSISTENT_BOOT>
<SET_ONE_TIME_BOOT value="CDROM"/>
</SERVER_INFO>
</LOGIN>
</RIBCL>`))
	if err != nil {
		t.Fatal(err)
	}
	want := Request{User: "admin", Password: "pw", Commands: []Command{
		{Block: "SERVER_INFO", Mode: "write", Name: "SET_PERSISTENT_BOOT", Attrs: map[string]string{},
			Kids: []Child{{"DEVICE", "Boot0002"}, {"DEVICE", "Boot0001"}}, Line: 4},
		{Block: "SERVER_INFO", Mode: "write", Name: "SET_ONE_TIME_BOOT", Attrs: map[string]string{"VALUE": "CDROM"}, Line: 5},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, bad := range []string{"", "<RIBCL>", `<RIBCL><LOGIN/></RIBCL>`, `<RIBCL><LOGIN USER_LOGIN="a"><OTHER_INFO/></LOGIN></RIBCL>`,
		`<RIBCL><LOGIN USER_LOGIN="a"><SERVER_INFO>` + strings.Repeat("<GET_PRODUCT_NAME/>", maxCommands+1) + `</SERVER_INFO></LOGIN></RIBCL>`} {
		var re *Error
		if _, err := ParseRequest([]byte(bad)); !errors.As(err, &re) || re.Status != StatusSyntax {
			t.Errorf("ParseRequest(%.40q) = %v, want a syntax error", bad, err)
		}
	}
}

// fake is a Server over one simulated machine's model.
type fake struct {
	svc *machine.Service
	id  string
	// loading is an image whose insert is still fetching it, by drive.
	loading map[machine.MediaSlot]string
}

func (f *fake) Machine() (*machine.Machine, error) { return f.svc.Get(f.id) }
func (f *fake) Product() string                    { return "ProLiant DL360 Gen11" }
func (f *fake) ILO() string                        { return "iLO 6 v1.59" }
func (f *fake) ROM() string                        { return "U54 v2.16" }
func (f *fake) Reset(ctx context.Context, rt machine.ResetType) error {
	return f.svc.Reset(ctx, f.id, rt)
}
func (f *fake) SetBoot(ctx context.Context, p machine.BootPatch) error {
	_, err := f.svc.SetBoot(ctx, f.id, p)
	return err
}
func (f *fake) SetBootOrder(ctx context.Context, refs []string) error {
	_, err := f.svc.SetBootOrder(ctx, f.id, refs)
	return err
}
func (f *fake) SetPendingBootMode(ctx context.Context, mode machine.BootMode) error {
	v := "Uefi"
	if mode == machine.BootModeLegacy {
		v = "Bios"
	}
	_, err := f.svc.SetBIOSPending(ctx, f.id, map[string]any{machine.BIOSBootMode: v})
	return err
}
func (f *fake) Insert(context.Context, machine.MediaSlot, string) error {
	return errors.New("no media here")
}
func (f *fake) Eject(context.Context, machine.MediaSlot) error { return nil }
func (f *fake) Media(m *machine.Machine, slot machine.MediaSlot) machine.Media {
	md := machine.MediaOf(m, slot)
	if img, ok := f.loading[slot]; ok {
		md.Inserted, md.Image = true, img
	}
	return md
}

func run1(t *testing.T, s Server, block, mode, cmd string) string {
	t.Helper()
	req, err := ParseRequest([]byte(`<RIBCL><LOGIN USER_LOGIN="a" PASSWORD="b"><` + block + ` MODE="` + mode + `">` + cmd + `</` + block + `></LOGIN></RIBCL>`))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := Execute(context.Background(), s, req)
	return string(out)
}

// TestPersistentBootBothModes: in UEFI mode the boot order is Boot####
// with the words proliantutils reads; SET_PERSISTENT_BOOT puts the named
// devices first; in Legacy mode the order is by kind.
func TestPersistentBootBothModes(t *testing.T) {
	be := sim.New(1)
	svc := machine.NewService(be, nil)
	f := &fake{svc: svc, id: be.List()[0].ID}
	out := run1(t, f, "SERVER_INFO", "read", "<GET_PERSISTENT_BOOT/>")
	for _, want := range []string{`DESCRIPTION="Embedded SATA Port vda HDD`, `HP iLO Virtual USB CD/DVD ROM`, `NIC (PXE IPv4)`} {
		if !strings.Contains(out, want) {
			t.Errorf("GET_PERSISTENT_BOOT lacks %s:\n%s", want, out)
		}
	}
	m, _ := f.Machine()
	pxe := -1
	for i, o := range m.BootOptions() {
		if o.Alias == machine.BootPxe {
			pxe = i
		}
	}
	run1(t, f, "SERVER_INFO", "write", `<SET_PERSISTENT_BOOT><DEVICE VALUE="`+bootNumber(pxe)+`"/></SET_PERSISTENT_BOOT>`)
	m, _ = f.Machine()
	if order := m.BootOrder(); !strings.HasPrefix(order[0], "Pxe-") || len(order) != 3 {
		t.Errorf("boot order %v, want PXE first and the others after", order)
	}
	if _, err := svc.SetBoot(context.Background(), f.id, machine.BootPatch{Mode: ptr(machine.BootModeLegacy)}); err != nil {
		t.Fatal(err)
	}
	out = run1(t, f, "SERVER_INFO", "read", "<GET_PERSISTENT_BOOT/>")
	if !strings.Contains(out, `<DEVICE value="NETWORK"/>`) || strings.Contains(out, "DESCRIPTION") {
		t.Errorf("Legacy GET_PERSISTENT_BOOT:\n%s", out)
	}
	run1(t, f, "SERVER_INFO", "write", `<SET_PERSISTENT_BOOT><DEVICE VALUE="CDROM"/></SET_PERSISTENT_BOOT>`)
	if m, _ = f.Machine(); !strings.HasPrefix(m.BootOrder()[0], "Cd-") {
		t.Errorf("Legacy SET_PERSISTENT_BOOT CDROM: %v", m.BootOrder())
	}
	if out := run1(t, f, "RIB_INFO", "write", `<INSERT_VIRTUAL_MEDIA DEVICE="CDROM" IMAGE_URL="http://x/y.iso"/>`); !strings.Contains(out, "no media here") {
		t.Errorf("a failed insert is the command's answer:\n%s", out)
	}
}

// TestVMStatusWhileLoading: an insert still fetching its image is in the
// drive for RIBCL, as for Redfish: proliantutils' SET_VM_STATUS CONNECT
// right after INSERT_VIRTUAL_MEDIA is taken (Ironic's attach_vmedia sends
// both), GET_VM_STATUS shows the image, and the eject of an empty drive
// is still refused.
func TestVMStatusWhileLoading(t *testing.T) {
	be := sim.New(1)
	f := &fake{svc: machine.NewService(be, nil), id: be.List()[0].ID, loading: map[machine.MediaSlot]string{machine.SlotCD: "http://x/boot.iso"}}
	connect := `<SET_VM_STATUS DEVICE="CDROM"><VM_BOOT_OPTION VALUE="CONNECT"/><VM_WRITE_PROTECT VALUE="YES"/></SET_VM_STATUS>`
	const noImage = "No image present in the Virtual Media drive"
	for _, c := range []struct {
		block, mode, cmd string
		want             bool
		text             string
	}{
		{"RIB_INFO", "write", connect, false, noImage},
		{"RIB_INFO", "read", `<GET_VM_STATUS DEVICE="CDROM"/>`, true, `IMAGE_INSERTED="YES" IMAGE_URL="http://x/boot.iso"`},
		{"RIB_INFO", "write", `<EJECT_VIRTUAL_MEDIA DEVICE="FLOPPY"/>`, true, noImage},
	} {
		if out := run1(t, f, c.block, c.mode, c.cmd); strings.Contains(out, c.text) != c.want {
			t.Errorf("%s: want %s in the answer %v:\n%s", c.cmd, c.text, c.want, out)
		}
	}
}

func ptr[T any](v T) *T { return &v }
