package ipmi

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/ipmi/wire"
	"github.com/bmlab/bmlab/internal/machine"
)

// TestBootOptionsBytes sends Set System Boot Options (IPMI v2.0 §28.12)
// frames byte by byte over a real session, then reads parameter 5 back with
// Get System Boot Options (§28.13) and checks the model. The first rows are
// the frames real clients send, captured with `ipmi-chassis --debug`
// (FreeIPMI 1.6.10) and ipmitool 1.8.19.
func TestBootOptionsBytes(t *testing.T) {
	l := newLab(t, 1, "127.0.0.1", nil)
	c := l.dial(t, 0, 17)
	do := func(cmd uint8, data ...byte) (wire.CompletionCode, []byte) {
		t.Helper()
		code, out, err := c.Do(wire.NetFnChassis, cmd, data...)
		if err != nil {
			t.Fatalf("cmd %#x % x: %v", cmd, data, err)
		}
		return code, out
	}
	none := machine.Boot{Target: machine.BootNone, Enabled: machine.BootDisabled, Mode: machine.BootModeLegacy}
	tests := []struct {
		name     string
		req      []byte // parameter selector, then the parameter's data
		wantCode wire.CompletionCode
		want     machine.Boot // the model afterwards (unchanged on an error)
		wantGet  []byte       // Get parameter 5 afterwards: version, selector, 5 data bytes
	}{
		// ipmi-chassis --set-boot-flags --boot-device=CD-DVD, with every
		// other set-boot-flags option given as no/default (without them
		// FreeIPMI 1.6.10 sends uninitialised memory), against a BMC with no
		// override: it writes back the device it read (none), so valid + no
		// override is what reaches the BMC.
		{"freeipmi CD-DVD on no override", []byte{5, 0x80, 0x00, 0x00, 0x00, 0x00}, wire.CodeOK,
			none, []byte{0x01, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00}},
		// The same command against a BMC already at CD/DVD, EFI, with
		// --boot-type given: all five bytes written back.
		{"freeipmi write-back CD EFI", []byte{5, 0xa0, 0x14, 0x00, 0x00, 0x00}, wire.CodeOK,
			machine.Boot{Target: machine.BootCd, Enabled: machine.BootOnce, Mode: machine.BootModeUEFI},
			[]byte{0x01, 0x05, 0xa0, 0x14, 0x00, 0x00, 0x00}},
		// ipmitool chassis bootdev cdrom.
		{"ipmitool bootdev cdrom", []byte{5, 0x80, 0x14, 0x00, 0x00, 0x00}, wire.CodeOK,
			machine.Boot{Target: machine.BootCd, Enabled: machine.BootOnce, Mode: machine.BootModeLegacy},
			[]byte{0x01, 0x05, 0x80, 0x14, 0x00, 0x00, 0x00}},
		{"persistent EFI PXE", []byte{5, 0xe0, 0x04, 0x00, 0x00, 0x00}, wire.CodeOK,
			machine.Boot{Target: machine.BootPxe, Enabled: machine.BootContinuous, Mode: machine.BootModeUEFI},
			[]byte{0x01, 0x05, 0xe0, 0x04, 0x00, 0x00, 0x00}},
		{"remote CD/DVD reads back as CD/DVD", []byte{5, 0x80, 0x20, 0x00, 0x00, 0x00}, wire.CodeOK,
			machine.Boot{Target: machine.BootCd, Enabled: machine.BootOnce, Mode: machine.BootModeLegacy},
			[]byte{0x01, 0x05, 0x80, 0x14, 0x00, 0x00, 0x00}},
		// Ironic's raw form: only the first two data bytes.
		{"ironic raw two bytes", []byte{5, 0x80, 0x18}, wire.CodeOK,
			machine.Boot{Target: machine.BootBiosSetup, Enabled: machine.BootOnce, Mode: machine.BootModeLegacy},
			[]byte{0x01, 0x05, 0x80, 0x18, 0x00, 0x00, 0x00}},
		// Bits a VM cannot honour (lock keyboard, console redirection,
		// device instance) are accepted and not kept.
		{"other bits ignored", []byte{5, 0x80, 0x08 | 0x40, 0x03, 0x00, 0x01}, wire.CodeOK,
			machine.Boot{Target: machine.BootHdd, Enabled: machine.BootOnce, Mode: machine.BootModeLegacy},
			[]byte{0x01, 0x05, 0x80, 0x08, 0x00, 0x00, 0x00}},
		{"diagnostic partition refused", []byte{5, 0x80, 0x10, 0x00, 0x00, 0x00}, wire.CodeInvalidDataField,
			machine.Boot{Target: machine.BootHdd, Enabled: machine.BootOnce, Mode: machine.BootModeLegacy},
			[]byte{0x01, 0x05, 0x80, 0x08, 0x00, 0x00, 0x00}},
		{"six data bytes", []byte{5, 0x80, 0x14, 0, 0, 0, 0}, wire.CodeDataLengthInvalid,
			machine.Boot{Target: machine.BootHdd, Enabled: machine.BootOnce, Mode: machine.BootModeLegacy},
			[]byte{0x01, 0x05, 0x80, 0x08, 0x00, 0x00, 0x00}},
		{"not valid clears the override", []byte{5, 0x00, 0x14, 0x00, 0x00, 0x00}, wire.CodeOK,
			none, []byte{0x01, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if code, out := do(cmdSetBootOptions, tt.req...); code != tt.wantCode || len(out) != 0 {
				t.Errorf("set % x: %v % x, want %v", tt.req, code, out, tt.wantCode)
			}
			if got := l.machine(t, 0).Settings.Boot; got != tt.want {
				t.Errorf("model %+v, want %+v", got, tt.want)
			}
			code, out := do(cmdGetBootOptions, 5, 0, 0)
			if code != wire.CodeOK {
				t.Fatalf("get parameter 5: %v", code)
			}
			if diff := cmp.Diff(tt.wantGet, out); diff != "" {
				t.Errorf("get parameter 5 (-want +got):\n%s", diff)
			}
		})
	}
	// Boot info acknowledge (parameter 4): FreeIPMI writes FFh FFh after the
	// flags; only bits 4:0 of data 2 are defined.
	if code, _ := do(cmdSetBootOptions, 4, 0xff, 0xff); code != wire.CodeOK {
		t.Errorf("set parameter 4: %v", code)
	}
	if code, out := do(cmdGetBootOptions, 4, 0, 0); code != wire.CodeOK || !cmp.Equal(out, []byte{0x01, 0x04, 0x00, 0x1f}) {
		t.Errorf("get parameter 4: %v % x, want 01 04 00 1f", code, out)
	}
}
