package ipmi

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/ipmi/session"
	"github.com/bmlab/bmlab/internal/ipmi/wire"
	"github.com/bmlab/bmlab/internal/machine"
)

// Commands, by network function (IPMI v2.0 Appendix G).
const (
	// App (NetFn 06h)
	cmdGetDeviceID            = 0x01
	cmdColdReset              = 0x02
	cmdWarmReset              = 0x03
	cmdGetACPIPowerState      = 0x07
	cmdGetSystemGUID          = 0x37
	cmdGetChannelAuthCaps     = 0x38
	cmdSetSessionPrivilege    = 0x3b
	cmdCloseSession           = 0x3c
	cmdGetSessionInfo         = 0x3d
	cmdGetChannelAccess       = 0x41
	cmdGetChannelInfo         = 0x42
	cmdSetUserAccess          = 0x43
	cmdGetUserAccess          = 0x44
	cmdSetUserName            = 0x45
	cmdGetUserName            = 0x46
	cmdSetUserPassword        = 0x47
	cmdActivatePayload        = 0x48
	cmdDeactivatePayload      = 0x49
	cmdGetPayloadStatus       = 0x4a
	cmdGetChannelCipherSuites = 0x54
	cmdResetWatchdog          = 0x22
	cmdSetWatchdog            = 0x24
	cmdGetWatchdog            = 0x25
	cmdSetGlobalEnables       = 0x2e
	cmdGetGlobalEnables       = 0x2f
	cmdClearMessageFlags      = 0x30
	cmdGetMessageFlags        = 0x31
	cmdGetMessage             = 0x33
	cmdReadEventBuffer        = 0x35

	// Chassis (NetFn 00h)
	cmdGetChassisStatus = 0x01
	cmdChassisControl   = 0x02
	cmdChassisIdentify  = 0x04
	cmdSetBootOptions   = 0x08
	cmdGetBootOptions   = 0x09

	// Storage (NetFn 0Ah)
	cmdGetSDRRepoInfo = 0x20
	cmdReserveSDRRepo = 0x22
	cmdGetSDR         = 0x23
	cmdGetSELInfo     = 0x40
	cmdReserveSEL     = 0x42
	cmdGetSELEntry    = 0x43
	cmdAddSELEntry    = 0x44
	cmdClearSEL       = 0x47
	cmdGetSELTime     = 0x48
	cmdSetSELTime     = 0x49

	// Transport (NetFn 0Ch)
	cmdSetLANConfig = 0x01
	cmdGetLANConfig = 0x02
	cmdSetSOLConfig = 0x21
	cmdGetSOLConfig = 0x22
)

type handler struct {
	priv uint8 // minimum session privilege (IPMI v2.0 Appendix G)
	fn   func(b *bmc, s *sessRef, d []byte) (wire.CompletionCode, []byte)
	face face // the faces that take it; both when zero
	// min and max bound the length of the request data (the command's
	// table in IPMI v2.0; 0xffff: no bound above, a payload's length is 16
	// bits): a request outside gets C7h before fn runs, which checks the
	// rest (a length that depends on a parameter).
	min, max int
}

// face says which of a BMC's faces take a command.
type face uint8

const (
	bothFaces face = iota
	// lanOnly: commands about LAN sessions and their payloads, which the
	// system interface has none of (it is session-less, IPMI v2.0
	// §6.12.2): D5h there.
	lanOnly
	// systemOnly: the "Local" commands of IPMI v2.0 Appendix G, which
	// only the system interface may send (its message flags, its event
	// message buffer): D4h over LAN, whatever the session's privilege.
	systemOnly
)

type key struct {
	netFn wire.NetFn
	cmd   uint8
}

var handlers map[key]handler

