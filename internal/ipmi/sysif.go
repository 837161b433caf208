package ipmi

import (
	"github.com/bmlab/bmlab/internal/ipmi/wire"
)

// The system interface's own state (IPMI v2.0 §22.1-§22.8): the BMC global
// enables, the message flags and the event message buffer. The OS's driver
// (Linux's ipmi_si) reads the flags when the interface's attention bit is
// set, which the in-band face asks qemu to do (inband.go, attention); it
// then reads the event buffer or clears the flags.

// BMC global enables (IPMI v2.0 §22.1).
const (
	enableRecvIRQ   = 0x01 // receive message queue interrupt
	enableEventIRQ  = 0x02 // event message buffer full interrupt
	enableEventBuf  = 0x04 // event message buffer
	enableSELLog    = 0x08 // system event logging
	enablesAtReset  = enableSELLog
	enablesSettable = enableRecvIRQ | enableEventIRQ | enableEventBuf | enableSELLog
)

// Message flags (IPMI v2.0 §22.4).
const (
	flagReceive     = 0x01 // receive message available
	flagEventBuffer = 0x02 // event message buffer full
	flagWatchdogPre = 0x08 // watchdog pre-timeout interrupt occurred
)

// codeNoData is "data not available" of Get Message and Read Event
// Message Buffer (IPMI v2.0 §22.6, §22.8): the queue or buffer is empty.
const codeNoData wire.CompletionCode = 0x80

// setGlobalEnables (IPMI v2.0 §22.1). OEM bits and reserved bit 4 cannot
// be set: CCh. Turning the receive message interrupt on or off turns the
// KCS interface's interrupt on or off (qemu's VM protocol, enable-irq and
// disable-irq), as OpenIPMI's BMC does.
func (b *bmc) setGlobalEnables(_ *sessRef, d []byte) (wire.CompletionCode, []byte) {
	if d[0]&^enablesSettable != 0 {
		return wire.CodeInvalidDataField, nil
	}
	b.mu.Lock()
	old := b.enables
	b.enables = d[0]
	if d[0]&enableEventBuf == 0 {
		b.msgFlags &^= flagEventBuffer // no buffer, nothing in it
	}
	k := b.kcs
	b.mu.Unlock()
	if k != nil && (old^d[0])&enableRecvIRQ != 0 {
		k.irq(d[0]&enableRecvIRQ != 0)
	}
	b.attention()
	return wire.CodeOK, nil
}

// getGlobalEnables (IPMI v2.0 §22.2).
func (b *bmc) getGlobalEnables(_ *sessRef, _ []byte) (wire.CompletionCode, []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return wire.CodeOK, []byte{b.enables}
}

// clearMessageFlags (IPMI v2.0 §22.3): bit 0 empties the receive message
// queue, bit 1 the event message buffer, bit 3 the watchdog pre-timeout
// flag.
func (b *bmc) clearMessageFlags(_ *sessRef, d []byte) (wire.CompletionCode, []byte) {
	b.mu.Lock()
	b.msgFlags &^= d[0] & (flagReceive | flagEventBuffer | flagWatchdogPre)
	b.mu.Unlock()
	b.attention()
	return wire.CodeOK, nil
}

// getMessageFlags (IPMI v2.0 §22.4).
func (b *bmc) getMessageFlags(_ *sessRef, _ []byte) (wire.CompletionCode, []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return wire.CodeOK, []byte{b.msgFlags}
}

// getMessage (IPMI v2.0 §22.6): the receive message queue holds what other
// channels send to system software (Send Message, §22.7), which this BMC
// does not bridge: it is always empty.
func (b *bmc) getMessage(_ *sessRef, _ []byte) (wire.CompletionCode, []byte) {
	return codeNoData, nil
}

// readEventBuffer (IPMI v2.0 §22.8): the event the buffer holds, in SEL
// record format, which empties it.
func (b *bmc) readEventBuffer(_ *sessRef, _ []byte) (wire.CompletionCode, []byte) {
	b.mu.Lock()
	if b.msgFlags&flagEventBuffer == 0 {
		b.mu.Unlock()
		return codeNoData, nil
	}
	b.msgFlags &^= flagEventBuffer
	ev := b.evBuf
	b.mu.Unlock()
	b.attention()
	return wire.CodeOK, ev[:]
}

// bufferEvent offers a new SEL record to the event message buffer: taken
// when the buffer is enabled and empty (a full buffer keeps the older
// event, §22.8), which sets the attention bit.
func (b *bmc) bufferEvent(r [16]byte) {
	b.mu.Lock()
	took := b.enables&enableEventBuf != 0 && b.msgFlags&flagEventBuffer == 0
	if took {
		b.evBuf = r
		b.msgFlags |= flagEventBuffer
	}
	b.mu.Unlock()
	if took {
		b.attention()
	}
}

// attention sets or clears the KCS interface's attention bit as the
// message flags say, with an interrupt when the OS enabled the one that
// goes with a flag.
func (b *bmc) attention() {
	b.mu.Lock()
	k := b.kcs
	f, e := b.msgFlags, b.enables
	b.mu.Unlock()
	if k == nil {
		return
	}
	irq := f&flagEventBuffer != 0 && e&enableEventIRQ != 0 ||
		f&(flagReceive|flagWatchdogPre) != 0 && e&enableRecvIRQ != 0
	k.attention(f != 0, irq)
}

// systemReset is the machine's reset as qemu reports it (VM protocol
// reset): the system interface's state as at power-up (§22.1: global
// enables xxxx_100xb), the watchdog's "don't log" bit cleared (§27.7); a
// running watchdog keeps running, as a hang during the boot it guards must
// still trip it.
func (b *bmc) systemReset() {
	b.mu.Lock()
	b.enables = enablesAtReset
	b.msgFlags = 0
	b.wd.use &^= wdDontLog
	b.mu.Unlock()
	b.attention()
}
