package machine

import (
	"context"
	"fmt"
	"time"
)

// The BMC's clock (Redfish Manager DateTime and DateTimeLocalOffset): what
// Ironic's BMC clock step sets and reads back. The BMC's time is the host's
// plus a skew kept with the machine's settings, so it survives a restarted
// vbmcd and moves on with the host's clock; the local offset is the zone
// the BMC shows its time in.

// Clock is a BMC's clock setting.
type Clock struct {
	// Skew is the BMC's time minus the host's.
	Skew time.Duration
	// Offset is the BMC's local offset from UTC, "+HH:MM" or "-HH:MM";
	// "" is "+00:00".
	Offset string
}

// maxSkew bounds how far from the host's time a BMC clock is set: two
// hundred years either way (a time.Duration holds about 292).
const maxSkew = 200 * 365 * 24 * time.Hour

// ParseOffset reads a DateTimeLocalOffset ("+HH:MM", "-HH:MM", Z as
// +00:00) as a fixed zone. Offsets run from -12:00 to +14:00, as on Earth.
func ParseOffset(s string) (*time.Location, error) {
	if s == "" || s == "Z" {
		return time.UTC, nil
	}
	var sign byte
	var h, m int
	if n, err := fmt.Sscanf(s, "%c%02d:%02d", &sign, &h, &m); err != nil || n != 3 || len(s) != 6 || sign != '+' && sign != '-' || m > 59 {
		return nil, invalidf("local offset %q is not +HH:MM or -HH:MM", truncated(s))
	}
	secs := h*3600 + m*60
	if sign == '-' {
		secs = -secs
	}
	if secs < -12*3600 || secs > 14*3600 {
		return nil, invalidf("local offset %q is outside -12:00..+14:00", s)
	}
	return time.FixedZone(s, secs), nil
}

// BMCTime is the machine's BMC clock when the host's is now, in the BMC's
// local offset.
func (m *Machine) BMCTime(now time.Time) time.Time {
	loc, err := ParseOffset(m.Settings.Clock.Offset)
	if err != nil {
		loc = time.UTC
	}
	return now.Add(m.Settings.Clock.Skew).In(loc)
}

// ClockOffset is the BMC's local offset as Redfish shows it.
func (m *Machine) ClockOffset() string {
	if m.Settings.Clock.Offset == "" || m.Settings.Clock.Offset == "Z" {
		return "+00:00"
	}
	return m.Settings.Clock.Offset
}

// SetClock sets the BMC's clock: to dateTime (when not nil) as of the
// host's now, and its local offset (when not nil).
func (s *Service) SetClock(ctx context.Context, id string, dateTime *time.Time, offset *string, now time.Time) (*Machine, error) {
	c := Clock{}
	if offset != nil {
		if _, err := ParseOffset(*offset); err != nil {
			return nil, err
		}
	}
	if dateTime != nil {
		c.Skew = dateTime.Sub(now).Truncate(time.Second)
		if c.Skew > maxSkew || c.Skew < -maxSkew {
			return nil, invalidf("date %s is more than two hundred years from now", dateTime.Format(time.RFC3339))
		}
	}
	return s.UpdateSettings(ctx, id, func(st *Settings) error {
		if dateTime != nil {
			st.Clock.Skew = c.Skew
		}
		if offset != nil {
			st.Clock.Offset = *offset
			if *offset == "Z" || *offset == "+00:00" {
				st.Clock.Offset = ""
			}
		}
		return nil
	})
}