func init() {
	handlers = map[key]handler{
		{wire.NetFnApp, cmdGetDeviceID}:            {privUser, (*bmc).getDeviceID, bothFaces, 0, 0},
		{wire.NetFnApp, cmdColdReset}:              {privAdmin, (*bmc).resetController, bothFaces, 0, 0},
		{wire.NetFnApp, cmdWarmReset}:              {privAdmin, (*bmc).resetController, bothFaces, 0, 0},
		{wire.NetFnApp, cmdGetACPIPowerState}:      {privUser, (*bmc).getACPIPowerState, bothFaces, 0, 0},
		{wire.NetFnApp, cmdGetSystemGUID}:          {privUser, (*bmc).getSystemGUID, bothFaces, 0, 0},
		{wire.NetFnApp, cmdGetChannelAuthCaps}:     {privCallback, (*bmc).getChannelAuthCaps, bothFaces, 2, 2},
		{wire.NetFnApp, cmdSetSessionPrivilege}:    {privCallback, (*bmc).setSessionPrivilege, lanOnly, 1, 1},
		{wire.NetFnApp, cmdCloseSession}:           {privCallback, (*bmc).closeSession, bothFaces, 4, 5},
		{wire.NetFnApp, cmdGetChannelInfo}:         {privUser, (*bmc).getChannelInfo, bothFaces, 1, 1},
		{wire.NetFnApp, cmdGetChannelAccess}:       {privUser, (*bmc).getChannelAccess, bothFaces, 2, 2},
		{wire.NetFnApp, cmdGetSessionInfo}:         {privUser, (*bmc).getSessionInfo, bothFaces, 1, 0xffff},
		{wire.NetFnApp, cmdGetUserAccess}:          {privOperator, (*bmc).getUserAccess, bothFaces, 2, 2},
		{wire.NetFnApp, cmdGetUserName}:            {privOperator, (*bmc).getUserName, bothFaces, 1, 1},
		{wire.NetFnApp, cmdSetUserAccess}:          {privAdmin, (*bmc).setUserAccess, bothFaces, 3, 4},
		{wire.NetFnApp, cmdSetUserName}:            {privAdmin, (*bmc).setUserName, bothFaces, 17, 17},
		{wire.NetFnApp, cmdSetUserPassword}:        {privAdmin, (*bmc).setUserPassword, bothFaces, 2, 0xffff},
		{wire.NetFnApp, cmdActivatePayload}:        {privOperator, (*bmc).activatePayload, lanOnly, 6, 6},
		{wire.NetFnApp, cmdDeactivatePayload}:      {privUser, (*bmc).deactivatePayload, lanOnly, 6, 6},
		{wire.NetFnApp, cmdGetPayloadStatus}:       {privUser, (*bmc).getPayloadStatus, bothFaces, 1, 1},
		{wire.NetFnApp, cmdGetChannelCipherSuites}: {privCallback, (*bmc).getChannelCipherSuites, bothFaces, 3, 3},
		{wire.NetFnApp, cmdResetWatchdog}:          {privOperator, (*bmc).resetWatchdog, bothFaces, 0, 0},
		{wire.NetFnApp, cmdSetWatchdog}:            {privOperator, (*bmc).setWatchdog, bothFaces, 6, 6},
		{wire.NetFnApp, cmdGetWatchdog}:            {privUser, (*bmc).getWatchdog, bothFaces, 0, 0},
		{wire.NetFnApp, cmdSetGlobalEnables}:       {privAdmin, (*bmc).setGlobalEnables, systemOnly, 1, 1},
		{wire.NetFnApp, cmdGetGlobalEnables}:       {privUser, (*bmc).getGlobalEnables, bothFaces, 0, 0},
		{wire.NetFnApp, cmdClearMessageFlags}:      {privAdmin, (*bmc).clearMessageFlags, systemOnly, 1, 1},
		{wire.NetFnApp, cmdGetMessageFlags}:        {privAdmin, (*bmc).getMessageFlags, systemOnly, 0, 0},
		{wire.NetFnApp, cmdGetMessage}:             {privAdmin, (*bmc).getMessage, systemOnly, 0, 0},
		{wire.NetFnApp, cmdReadEventBuffer}:        {privAdmin, (*bmc).readEventBuffer, systemOnly, 0, 0},

		{wire.NetFnChassis, cmdGetChassisStatus}: {privUser, (*bmc).getChassisStatus, bothFaces, 0, 0},
		{wire.NetFnChassis, cmdChassisControl}:   {privOperator, (*bmc).chassisControl, bothFaces, 1, 1},
		{wire.NetFnChassis, cmdChassisIdentify}:  {privOperator, (*bmc).chassisIdentify, bothFaces, 0, 2},
		{wire.NetFnChassis, cmdSetBootOptions}:   {privOperator, (*bmc).setBootOptions, bothFaces, 1, 0xffff},
		{wire.NetFnChassis, cmdGetBootOptions}:   {privUser, (*bmc).getBootOptions, bothFaces, 3, 3},

		{wire.NetFnStorage, cmdGetSDRRepoInfo}: {privUser, (*bmc).getSDRRepoInfo, bothFaces, 0, 0},
		{wire.NetFnStorage, cmdReserveSDRRepo}: {privUser, (*bmc).reserve, bothFaces, 0, 0},
		{wire.NetFnStorage, cmdGetSDR}:         {privUser, (*bmc).getSDR, bothFaces, 6, 6},
		{wire.NetFnStorage, cmdGetSELInfo}:     {privUser, (*bmc).getSELInfo, bothFaces, 0, 0},
		{wire.NetFnStorage, cmdReserveSEL}:     {privUser, (*bmc).reserve, bothFaces, 0, 0},
		{wire.NetFnStorage, cmdGetSELEntry}:    {privUser, (*bmc).getSELEntry, bothFaces, 6, 6},
		{wire.NetFnStorage, cmdAddSELEntry}:    {privOperator, (*bmc).addSELEntry, bothFaces, 16, 16},
		{wire.NetFnStorage, cmdClearSEL}:       {privOperator, (*bmc).clearSEL, bothFaces, 6, 6},
		{wire.NetFnStorage, cmdGetSELTime}:     {privUser, (*bmc).getSELTime, bothFaces, 0, 0},
		{wire.NetFnStorage, cmdSetSELTime}:     {privOperator, (*bmc).setSELTime, bothFaces, 4, 4},

		{wire.NetFnSensor, cmdPlatformEvent}:       {privOperator, (*bmc).platformEvent, bothFaces, 5, 8},
		{wire.NetFnSensor, cmdGetSensorReading}:    {privUser, (*bmc).getSensorReading, bothFaces, 1, 1},
		{wire.NetFnSensor, cmdGetSensorThresholds}: {privUser, (*bmc).getSensorThresholds, bothFaces, 1, 1},

		{wire.NetFnTransport, cmdSetLANConfig}: {privAdmin, (*bmc).setLANConfig, bothFaces, 3, 0xffff},
		{wire.NetFnTransport, cmdGetLANConfig}: {privOperator, (*bmc).getLANConfig, bothFaces, 4, 4},
		{wire.NetFnTransport, cmdGetSOLConfig}: {privUser, (*bmc).getSOLConfig, bothFaces, 4, 4},
		{wire.NetFnTransport, cmdSetSOLConfig}: {privAdmin, (*bmc).setSOLConfig, bothFaces, 2, 0xffff},
	}
}

