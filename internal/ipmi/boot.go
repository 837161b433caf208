package ipmi

import (
	"github.com/bmlab/bmlab/internal/ipmi/wire"
	"github.com/bmlab/bmlab/internal/machine"
)

// System boot option parameters (IPMI v2.0 §28.13, Table 28-14).
const (
	bootParamSetInProgress = 0
	bootParamValidClearing = 3
	bootParamAck           = 4
	bootParamFlags         = 5
)

// Boot flag bits, data 1 of parameter 5 (IPMI v2.0 §28.13, Table 28-14).
const (
	bootFlagValid      = 0x80
	bootFlagPersistent = 0x40
	bootFlagEFI        = 0x20
)

// Boot device selectors, bits 5:2 of data 2 of parameter 5.
const (
	devNone     = 0x0
	devPXE      = 0x1
	devDisk     = 0x2
	devDiskSafe = 0x3
	devDiag     = 0x4
	devCDROM    = 0x5
	devBIOS     = 0x6
	devRemoteFD = 0x7 // remote floppy / primary removable media
	devRemoteCD = 0x8
	devRemote   = 0x9 // primary remote media
	devRemoteHD = 0xb
	devFloppy   = 0xf
)

// codeParamUnsupported is Get/Set System Boot Options' "parameter not
// supported" (IPMI v2.0 §28.12, §28.13).
const codeParamUnsupported wire.CompletionCode = 0x80

// targetFor maps a device selector onto the model's boot sources.
func targetFor(dev byte) (machine.BootSource, bool) {
	switch dev {
	case devNone:
		return machine.BootNone, true
	case devPXE:
		return machine.BootPxe, true
	case devDisk, devRemoteHD:
		return machine.BootHdd, true
	case devDiskSafe:
		// A VM has no safe mode: the same disk, the guest decides the rest.
		return machine.BootHdd, true
	case devCDROM, devRemoteCD, devRemote:
		return machine.BootCd, true
	case devBIOS:
		return machine.BootBiosSetup, true
	case devRemoteFD:
		return machine.BootUsb, true
	}
	return "", false // diagnostic partition, floppy, reserved
}

// selectorFor maps a model boot source onto a device selector.
func selectorFor(t machine.BootSource) byte {
	switch t {
	case machine.BootPxe, machine.BootUefiHttp:
		// IPMI has no HTTP boot; network boot is the nearest truth.
		return devPXE
	case machine.BootHdd:
		return devDisk
	case machine.BootCd, machine.BootUsbCd:
		return devCDROM
	case machine.BootBiosSetup:
		return devBIOS
	case machine.BootUsb:
		return devRemoteFD
	}
	return devNone
}

// bootFlags renders the model's override as parameter 5: the valid bit only
// while an override is active (a spent Once reads back as not valid), the
// persistent bit for Continuous, the EFI bit for UEFI.
func bootFlags(bt machine.Boot) []byte {
	var d1, d2 byte
	if bt.Mode == machine.BootModeUEFI {
		d1 |= bootFlagEFI
	}
	if t := bt.Effective(); t != machine.BootNone {
		d1 |= bootFlagValid
		if bt.Enabled == machine.BootContinuous {
			d1 |= bootFlagPersistent
		}
		d2 = selectorFor(t) << 2
	}
	return []byte{d1, d2, 0, 0, 0}
}

// getBootOptions (IPMI v2.0 §28.13).
func (b *bmc) getBootOptions(_ *sessRef, d []byte) (wire.CompletionCode, []byte) {
	param := d[0] & 0x7f
	out := []byte{0x01, param} // parameter version 1, valid (unlocked)
	b.mu.Lock()
	inProgress, clearing, ack := b.setInProgress, b.validClearing, b.bootAck
	b.mu.Unlock()
	switch param {
	case bootParamSetInProgress:
		return wire.CodeOK, append(out, inProgress)
	case bootParamValidClearing:
		return wire.CodeOK, append(out, clearing)
	case bootParamAck:
		return wire.CodeOK, append(out, 0x00, ack)
	case bootParamFlags:
		m, cc := b.machine()
		if cc != wire.CodeOK {
			return cc, nil
		}
		// An UefiBootNext override shows as the kind of device its option
		// is: IPMI names kinds, not options.
		bt := m.Settings.Boot
		bt.Target = m.OverrideKind()
		return wire.CodeOK, append(out, bootFlags(bt)...)
	}
	return codeParamUnsupported, nil
}

