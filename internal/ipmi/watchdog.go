package ipmi

import (
	"context"
	"encoding/binary"
	"time"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/ipmi/wire"
	"github.com/bmlab/bmlab/internal/machine"
)

// The watchdog timer (IPMI v2.0 §27): the OS (Linux's ipmi_watchdog,
// `ipmitool mc watchdog`) sets it and keeps resetting it; if it stops, the
// BMC does what the timer's action says through the machine model, as a
// power command over either face would: a hard reset (ForceRestart), a
// power down (ForceOff) or a power cycle. A pre-timeout interrupt comes
// first when asked for: an NMI (the model's Nmi), or the messaging
// interrupt (the watchdog pre-timeout message flag and the attention bit,
// sysif.go). Each expiry is logged in the SEL (Watchdog 2) unless the
// "don't log" bit is set. The timer runs only while started: a BMC keeps
// no ticker.

// Timer use byte (IPMI v2.0 §27.6, request data 1).
const (
	wdDontLog  = 0x80
	wdDontStop = 0x40
	wdRunning  = 0x40 // in Get Watchdog Timer's answer: the timer is started
)

// Pre-timeout interrupts (request data 2, bits 6:4) and time-out actions
// (bits 2:0).
const (
	wdPreNone = 0
	wdPreSMI  = 1
	wdPreNMI  = 2
	wdPreMsg  = 3

	wdActNone      = 0
	wdActReset     = 1
	wdActPowerDown = 2
	wdActCycle     = 3
)

// codeWatchdogUninitialized is Reset Watchdog Timer's "attempt to start
// un-initialized watchdog" (IPMI v2.0 §27.5).
const codeWatchdogUninitialized wire.CompletionCode = 0x80

type watchdog struct {
	use, actions, pretimeout byte
	expired                  byte   // timer use expiration flags
	countdown                uint16 // initial countdown, 100 ms units
	set                      bool   // Set Watchdog Timer came since the BMC started
	running                  bool
	preDone                  bool // the pre-timeout interrupt came
	deadline                 time.Time
	timer                    *time.Timer
	gen                      uint64 // the timer of this generation is the live one
}

// setWatchdog (IPMI v2.0 §27.6). SMI has no counterpart in a VM: CCh, as
// for any reserved value.
func (b *bmc) setWatchdog(_ *sessRef, d []byte) (wire.CompletionCode, []byte) {
	use, act, pre := d[0]&0x07, d[1]&0x07, d[1]>>4&0x07
	if use == 0 || use > 5 || act > wdActCycle || (pre != wdPreNone && pre != wdPreNMI && pre != wdPreMsg) {
		return wire.CodeInvalidDataField, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	w := &b.wd
	keep := w.running && d[0]&wdDontStop != 0
	w.use, w.actions, w.pretimeout = d[0]&(wdDontLog|wdDontStop|0x07), d[1]&0x77, d[2]
	w.expired &^= d[3] & 0x3e
	w.countdown = binary.LittleEndian.Uint16(d[4:6])
	w.set = true
	if keep {
		b.armWatchdogLocked()
	} else {
		b.stopWatchdogLocked()
	}
	return wire.CodeOK, nil
}

// resetWatchdog (IPMI v2.0 §27.5) starts the countdown again from its
// initial value.
func (b *bmc) resetWatchdog(_ *sessRef, _ []byte) (wire.CompletionCode, []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.wd.set {
		return codeWatchdogUninitialized, nil
	}
	b.armWatchdogLocked()
	return wire.CodeOK, nil
}

// getWatchdog (IPMI v2.0 §27.7).
func (b *bmc) getWatchdog(_ *sessRef, _ []byte) (wire.CompletionCode, []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := &b.wd
	use := w.use &^ wdDontStop
	left := uint16(0)
	if w.running {
		use |= wdRunning
		left = uint16(max(0, time.Until(w.deadline)/(100*time.Millisecond)))
	}
	out := []byte{use, w.actions, w.pretimeout, w.expired}
	out = binary.LittleEndian.AppendUint16(out, w.countdown)
	return wire.CodeOK, binary.LittleEndian.AppendUint16(out, left)
}

// armWatchdogLocked starts the countdown from its initial value. Callers
// hold b.mu.
func (b *bmc) armWatchdogLocked() {
	w := &b.wd
	b.stopWatchdogLocked()
	now := time.Now()
	w.running, w.preDone = true, false
	w.deadline = now.Add(time.Duration(w.countdown) * 100 * time.Millisecond)
	first := w.deadline
	if w.actions>>4&0x07 != wdPreNone {
		first = w.deadline.Add(-time.Duration(w.pretimeout) * time.Second)
	}
	gen := w.gen
	w.timer = time.AfterFunc(max(0, first.Sub(now)), func() { b.watchdogFired(gen) })
}

// stopWatchdogLocked stops the countdown. Callers hold b.mu.
func (b *bmc) stopWatchdogLocked() {
	w := &b.wd
	w.gen++
	w.running = false
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
}

// watchdogFired runs the pre-timeout interrupt, or the expiry.
func (b *bmc) watchdogFired(gen uint64) {
	b.mu.Lock()
	w := &b.wd
	if w.gen != gen || !w.running {
		b.mu.Unlock()
		return
	}
	use, pre, act := w.use&0x07, w.actions>>4&0x07, w.actions&0x07
	dontLog := w.use&wdDontLog != 0
	if pre != wdPreNone && !w.preDone {
		w.preDone = true
		if pre == wdPreMsg {
			b.msgFlags |= flagWatchdogPre
		}
		w.timer = time.AfterFunc(max(0, time.Until(w.deadline)), func() { b.watchdogFired(gen) })
		b.mu.Unlock()
		b.log.Info("watchdog pre-timeout interrupt", zap.Uint8("interrupt", pre))
		if !dontLog {
			// Watchdog 2, "timer interrupt" (offset 08h); data 2: the
			// interrupt type and the timer use (IPMI v2.0 Table 42-3).
			b.logEvent(event(genBMC, sensorTypeWatchdog2, sensorWatchdog, eventSensorSpecific, 0xc8, pre<<4|use))
		}
		if pre == wdPreNMI {
			go b.watchdogAction(machine.ResetNmi)
		}
		b.attention()
		return
	}
	w.running = false
	w.timer = nil
	w.expired |= 1 << use
	w.use &^= wdDontLog // cleared after every time-out (§27.7)
	b.mu.Unlock()
	b.log.Warn("watchdog expired", zap.Uint8("use", use), zap.Uint8("action", act))
	if !dontLog {
		// Watchdog 2: timer expired (offset 00h), hard reset (01h), power
		// down (02h), power cycle (03h).
		b.logEvent(event(genBMC, sensorTypeWatchdog2, sensorWatchdog, eventSensorSpecific, 0xc0|act, pre<<4|use))
	}
	switch act {
	case wdActReset:
		go b.watchdogAction(machine.ResetForceRestart)
	case wdActPowerDown:
		go b.watchdogAction(machine.ResetForceOff)
	case wdActCycle:
		go b.watchdogAction(machine.ResetPowerCycle)
	}
}

func (b *bmc) watchdogAction(rt machine.ResetType) {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Minute)
	defer cancel()
	if err := b.svc.Reset(ctx, b.id, rt); err != nil {
		b.log.Warn("watchdog action failed", zap.String("action", string(rt)), zap.Error(err))
	}
}