// command runs one request. s is nil outside a session, where only the
// commands sessionless lets through arrive, and the system interface for
// the in-band face (inband.go).
func (b *bmc) command(s *sessRef, req wire.Request) (wire.CompletionCode, []byte) {
	if req.RsLUN != 0 {
		return wire.CodeInvalidForLUN, nil
	}
	h, ok := handlers[key{req.NetFn, req.Cmd}]
	if !ok {
		return wire.CodeInvalidCommand, nil
	}
	system := s != nil && s.system
	switch {
	case h.face == lanOnly && system:
		return wire.CodeNotInPresentState, nil
	case h.face == systemOnly && !system:
		return wire.CodeInsufficientPriv, nil
	}
	if s != nil && !system {
		b.mu.Lock()
		ss := b.sessions[s.id]
		priv := uint8(0)
		if ss != nil {
			priv = ss.priv
		}
		b.mu.Unlock()
		if priv < h.priv {
			return wire.CodeInsufficientPriv, nil
		}
	}
	if len(req.Data) < h.min || len(req.Data) > h.max {
		return wire.CodeDataLengthInvalid, nil
	}
	return h.fn(b, s, req.Data)
}

// codeFor turns a model error into a completion code: what the client did
// wrong (0xCC, 0xD5), what this machine cannot do (0xD6) and what failed
// underneath (0xFF) are told apart.
func codeFor(err error) wire.CompletionCode {
	switch {
	case err == nil:
		return wire.CodeOK
	case errors.Is(err, machine.ErrInvalid):
		return wire.CodeInvalidDataField
	case errors.As(err, new(*machine.BusyError)):
		return wire.CodeNodeBusy // another action runs: retry (IPMI v2.0 §5.2, C0h)
	case errors.Is(err, machine.ErrConflict):
		return wire.CodeNotInPresentState
	case errors.Is(err, machine.ErrUnsupported):
		// A setting this machine cannot take (no CD-ROM drive, no secure
		// boot firmware): the command is known and well formed, the
		// sub-function is unavailable here (IPMI v2.0 §5.2, D6h), not
		// an unknown command (C1h), which clients report as "Invalid
		// command" and read as an unsupported BMC.
		return wire.CodeSubFunctionDisabled
	case errors.Is(err, machine.ErrNotFound), errors.Is(err, machine.ErrUnavailable):
		return wire.CodeDestinationUnavail
	case errors.Is(err, context.DeadlineExceeded):
		return wire.CodeTimeout
	}
	return wire.CodeUnspecified
}

