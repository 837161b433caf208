package machine

import "go.uber.org/zap"

// A BMC reset (Redfish Manager.Reset, IPMI Cold/Warm Reset) restarts the
// management controller, not the machine: the faces that keep per-BMC state
// (IPMI sessions, SOL, the boot-option parameters a BMC holds) start over,
// while power, the boot override and media, which the model keeps, stay.

// BMCResetFunc is told that the BMC of machine id was reset.
type BMCResetFunc func(id string)

type bmcResetHooks struct {
	next  int
	hooks map[int]BMCResetFunc
}

// OnBMCReset registers fn to run at every BMC reset; the returned func
// unregisters it.
func (s *Service) OnBMCReset(fn BMCResetFunc) (cancel func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bmcReset.hooks == nil {
		s.bmcReset.hooks = map[int]BMCResetFunc{}
	}
	k := s.bmcReset.next
	s.bmcReset.next++
	s.bmcReset.hooks[k] = fn
	return func() {
		s.mu.Lock()
		delete(s.bmcReset.hooks, k)
		s.mu.Unlock()
	}
}

// ResetBMC resets the BMC of machine id: every face that registered drops
// what that BMC held.
func (s *Service) ResetBMC(id string) error {
	if _, err := s.be.Get(id); err != nil {
		return err
	}
	s.mu.Lock()
	fns := make([]BMCResetFunc, 0, len(s.bmcReset.hooks))
	for _, fn := range s.bmcReset.hooks {
		fns = append(fns, fn)
	}
	s.mu.Unlock()
	for _, fn := range fns {
		fn(id)
	}
	s.log.Info("BMC reset", zap.String("machine", id))
	return nil
}
