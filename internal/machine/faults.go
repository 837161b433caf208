package machine

import (
	"context"
	"errors"
	"sync/atomic"

	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Faults make a machine's BMC misbehave on purpose, on both faces and over
// either backend, for people testing how Ironic, Metal3 or their own tools
// recover: added latency, a number of Redfish requests answered with an
// error, IPMI packets dropped, power-ons refused, a BMC reboot window during
// which nothing answers, virtual media that never loads. They live in memory; `vbmcd fault` and the
// config's faults: set them at run time.

// Fault is what is injected for one machine. Counts are used up by the
// requests they affect.
type Fault struct {
	// Latency delays every Redfish request and IPMI packet of the machine.
	Latency time.Duration `json:"latency,omitempty"`
	// HTTPErrors answers that many of the machine's next Redfish requests
	// with HTTPStatus (503, with Retry-After, or 409).
	HTTPErrors int `json:"httpErrors,omitempty"`
	HTTPStatus int `json:"httpStatus,omitempty"`
	// IPMIDrop drops that many of the BMC's next IPMI packets unanswered.
	IPMIDrop int `json:"ipmiDrop,omitempty"`
	// RefusePowerOn makes every start of the machine fail after it was
	// accepted, as a power supply that does not come up.
	RefusePowerOn bool `json:"refusePowerOn,omitempty"`
	// MediaStuck holds the machine's virtual-media inserts: the task stays
	// Running and nothing is attached until the fault is cleared (the
	// insert then goes on) or the media is ejected (the task is cancelled).
	MediaStuck bool `json:"mediaStuck,omitempty"`
	// DownUntil is the end of a BMC reboot window: until then neither face
	// answers for the machine (Redfish connections are closed unanswered,
	// IPMI packets dropped).
	DownUntil time.Time `json:"downUntil,omitzero"`
}

// FaultStatuses are the statuses HTTPStatus may take.
var FaultStatuses = []int{503, 409}

func (f Fault) empty() bool {
	return f.Latency == 0 && f.HTTPErrors == 0 && f.IPMIDrop == 0 && !f.RefusePowerOn && !f.MediaStuck && f.DownUntil.IsZero()
}

type faults struct {
	mu  sync.Mutex
	by  map[string]*Fault // by machine ID
	any atomic.Bool       // len(by) > 0: requests skip the lock otherwise
}

// SetFault sets (replaces) the faults of machine id; an empty Fault clears
// them.
func (s *Service) SetFault(id string, f Fault) (*Machine, error) {
	m, err := s.be.Get(id)
	if err != nil {
		return nil, err
	}
	if f.Latency < 0 || f.Latency > time.Minute {
		return nil, invalidf("latency %v: want 0 to 1m", f.Latency)
	}
	if f.HTTPErrors < 0 || f.IPMIDrop < 0 {
		return nil, invalidf("counts may not be negative")
	}
	if f.HTTPErrors > 0 && f.HTTPStatus == 0 {
		f.HTTPStatus = 503
	}
	if f.HTTPStatus != 0 && !slices.Contains(FaultStatuses, f.HTTPStatus) {
		return nil, invalidf("HTTP status %d: want one of %v", f.HTTPStatus, FaultStatuses)
	}
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	if s.faults.by == nil {
		s.faults.by = map[string]*Fault{}
	}
	if f.empty() {
		delete(s.faults.by, m.ID)
	} else {
		s.faults.by[m.ID] = &f
	}
	s.faults.any.Store(len(s.faults.by) > 0)
	s.log.Warn("faults set", zap.String("machine", m.Name), zap.Any("fault", f))
	return m, nil
}

// downFor makes machine id's BMC answer nothing for d (a BMC reboot),
// keeping the other faults set for it.
func (s *Service) downFor(id string, d time.Duration) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	if s.faults.by == nil {
		s.faults.by = map[string]*Fault{}
	}
	f := s.faults.by[id]
	if f == nil {
		f = &Fault{}
		s.faults.by[id] = f
	}
	f.DownUntil = time.Now().Add(d)
	s.faults.any.Store(true)
}

// Faults returns the faults in force, by machine ID.
func (s *Service) Faults() map[string]Fault {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	out := make(map[string]Fault, len(s.faults.by))
	for id, f := range s.faults.by {
		out[id] = *f
	}
	return out
}

// Injected is what a face must do with one request of a machine.
type Injected struct {
	Delay  time.Duration // wait this long first
	Down   bool          // answer nothing at all
	Status int           // answer this HTTP status instead (Redfish)
	Drop   bool          // drop the packet (IPMI)
}

// RedfishFault takes what applies to one Redfish request of machine id.
func (s *Service) RedfishFault(id string) Injected {
	return s.take(id, func(f *Fault, in *Injected) {
		if f.HTTPErrors > 0 {
			f.HTTPErrors--
			in.Status = f.HTTPStatus
		}
	})
}

// IPMIFault takes what applies to one IPMI packet of machine id.
func (s *Service) IPMIFault(id string) Injected {
	return s.take(id, func(f *Fault, in *Injected) {
		if f.IPMIDrop > 0 {
			f.IPMIDrop--
			in.Drop = true
		}
	})
}

// InbandFault takes what applies to one request of machine id's in-band
// IPMI (its system interface): the latency and a BMC reboot's silence; the
// packet drops are the LAN face's.
func (s *Service) InbandFault(id string) Injected {
	return s.take(id, func(*Fault, *Injected) {})
}

func (s *Service) take(id string, face func(*Fault, *Injected)) Injected {
	if !s.faults.any.Load() {
		return Injected{}
	}
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	f := s.faults.by[id]
	if f == nil {
		return Injected{}
	}
	in := Injected{Delay: f.Latency}
	if !f.DownUntil.IsZero() {
		if time.Now().Before(f.DownUntil) {
			in.Down = true
			return in
		}
		f.DownUntil = time.Time{}
	}
	face(f, &in)
	if f.empty() {
		delete(s.faults.by, id)
		s.faults.any.Store(len(s.faults.by) > 0)
	}
	return in
}

// errPowerOnRefused is an injected power-on failure: the BMC accepted the
// power-on, and the machine stays off.
var errPowerOnRefused = errors.New("the power-on was refused (an injected fault; vbmcd fault clear lifts it)")

// refusesPowerOn reports whether starts of machine id are to fail.
func (s *Service) refusesPowerOn(id string) error {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	if f := s.faults.by[id]; f != nil && f.RefusePowerOn {
		return errPowerOnRefused
	}
	return nil
}

// mediaStuck reports whether inserts into machine id are held.
func (s *Service) mediaStuck(id string) bool {
	if !s.faults.any.Load() {
		return false
	}
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	f := s.faults.by[id]
	return f != nil && f.MediaStuck
}

// holdStuckMedia waits while inserts into machine id are held by a
// MediaStuck fault, and reports false if ctx ends first (an eject).
func (s *Service) holdStuckMedia(ctx context.Context, id, name string) bool {
	if !s.mediaStuck(id) {
		return true
	}
	s.log.Warn("virtual media insert held (injected fault; vbmcd fault clear lifts it)", zap.String("machine", name))
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for s.mediaStuck(id) {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
}