func (b *bmc) machine() (*machine.Machine, wire.CompletionCode) {
	m, err := b.svc.Get(b.id)
	if err != nil {
		return nil, codeFor(err)
	}
	return m, wire.CodeOK
}

func isOn(m *machine.Machine) bool {
	return m.Power == machine.PowerOn || m.Power == machine.PowerPoweringOff
}

// resetController answers Cold and Warm Reset (IPMI v2.0 §20.2, §20.3):
// the answer goes out first, then the BMC starts over (machine.ResetBMC),
// ending every session, this one included. Both resets are the same here:
// the BMC keeps no state a warm reset would spare.
func (b *bmc) resetController(s *sessRef, _ []byte) (wire.CompletionCode, []byte) {
	if s == nil {
		return wire.CodeInsufficientPriv, nil
	}
	b.mu.Lock()
	b.resetAfterReply = true
	b.mu.Unlock()
	return wire.CodeOK, nil
}

// getDeviceID (IPMI v2.0 §20.1).
func (b *bmc) getDeviceID(_ *sessRef, _ []byte) (wire.CompletionCode, []byte) {
	m, cc := b.machine()
	if cc != wire.CodeOK {
		return cc, nil
	}
	p := b.personaOf(m)
	fw := m.Settings.Firmware[machine.FirmwareBMC]
	if fw == "" {
		fw = p.BMCFirmware
	}
	major, minor, aux := firmwareRevision(fw)
	out := []byte{
		0x20,         // device ID
		0x01,         // device revision; no device SDRs
		major & 0x7f, // firmware major revision, normal operation
		minor,        // firmware minor revision, BCD
		0x02,         // IPMI version 2.0
		0x87,         // chassis device, SEL device, SDR repository device, sensor device
	}
	out = append(out, byte(p.IPMIManufacturer), byte(p.IPMIManufacturer>>8), byte(p.IPMIManufacturer>>16)&0x0f)
	out = append(out, 0x01, 0x00) // product ID
	return wire.CodeOK, append(out, aux[:]...)
}

// firmwareRevision encodes a firmware version as Get Device ID does (IPMI
// v2.0 §20.1): the first two numbers joined by a dot ("7.10" of
// "7.10.70.00", "1.59" of "iLO 6 v1.59") as a binary major revision and a
// BCD minor one, the numbers after them in the four auxiliary bytes.
func firmwareRevision(v string) (major, minor byte, aux [4]byte) {
	loc := firmwareRe.FindStringSubmatchIndex(v)
	if loc == nil {
		return 0, 0, aux
	}
	nums := strings.Split(v[loc[0]:loc[1]], ".")
	n := func(s string) int { i, _ := strconv.Atoi(s); return i }
	major = byte(min(n(nums[0]), 0x7f))
	mi := n(nums[1]) % 100
	minor = byte(mi/10<<4 | mi%10)
	for i, x := range nums[2:min(len(nums), 6)] {
		aux[i] = byte(n(x))
	}
	return major, minor, aux
}

var firmwareRe = regexp.MustCompile(`[0-9]+\.[0-9]+(\.[0-9]+)*`)

// getACPIPowerState (IPMI v2.0 §20.7): S0/G0 working or S5/G2 soft-off.
func (b *bmc) getACPIPowerState(_ *sessRef, _ []byte) (wire.CompletionCode, []byte) {
	m, cc := b.machine()
	if cc != wire.CodeOK {
		return cc, nil
	}
	if isOn(m) {
		return wire.CodeOK, []byte{0x00, 0x00} // S0/G0, D0
	}
	return wire.CodeOK, []byte{0x05, 0x03} // S5/G2, D3
}