// setBootOptions (IPMI v2.0 §28.12). Parameter 5 goes to the model; the
// others are the BMC's own bookkeeping, kept and read back. Ironic's raw
// form of parameter 5 carries only its first two data bytes; the rest are
// taken as zero.
func (b *bmc) setBootOptions(_ *sessRef, d []byte) (wire.CompletionCode, []byte) {
	param, data := d[0]&0x7f, d[1:]
	switch param {
	case bootParamSetInProgress:
		if len(data) != 1 {
			return wire.CodeDataLengthInvalid, nil
		}
		if data[0]&0x03 == 0x03 {
			return wire.CodeInvalidDataField, nil
		}
		// "Set in progress" is a courtesy lock; it is kept and read back but
		// not enforced, so a client that died mid-way locks nobody out.
		return b.keep(func() { b.setInProgress = data[0] & 0x03 }), nil
	case bootParamValidClearing:
		if len(data) != 1 {
			return wire.CodeDataLengthInvalid, nil
		}
		// Kept and read back. The model decides when an override is spent
		// (a Once override at the next boot), which these bits cannot move.
		return b.keep(func() { b.validClearing = data[0] & 0x1f }), nil
	case bootParamAck:
		if len(data) != 2 {
			return wire.CodeDataLengthInvalid, nil
		}
		// Data 1 is the write mask, data 2 the acknowledge bits; only bits
		// 4:0 are defined (IPMI v2.0 §28.13, parameter 4), so reserved bits a
		// client sets (FreeIPMI writes FFh FFh) are not kept.
		mask := data[0] & 0x1f
		return b.keep(func() { b.bootAck = b.bootAck&^mask | data[1]&mask }), nil
	case bootParamFlags:
		if len(data) < 1 || len(data) > 5 {
			return wire.CodeDataLengthInvalid, nil
		}
		var flags [5]byte
		copy(flags[:], data)
		return b.setBootFlags(flags), nil
	}
	return codeParamUnsupported, nil
}

// keep stores, under b.mu, a boot parameter the BMC keeps and reads back
// without acting on it.
func (b *bmc) keep(store func()) wire.CompletionCode {
	b.mu.Lock()
	defer b.mu.Unlock()
	store()
	return wire.CodeOK
}

func (b *bmc) setBootFlags(f [5]byte) wire.CompletionCode {
	var p machine.BootPatch
	if f[0]&bootFlagValid == 0 {
		// Not valid: no override (IPMI v2.0 §28.13, parameter 5, data 1 bit 7).
		none := machine.BootNone
		p.Target = &none
	} else {
		t, ok := targetFor(f[1] >> 2 & 0x0f)
		if !ok {
			return wire.CodeInvalidDataField
		}
		enabled := machine.BootOnce
		if f[0]&bootFlagPersistent != 0 {
			enabled = machine.BootContinuous
		}
		mode := machine.BootModeLegacy
		if f[0]&bootFlagEFI != 0 {
			mode = machine.BootModeUEFI
		} else if m, err := b.svc.Get(b.id); err == nil && m.Inventory.UEFIOnly() {
			// The BIOS boot type bit clear asks for a "PC compatible"
			// boot, which an aarch64 server does not have: its firmware
			// boots UEFI whatever the bit says, as ipmitool's plain
			// `chassis bootdev` leaves it clear.
			mode = machine.BootModeUEFI
		}
		p.Target, p.Mode = &t, &mode
		if t != machine.BootNone {
			p.Enabled = &enabled
		}
	}
	_, err := b.svc.SetBoot(b.ctx, b.id, p)
	return codeFor(err)
}
