package redfish

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/bmlab/bmlab/internal/admission"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/personality"
)

// Quirks: the vendors' known misbehaviours (internal/personality, quirks.go),
// each on for a machine whose personality or switches say so. They change
// answers only; the machine model keeps its semantics. What a quirk needs to
// know of the past (when the machine went off or on, what was ejected) is
// kept here, per machine: the face's own power actions and ejects stamp it,
// and a power state that changed otherwise (IPMI, the guest) is stamped
// when the face next sees it.

// QuirkTimes are how long the quirks' windows last.
type QuirkTimes struct {
	// PowerOnConflict: how long after a power-off On answers 409.
	PowerOnConflict time.Duration
	// InPost: how long after a power-on the server is in POST.
	InPost time.Duration
	// StaleInserted: how long after an eject the member still shows the
	// image inserted.
	StaleInserted time.Duration
	// SlowBIOSPatch: how long a PATCH of the BIOS settings holds the
	// connection before it answers.
	SlowBIOSPatch time.Duration
}

// DefaultQuirkTimes are the windows vbmcd uses unless told otherwise: long
// enough for a client's first retry to meet them, and the BIOS PATCH past
// the 60 s read timeout Ironic's sushy connector uses.
var DefaultQuirkTimes = QuirkTimes{
	PowerOnConflict: 30 * time.Second,
	InPost:          30 * time.Second,
	StaleInserted:   10 * time.Second,
	SlowBIOSPatch:   65 * time.Second,
}