// getSystemGUID (IPMI v2.0 §22.14): the machine's UUID.
func (b *bmc) getSystemGUID(_ *sessRef, _ []byte) (wire.CompletionCode, []byte) {
	g := b.guid
	return wire.CodeOK, g[:]
}

func validChannel(c byte) bool { c &= 0x0f; return c == currentChannel || c == lanChannel }

// systemChannel is the system interface (IPMI v2.0 §6.3, channel 0Fh):
// the in-band face.
const systemChannel = 0x0f

// getChannelAuthCaps (IPMI v2.0 §22.13). With bit 7 of the channel byte the
// console asks for the v2.0 extended data: RMCP+ only, non-null user names.
func (b *bmc) getChannelAuthCaps(_ *sessRef, d []byte) (wire.CompletionCode, []byte) {
	if !validChannel(d[0]) || d[1]&0x0f == 0 || d[1]&0x0f > privOEM {
		return wire.CodeInvalidDataField, nil
	}
	v2 := d[0]&0x80 != 0
	out := []byte{lanChannel, 0x00, 0x04, 0x00, 0, 0, 0, 0}
	if v2 {
		out[1] = 0x80 // IPMI v2.0+ extended capabilities available
		out[3] = 0x02 // IPMI v2.0 connections supported, v1.5 not
	}
	return wire.CodeOK, out
}

// getChannelCipherSuites (IPMI v2.0 §22.15), answered outside sessions too:
// ipmitool asks before it opens one. Records are returned 16 bytes at a time.
func (b *bmc) getChannelCipherSuites(_ *sessRef, d []byte) (wire.CompletionCode, []byte) {
	if !validChannel(d[0]) || d[1]&0x3f > 1 {
		return wire.CodeInvalidDataField, nil
	}
	var recs []byte
	if d[2]&0x80 != 0 {
		for _, id := range b.cfg.suites() {
			s := session.Suites[id]
			recs = append(recs, 0xc0, id, s.Auth, 0x40|s.Integrity, 0x80|s.Conf)
		}
	} else {
		seen := map[byte]bool{}
		for _, id := range b.cfg.suites() {
			s := session.Suites[id]
			for _, a := range []byte{s.Auth, 0x40 | s.Integrity, 0x80 | s.Conf} {
				if !seen[a] {
					seen[a] = true
					recs = append(recs, a)
				}
			}
		}
	}
	idx := int(d[2]&0x3f) * 16
	out := []byte{lanChannel}
	if idx < len(recs) {
		out = append(out, recs[idx:min(idx+16, len(recs))]...)
	}
	return wire.CodeOK, out
}

