package redfish

import (
	"net/http"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/personality"
)

// Personalities: a machine's BMC can look like a vendor's
// (internal/personality). The personality shapes what the builders write
// (Manufacturer, Model, firmware strings, Oem blocks, virtual media members
// and where they hang); its quirks change how some requests are answered
// (quirks.go). A listener that serves many machines keeps naming each
// System, Manager and Chassis by its machine id, which is unique; the
// vendor's own ids (System.Embedded.1, /Systems/1) are served at a BMC
// that serves one machine (AtBMC; vendorids.go).

// WithPersonality sets the personality and quirk switches of machines that
// name none themselves (default generic, no switches). It panics on a name
// the caller did not check with personality.Lookup and ParseQuirks.
func WithPersonality(name, quirks string) Option {
	return func(s *Server) {
		p, err := personality.Lookup(name)
		if err != nil {
			panic(err)
		}
		q, err := personality.ParseQuirks(quirks)
		if err != nil {
			panic(err)
		}
		s.persona, s.quirks = p, q
	}
}

// personaOf returns machine m's personality and quirk switches: its own
// when its settings name them (a bad name recorded by hand is the default's),
// else the service's.
func (s *Server) personaOf(m *machine.Machine) (*personality.Personality, map[personality.Quirk]bool) {
	p, q := s.persona, s.quirks
	if name := m.Settings.Personality; name != "" {
		if own, err := personality.Lookup(name); err == nil {
			p, q = own, nil
		}
	}
	if m.Settings.Quirks != "" {
		if own, err := personality.ParseQuirks(m.Settings.Quirks); err == nil {
			q = own
		}
	}
	return p, q
}

// has reports whether quirk q is on for machine m.
func (s *Server) has(m *machine.Machine, q personality.Quirk) bool {
	p, set := s.personaOf(m)
	return p.Has(q, set)
}

// idOf is the identity machine m's BMC shows: the service's for a generic
// machine (what WithVendor and WithFirmwareVersion set), the vendor's else.
func (s *Server) idOf(m *machine.Machine) identity {
	id := s.id
	p, _ := s.personaOf(m)
	id.P = p
	if p.Generic() {
		return id
	}
	id.Manufacturer, id.Model, id.BMCModel = p.Manufacturer, p.Model, p.BMCModel
	id.Firmware, id.BIOSVersion = p.BMCFirmware, p.BIOSVersion
	return id
}

// oemOnly serves h for machines whose personality has the vendor's OEM
// (has: personality.DellOEM, HPEOEM); others have no such resource (404,
// ResourceNotFound of the kind what).
func oemOnly(has func(*personality.Personality) bool, what string, h handlerFunc) handlerFunc {
	return func(s *Server, c *call) *apiError {
		if p, _ := s.personaOf(c.m); !has(p) {
			return newError(http.StatusNotFound, MsgResourceNotFound, what, c.path)
		}
		return h(s, c)
	}
}

// hpeOnly serves h for machines whose personality serves HPE's OEM
// (personality.HPEOEM) only.
func hpeOnly(h handlerFunc) handlerFunc {
	return oemOnly(func(p *personality.Personality) bool { return p.HPEOEM }, "Action", h)
}

// vendorRoutes are the vendors' own actions a personality's Oem blocks name:
// HPE's InsertVirtualMedia and EjectVirtualMedia (the standard actions under
// another name, which proliantutils posts to) and its PowerButton.
func vendorRoutes() []*route {
	var rs []*route
	for _, base := range []string{"Managers/*", "Systems/*"} {
		rs = append(rs,
			r(base+"/VirtualMedia/*/Actions/"+personality.HPEInsertAction, route{post: hpeOnly(postInsertMedia)}),
			r(base+"/VirtualMedia/*/Actions/"+personality.HPEEjectAction, route{post: hpeOnly(postEjectMedia)}))
	}
	return append(rs, r("Systems/*/Actions/"+personality.HPEPowerButton, route{post: hpeOnly(postPowerButton)}))
}

// postPowerButton is iLO's PowerButton: Press turns an off server on and
// asks a running one to shut down; PressAndHold forces it off.
func postPowerButton(s *Server, c *call) *apiError {
	const action = "HpeComputerSystemExt.PowerButton"
	push, aerr := actionEnum(c, action, "PushType", []string{"Press", "PressAndHold"})
	if aerr != nil {
		return aerr
	}
	rt := machine.ResetForceOff
	if push == "Press" {
		rt = machine.ResetGracefulShutdown
		if c.m.Power == machine.PowerOff {
			rt = machine.ResetOn
		}
	}
	if aerr := s.beforeReset(c, rt); aerr != nil {
		return aerr
	}
	if err := s.svc.Reset(ctx(c), c.m.ID, rt); err != nil {
		return s.modelError(c, err)
	}
	s.afterReset(c, rt)
	s.logChange(c, "power button", zap.String("push", push))
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}