// ParseQuirkTimes reads windows as NAME=DURATION pairs, comma-separated, the
// names those of the quirks that have a window (power-on-conflict,
// refuse-in-post, stale-inserted, slow-bios-patch); the others keep their
// defaults.
func ParseQuirkTimes(text string) (QuirkTimes, error) {
	var t QuirkTimes
	fields := map[personality.Quirk]*time.Duration{
		personality.PowerOnConflict: &t.PowerOnConflict, personality.RefuseInPost: &t.InPost,
		personality.StaleInserted: &t.StaleInserted, personality.SlowBIOSPatch: &t.SlowBIOSPatch,
	}
	for _, f := range strings.Split(text, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		name, v, ok := strings.Cut(f, "=")
		dst := fields[personality.Quirk(name)]
		if !ok || dst == nil {
			return t, fmt.Errorf("%q: want NAME=DURATION, NAME one of %s, %s, %s, %s", f,
				personality.PowerOnConflict, personality.RefuseInPost, personality.StaleInserted, personality.SlowBIOSPatch)
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > time.Hour {
			return t, fmt.Errorf("%q: want a duration from 1ms to 1h, such as 30s", f)
		}
		*dst = d
	}
	return t, nil
}

// WithQuirkTimes sets the quirks' windows; a zero field keeps its default.
func WithQuirkTimes(t QuirkTimes) Option {
	return func(s *Server) {
		d := &s.quirkTimes
		for _, f := range []struct {
			dst *time.Duration
			v   time.Duration
		}{
			{&d.PowerOnConflict, t.PowerOnConflict}, {&d.InPost, t.InPost},
			{&d.StaleInserted, t.StaleInserted}, {&d.SlowBIOSPatch, t.SlowBIOSPatch},
		} {
			if f.v > 0 {
				*f.dst = f.v
			}
		}
	}
}

// quirkState is what the quirks remember of one machine.
type quirkState struct {
	mu      sync.Mutex
	power   machine.PowerState // as last seen; "" before the first look
	offAt   time.Time          // when it was last seen going off
	onAt    time.Time          // when it was last seen going on
	ejected map[machine.MediaSlot]ejection
}

// ejection is an eject the stale-inserted quirk still shows as inserted.
type ejection struct {
	image string
	at    time.Time
}

// quirkOf returns machine m's state, stamped with what m shows now.
func (s *Server) quirkOf(m *machine.Machine) *quirkState {
	v, _ := s.quirkStates.LoadOrStore(m.ID, &quirkState{})
	st := v.(*quirkState)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.saw(m.Power, s.now())
	return st
}

// saw stamps a power state seen at now. Called with mu held.
func (st *quirkState) saw(p machine.PowerState, now time.Time) {
	if st.power == p {
		return
	}
	switch {
	case st.power == "":
	case p == machine.PowerOff || p == machine.PowerPoweringOff:
		if st.power == machine.PowerOn || st.power == machine.PowerPoweringOn {
			st.offAt = now
		}
	case st.power == machine.PowerOff || st.power == machine.PowerPoweringOff:
		st.onAt = now
	}
	st.power = p
}

// inPost reports whether machine m is in POST: on, and on for less than
// the InPost window.
func (s *Server) inPost(m *machine.Machine) bool {
	if m.Power == machine.PowerOff {
		return false
	}
	st := s.quirkOf(m)
	st.mu.Lock()
	defer st.mu.Unlock()
	return !st.onAt.IsZero() && s.now().Sub(st.onAt) < s.quirkTimes.InPost
}

// volatile reports whether the rendering of c's resource changes with time
// alone (HPE's PostState: personality.HPEOEM), so that it is not served
// from the cache.
func (s *Server) volatile(c *call) bool {
	if c.m == nil || c.rt.name != "/redfish/v1/Systems/*" {
		return false
	}
	p, _ := s.personaOf(c.m)
	return p.HPEOEM
}

// isPowerOn reports whether reset type rt turns an off machine on.
func isPowerOn(rt machine.ResetType) bool {
	switch rt {
	case machine.ResetOn, machine.ResetForceOn, machine.ResetPushPowerButton, machine.ResetPowerCycle:
		return true
	}
	return false
}

// beforeReset is where quirks refuse a reset: an iDRAC 10's On within the
// window after a power-off (power-on-conflict, Ironic bug 2162995), an
// iLO's reset other than a forced power-off in POST (refuse-in-post).
func (s *Server) beforeReset(c *call, rt machine.ResetType) *apiError {
	if s.has(c.m, personality.PowerOnConflict) && c.m.Power != machine.PowerOn && isPowerOn(rt) {
		st := s.quirkOf(c.m)
		st.mu.Lock()
		left := s.quirkTimes.PowerOnConflict - s.now().Sub(st.offAt)
		recent := !st.offAt.IsZero() && left > 0
		st.mu.Unlock()
		if recent {
			return newError(http.StatusConflict, MsgResourceInUse).
				with(fmt.Sprintf("The server is still powering off; retry in %d s (vbmcd quirk %s).", int(left.Seconds())+1, personality.PowerOnConflict))
		}
	}
	if rt != machine.ResetForceOff {
		return s.refuseInPost(c)
	}
	return nil
}

// afterReset stamps a reset the face carried out, for a machine whose
// quirks or Oem blocks read the stamps (a generic machine keeps none).
func (s *Server) afterReset(c *call, rt machine.ResetType) {
	if p, _ := s.personaOf(c.m); p.Generic() && !s.has(c.m, personality.PowerOnConflict) && !s.has(c.m, personality.RefuseInPost) {
		return
	}
	st := s.quirkOf(c.m)
	st.mu.Lock()
	defer st.mu.Unlock()
	now := s.now()
	switch rt {
	case machine.ResetForceOff, machine.ResetGracefulShutdown:
		if st.power != machine.PowerOff {
			st.offAt, st.power = now, machine.PowerOff
		}
	case machine.ResetOn, machine.ResetForceOn:
		if st.power == machine.PowerOff || st.power == "" {
			st.onAt, st.power = now, machine.PowerOn
		}
	case machine.ResetForceRestart, machine.ResetGracefulRestart, machine.ResetPowerCycle:
		st.onAt, st.power = now, machine.PowerOn
	}
}

// refuseInPost refuses a change while an iLO's server is in POST
// (refuse-in-post, Ironic bug 2136275).
func (s *Server) refuseInPost(c *call) *apiError {
	if !s.has(c.m, personality.RefuseInPost) || !s.inPost(c.m) {
		return nil
	}
	return newError(http.StatusBadRequest, MsgOperationNotAllowed).
		with(fmt.Sprintf("The server is in POST: changes are refused until it finishes (iLO's UnableToModifyDuringSystemPOST; vbmcd quirk %s).", personality.RefuseInPost))
}

// quirked wraps a handler of a change with the quirks that refuse it in
// POST and, for the BIOS settings, the slow answer.
func quirked(h handlerFunc, slowBIOS bool) handlerFunc {
	return func(s *Server, c *call) *apiError {
		if err := s.refuseInPost(c); err != nil {
			return err
		}
		err := h(s, c)
		if slowBIOS && s.has(c.m, personality.SlowBIOSPatch) {
			// Held after the change is made, as a BMC that applies it
			// and answers late: the client's read times out. The
			// listener's 60 s write deadline would end it first.
			admission.Unbounded(c.r)
			select {
			case <-time.After(s.quirkTimes.SlowBIOSPatch):
			case <-c.r.Context().Done():
			}
		}
		return err
	}
}

// beforeInsert refuses an insert into any member but 1 on an iDRAC 10
// (media-slot-one).
func (s *Server) beforeInsert(c *call, sl personality.Slot) *apiError {
	if s.has(c.m, personality.MediaSlotOne) && sl.ID != "1" {
		return newError(http.StatusBadRequest, MsgActionNotSupported, insertAction).
			with(fmt.Sprintf("Virtual media is served in slot 1 only (vbmcd quirk %s).", personality.MediaSlotOne))
	}
	return nil
}

// beforeEject refuses an eject while the server is on
// (eject-needs-power-off).
func (s *Server) beforeEject(c *call) *apiError {
	if s.has(c.m, personality.EjectNeedsPowerOff) && c.m.Power != machine.PowerOff {
		return newError(http.StatusConflict, MsgResourceInUse).
			with(fmt.Sprintf("Power the server off before ejecting virtual media (vbmcd quirk %s).", personality.EjectNeedsPowerOff))
	}
	return nil
}

// afterEject remembers an eject of image from slot for stale-inserted.
func (s *Server) afterEject(c *call, slot machine.MediaSlot, image string) {
	if !s.has(c.m, personality.StaleInserted) || image == "" {
		return
	}
	st := s.quirkOf(c.m)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.ejected == nil {
		st.ejected = map[machine.MediaSlot]ejection{}
	}
	st.ejected[slot] = ejection{image: image, at: s.now()}
}

// afterInsert ends what stale-inserted shows of slot: an insert was asked for.
func (s *Server) afterInsert(c *call, slot machine.MediaSlot) {
	v, ok := s.quirkStates.Load(c.m.ID)
	if !ok {
		return
	}
	st := v.(*quirkState)
	st.mu.Lock()
	delete(st.ejected, slot)
	st.mu.Unlock()
}

// staleMedia shows a member ejected within the window as still inserted
// (stale-inserted): Inserted true and the old Image, as the BMC reports
// them; an insert since ends it.
func (s *Server) staleMedia(m *machine.Machine, md machine.Media) machine.Media {
	if md.Inserted || !s.has(m, personality.StaleInserted) {
		return md
	}
	st := s.quirkOf(m)
	st.mu.Lock()
	defer st.mu.Unlock()
	e, ok := st.ejected[md.Slot]
	if !ok || s.now().Sub(e.at) >= s.quirkTimes.StaleInserted {
		return md
	}
	md.Inserted, md.Image = true, e.image
	return md
}