// setSessionPrivilege (IPMI v2.0 §22.18).
func (b *bmc) setSessionPrivilege(s *sessRef, d []byte) (wire.CompletionCode, []byte) {
	if s == nil {
		return wire.CodeInsufficientPriv, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	ss := b.sessions[s.id]
	if ss == nil {
		return wire.CodeInsufficientPriv, nil
	}
	lvl := d[0] & 0x0f
	switch {
	case lvl == 0:
	case lvl > privOEM:
		return wire.CodeInvalidDataField, nil
	case lvl == privOEM:
		return 0x80, nil // requested level not available for this user
	case lvl > ss.limit:
		return 0x81, nil // exceeds the channel or user privilege limit
	default:
		ss.priv = lvl
	}
	return wire.CodeOK, []byte{ss.priv}
}

// closeSession (IPMI v2.0 §22.19): a session closes itself, or an
// administrator closes another.
func (b *bmc) closeSession(s *sessRef, d []byte) (wire.CompletionCode, []byte) {
	id := binary.LittleEndian.Uint32(d[0:4])
	b.mu.Lock()
	defer b.mu.Unlock()
	if id == 0 {
		return 0x88, nil // invalid session handle (handles are not supported)
	}
	target := b.sessions[id]
	if target == nil {
		return 0x87, nil // invalid session ID
	}
	if s == nil || (id != s.id && b.sessions[s.id] != nil && b.sessions[s.id].priv < privAdmin) {
		return wire.CodeInsufficientPriv, nil
	}
	if id == s.id {
		target.closing = true // the answer still needs the keys; inSession drops it after sealing
		return wire.CodeOK, nil
	}
	b.dropLocked(id)
	return wire.CodeOK, nil
}

// getChannelInfo (IPMI v2.0 §22.24): the LAN channel, 802.3 and
// multi-session; the system interface (channel 0Fh, §6.3), a session-less
// KCS. "This channel" (0Eh) is the one the request came on.
func (b *bmc) getChannelInfo(s *sessRef, d []byte) (wire.CompletionCode, []byte) {
	c := d[0] & 0x0f
	if c == currentChannel && s != nil && s.system || c == systemChannel {
		return wire.CodeOK, []byte{
			systemChannel, 0x0c, 0x05, 0x00, // medium: system interface; protocol: KCS; session-less
			0xf2, 0x1b, 0x00, // IPMI forum enterprise number, 7154
			0x60, 0x60, // SMS and event message buffer interrupts: assigned by ACPI (qemu's irq)
		}
	}
	if !validChannel(d[0]) {
		return wire.CodeInvalidDataField, nil
	}
	b.mu.Lock()
	active := 0
	for _, s := range b.sessions {
		if s.state == stateActive {
			active++
		}
	}
	b.mu.Unlock()
	return wire.CodeOK, []byte{
		lanChannel, 0x04, 0x01, 0x80 | byte(min(active, 0x3f)),
		0xf2, 0x1b, 0x00, // IPMI forum enterprise number, 7154
		0x00, 0x00,
	}
}

// getChannelAccess (IPMI v2.0 §22.23): always available, alerting off,
// administrator limit.
func (b *bmc) getChannelAccess(_ *sessRef, d []byte) (wire.CompletionCode, []byte) {
	if !validChannel(d[0]) || d[1]>>6 == 0 || d[1]>>6 == 3 {
		return wire.CodeInvalidDataField, nil
	}
	return wire.CodeOK, []byte{0x22, privAdmin}
}

// getSessionInfo (IPMI v2.0 §22.20): the current session (index 0) or the
// n-th active one.
func (b *bmc) getSessionInfo(s *sessRef, d []byte) (wire.CompletionCode, []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var active []*sess
	for _, ss := range b.sessions {
		if ss.state == stateActive {
			active = append(active, ss)
		}
	}
	var target *sess
	switch idx := int(d[0]); {
	case idx == 0 && s != nil:
		target = b.sessions[s.id]
	case idx >= 1 && idx <= len(active):
		target = active[idx-1]
	case idx == 0xff && len(d) == 5:
		target = b.sessions[binary.LittleEndian.Uint32(d[1:5])]
	default:
		return wire.CodeInvalidDataField, nil
	}
	out := []byte{0x01, byte(b.cfg.maxSessions), byte(len(active))}
	if target == nil {
		return wire.CodeOK, out
	}
	uid := byte(0)
	for i, u := range b.users {
		if u.Username == target.user {
			uid = byte(i + 2)
		}
	}
	out = append(out, uid, target.priv, 0x10|lanChannel)
	ip, port := make([]byte, 4), uint16(0)
	if a, ok := target.addr.(*net.UDPAddr); ok {
		if v4 := a.IP.To4(); v4 != nil {
			copy(ip, v4)
		}
		port = uint16(a.Port)
	}
	out = append(out, ip...)
	out = append(out, 0, 0, 0, 0, 0, 0) // console MAC: unknown
	return wire.CodeOK, binary.LittleEndian.AppendUint16(out, port)
}

// getChassisStatus (IPMI v2.0 §28.2).
func (b *bmc) getChassisStatus(_ *sessRef, _ []byte) (wire.CompletionCode, []byte) {
	m, cc := b.machine()
	if cc != wire.CodeOK {
		return cc, nil
	}
	var power, last byte
	if isOn(m) {
		power = 0x01
	}
	b.mu.Lock()
	if b.powerFault || m.PowerFault != "" {
		// Power control fault: a command did not reach its state, here or
		// (the model keeps it) through the other face.
		power |= 0x10
	}
	if b.powerOnByIPMI {
		last = 0x10 // last power-on was by an IPMI command
	}
	misc := byte(0x40) // chassis identify state is reported
	if m.IndicatorLED {
		if !b.identifyUntil.IsZero() {
			misc |= 0x10 // temporary
		} else {
			misc |= 0x20 // indefinite
		}
	}
	b.mu.Unlock()
	return wire.CodeOK, []byte{power, last, misc, 0x00}
}

// chassisControls are the model's resets for Chassis Control's data byte 1,
// bits 3:0 (IPMI v2.0 §28.3): power down, power up, power cycle, hard
// reset, pulse diagnostic interrupt (an NMI), soft shutdown by ACPI.
var chassisControls = []machine.ResetType{
	machine.ResetForceOff,
	machine.ResetOn,
	machine.ResetPowerCycle,
	machine.ResetForceRestart,
	machine.ResetNmi,
	machine.ResetGracefulShutdown,
}

// chassisControl (IPMI v2.0 §28.3). The answer comes within
// config.replyWithin; a slower backend keeps working after it. A failure
// that comes back in time is the completion code; one that comes later (a
// start libvirt refuses after a second of work) is what a real BMC reports
// for a command it accepted but could not carry out: "power control fault"
// in Get Chassis Status (§28.2, current power state bit 4), until the next
// chassis control succeeds.
func (b *bmc) chassisControl(_ *sessRef, d []byte) (wire.CompletionCode, []byte) {
	c := int(d[0] & 0x0f)
	if c >= len(chassisControls) {
		return wire.CodeInvalidDataField, nil
	}
	rt := chassisControls[c]
	m, cc := b.machine()
	if cc != wire.CodeOK {
		return cc, nil
	}
	if rt == machine.ResetOn && m.Power == machine.PowerPoweringOn {
		return wire.CodeOK, nil // already on its way
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Minute)
		defer cancel()
		done <- b.svc.Reset(ctx, b.id, rt)
	}()
	starts := rt == machine.ResetOn || rt == machine.ResetPowerCycle || rt == machine.ResetForceRestart
	t := time.NewTimer(b.cfg.replyWithin)
	defer t.Stop()
	select {
	case err := <-done:
		b.mu.Lock()
		b.powerFault = err != nil
		if err == nil && starts {
			b.powerOnByIPMI = true
		}
		b.mu.Unlock()
		return codeFor(err), nil
	case <-t.C:
		if starts {
			b.mu.Lock()
			b.powerOnByIPMI = true
			b.mu.Unlock()
		}
		go func() {
			err := <-done
			b.mu.Lock()
			b.powerFault = err != nil
			b.mu.Unlock()
			if err != nil {
				b.log.Warn("chassis control failed after the answer; chassis status reports a power control fault", zap.String("action", string(rt)), zap.Error(err))
			}
		}()
		return wire.CodeOK, nil
	}
}

