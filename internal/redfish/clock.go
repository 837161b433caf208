package redfish

import (
	"maps"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/machine"
)

// The BMC's clock (Manager DateTime and DateTimeLocalOffset, PATCHable as
// Ironic's BMC clock step sets them): each BMC has its own, the host's time
// plus a skew kept with its machine (machine/clock.go). Events about a
// system carry its BMC's time.

// dateTimeLayout is Redfish's DateTime (RFC 3339, seconds, the offset as
// +HH:MM as DateTimeLocalOffset writes it).
const dateTimeLayout = "2006-01-02T15:04:05-07:00"

// hostNow is the host's clock (WithClock's, for tests).
func (s *Server) hostNow() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// clockProps are a Manager's DateTime and DateTimeLocalOffset.
func (s *Server) clockProps(m *machine.Machine) obj {
	return obj{
		"DateTime":            m.BMCTime(s.hostNow()).Format(dateTimeLayout),
		"DateTimeLocalOffset": m.ClockOffset(),
	}
}

// writeManager answers with the Manager and its clock. Its ETag is the
// Manager's without DateTime: the clock ticking is no change of the
// resource, and a client PATCHes with the ETag of its last GET.
func (s *Server) writeManager(c *call, status int) {
	o := manager(c.m, s.idOf(c.m))
	o["DateTimeLocalOffset"] = c.m.ClockOffset()
	version := renderJSON(0, o)
	maps.Copy(o, s.clockProps(c.m))
	e := renderJSON(0, o)
	e.etag, e.hETag = version.etag, version.hETag
	e.write(c.w, status)
}

// eventTime is the time an event about system is stamped with: its BMC's
// clock, the host's for events about no system.
func (s *Server) eventTime(system string) time.Time {
	if system != "" {
		if m, err := s.svc.Get(system); err == nil {
			return m.BMCTime(s.hostNow())
		}
	}
	return s.hostNow().UTC()
}

var managerSchema = fields{
	"DateTime":            {kind: kindString},
	"DateTimeLocalOffset": {kind: kindString},
}

func patchManager(s *Server, c *call) *apiError {
	cur := manager(c.m, s.idOf(c.m))
	cur["DateTimeLocalOffset"] = c.m.ClockOffset()
	body, aerr := readPatch(c, managerSchema, cur)
	if aerr != nil {
		return aerr
	}
	var dt *time.Time
	var off *string
	if v, ok := body["DateTime"].(string); ok {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return newError(http.StatusBadRequest, MsgPropertyValueFormatError, truncate(v, 64), "DateTime").
				with("DateTime is RFC 3339: 2026-01-02T15:04:05+00:00.")
		}
		dt = &t
	}
	if v, ok := body["DateTimeLocalOffset"].(string); ok {
		if _, err := machine.ParseOffset(v); err != nil {
			return newError(http.StatusBadRequest, MsgPropertyValueFormatError, truncate(v, 64), "DateTimeLocalOffset").with(err.Error())
		}
		off = &v
	}
	if len(body) == 0 {
		return newError(http.StatusBadRequest, MsgEmptyJSON)
	}
	m, err := s.svc.SetClock(ctx(c), c.m.ID, dt, off, s.hostNow())
	if err != nil {
		if dt != nil {
			return newError(http.StatusBadRequest, MsgPropertyValueFormatError, body["DateTime"].(string), "DateTime").with(err.Error())
		}
		return s.modelError(c, err)
	}
	c.m = m
	s.logChange(c, "BMC clock set", zap.Duration("skew", m.Settings.Clock.Skew), zap.String("offset", m.ClockOffset()))
	s.writeManager(c, http.StatusOK)
	return nil
}