// chassisIdentify (IPMI v2.0 §28.5): interval in seconds (default 15, 0
// off), or on until told otherwise with "force on".
func (b *bmc) chassisIdentify(_ *sessRef, d []byte) (wire.CompletionCode, []byte) {
	interval := 15 * time.Second
	if len(d) >= 1 {
		interval = time.Duration(d[0]) * time.Second
	}
	force := len(d) == 2 && d[1]&0x01 != 0
	on := force || interval > 0
	if err := b.svc.SetIndicator(b.id, on); err != nil {
		return codeFor(err), nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.identifyTimer != nil {
		b.identifyTimer.Stop()
		b.identifyTimer = nil
	}
	b.identifyUntil = time.Time{}
	if on && !force {
		b.identifyUntil = time.Now().Add(interval)
		b.identifyTimer = time.AfterFunc(interval, func() {
			b.mu.Lock()
			b.identifyUntil = time.Time{}
			b.identifyTimer = nil
			b.mu.Unlock()
			if err := b.svc.SetIndicator(b.id, false); err != nil {
				b.log.Debug("identify off", zap.Error(err))
			}
		})
	}
	return wire.CodeOK, nil
}

func (b *bmc) reserve(_ *sessRef, _ []byte) (wire.CompletionCode, []byte) {
	b.mu.Lock()
	b.reservation++
	if b.reservation == 0 {
		b.reservation = 1
	}
	r := b.reservation
	b.mu.Unlock()
	return wire.CodeOK, binary.LittleEndian.AppendUint16(nil, r)
}

func (b *bmc) getSELTime(_ *sessRef, _ []byte) (wire.CompletionCode, []byte) {
	// The BMC's clock: the host's plus the skew Redfish's Manager
	// DateTime set (machine/clock.go).
	now := time.Now()
	if m, cc := b.machine(); cc == wire.CodeOK {
		now = m.BMCTime(now)
	}
	return wire.CodeOK, binary.LittleEndian.AppendUint32(nil, uint32(now.Unix()))
}
