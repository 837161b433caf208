package machine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Power actions are answered as a real BMC answers them: at once. Reset
// checks what it can check now (the machine exists, the type is known, an
// NMI needs a running machine, one action at a time), then carries the
// action out in the background. It waits for the outcome at most
// answerWithin, so a fast backend (sim) still answers with the result, and a
// start libvirt takes a second over is answered early. Meanwhile the
// machine reads PoweringOn or PoweringOff; an action that fails later is
// kept as the machine's PowerFault (Status.Health on Redfish) and logged,
// until the next action succeeds.
//
// A forced action (ForceOff, ForceRestart) is taken at any time, as a real
// BMC takes it: it preempts the action under way (a start waiting for its
// turn or for media is cancelled; one already in the backend finishes) and
// then runs on the state that left. Only actions that cannot be combined
// (a graceful action while another runs, ForceRestart while a ForceOff
// runs) are refused, with a *BusyError that says when to retry.
//
// Starts are paced (WithStartPacing): at most maxStarting machines start at
// once, and a start begins only gap after the last one finished (the domain
// running), so the host absorbs each machine before the next. A queued start reads PoweringOn and is answered
// at once like the rest. This is what keeps an installer that powers every
// master on together from overloading the host they all run on.

// WithStartPacing limits the machines starting at once to max (0: no
// limit) and makes each start wait gap after the last one finished.
func WithStartPacing(max int, gap time.Duration) ServiceOption {
	return func(s *Service) {
		s.power.maxStarting, s.power.gap = max, gap
		if max > 0 {
			s.power.slots = make(chan struct{}, max)
		}
	}
}

// WithAnswerWithin bounds how long Reset waits for the backend before it
// answers (default 50 ms; a queued start is answered without waiting).
func WithAnswerWithin(d time.Duration) ServiceOption {
	return func(s *Service) { s.power.answerWithin = d }
}

type powerOps struct {
	answerWithin time.Duration
	maxStarting  int
	gap          time.Duration
	slots        chan struct{} // a token per start under way; nil: no limit

	mu       sync.Mutex
	pending  map[string]*powerOp // by machine ID
	faults   map[string]string   // the last action's error, by machine ID
	lastDone time.Time           // when the last start finished
	queued   int                 // starts waiting for a slot or the gap
}

// powerOp is one action under way.
type powerOp struct {
	rt     ResetType
	shows  PowerState // what reads say meanwhile
	seq    uint64     // distinguishes snapshots made while it runs
	cancel context.CancelFunc
	done   chan struct{} // closed when it ended
	// started is set as the action hands the start to the backend; what
	// it does after (spending a Once override) is bookkeeping.
	started atomic.Bool
}

type opKey struct{}

// markStarted records, for the power action carried out under ctx, that
// it is starting the machine.
func markStarted(ctx context.Context) {
	if op, ok := ctx.Value(opKey{}).(*powerOp); ok {
		op.started.Store(true)
	}
}

// BusyError is a power action refused because another runs that it cannot
// be combined with; the client may retry after RetryAfter (Redfish gives it
// in Retry-After, IPMI answers C0h, node busy). It is an ErrConflict.
type BusyError struct {
	RetryAfter time.Duration
	msg        string
}

func (e *BusyError) Error() string { return e.msg }
func (e *BusyError) Unwrap() error { return ErrConflict }

// settleWait bounds how long an action waits for one under way that has
// done what it was for and only ends its bookkeeping.
const settleWait = 30 * time.Second

// onSettleWait, when set (tests only), is called as an action starts
// waiting for one that only ends its bookkeeping.
var onSettleWait func()

// retryBusy is the retry hint of a BusyError: about what a start or stop
// of a machine under TCG takes.
const retryBusy = 2 * time.Second

// combine says what a new action rt does to the action op under way: join
// it (nothing more to do: On while a start runs, the same forced action
// again), preempt it (a forced action), or neither (refused, busy).
func combine(rt ResetType, op *powerOp) (join, preempt bool) {
	switch {
	case op.shows == PowerPoweringOn && (rt == ResetOn || rt == ResetForceOn):
		return true, false
	case rt == op.rt && (rt == ResetForceOff || rt == ResetForceRestart):
		return true, false
	case rt == ResetForceOff:
		return false, true // power off wins over anything
	case rt == ResetForceRestart:
		return false, op.rt != ResetForceOff
	}
	return false, false
}

func (p *powerOps) init() {
	p.answerWithin = 50 * time.Millisecond
	p.pending = map[string]*powerOp{}
	p.faults = map[string]string{}
}

// PowerQueue is what the start queue holds now.
type PowerQueue struct {
	Pending int // power actions under way or waiting
	Queued  int // starts waiting for a slot or the gap
}

// PowerQueue reports the actions under way and the starts waiting.
func (s *Service) PowerQueue() PowerQueue {
	s.power.mu.Lock()
	defer s.power.mu.Unlock()
	return PowerQueue{Pending: len(s.power.pending), Queued: s.power.queued}
}

// overlay shows a machine as its action under way and its last fault make
// it: a copy, with a Generation of its own so faces' caches keyed on it
// never serve the snapshot before.
func (s *Service) overlay(m *Machine) *Machine {
	s.power.mu.Lock()
	op, fault := s.power.pending[m.ID], s.power.faults[m.ID]
	s.power.mu.Unlock()
	if op == nil && fault == "" {
		return m
	}
	c := *m
	if op != nil {
		c.Power = op.shows
		c.Generation = m.Generation ^ (1<<63 | op.seq<<40)
	}
	if fault != "" {
		c.PowerFault = fault
		c.Generation ^= 1 << 62
	}
	return &c
}

func (s *Service) overlays() bool {
	s.power.mu.Lock()
	defer s.power.mu.Unlock()
	return len(s.power.pending) > 0 || len(s.power.faults) > 0
}

// shows is what a machine in power state p reads while rt runs.
func shows(rt ResetType, p PowerState) PowerState {
	if boots(rt, p) {
		if p == PowerOff || p == PowerPoweringOn {
			return PowerPoweringOn
		}
		return PowerPoweringOff // a restart goes down first
	}
	return PowerPoweringOff
}

// reached reports whether the action op under way has already done what
// it was for, as the machine's backend reads now (p), and only ends its
// bookkeeping: off after a ForceOff or GracefulShutdown, or off again
// after a start handed to the backend.
func reached(op *powerOp, p PowerState) bool {
	if p != PowerOff {
		return false
	}
	// Off after a stop; or off again after a start that the backend
	// carried out (a guest that powered itself off at once): an On
	// joined to that start would never start the machine.
	return op.rt == ResetForceOff || op.rt == ResetGracefulShutdown || op.started.Load()
}

// changes reports whether rt changes anything for a machine in state p
// (On when on, GracefulShutdown when off: nothing to do). A machine the
// backend itself is powering on (the sim's delay, a KubeVirt VM Starting)
// is on its way: ForceOff stops it (a graceful shutdown has no guest to
// ask yet).
func changes(rt ResetType, p PowerState) bool {
	on := p == PowerOn || p == PowerPoweringOff
	switch rt {
	case ResetOn, ResetForceOn:
		return !on || p == PowerPoweringOff // off in a moment: started then
	case ResetForceOff:
		return on || p == PowerPoweringOn
	case ResetGracefulShutdown:
		return on
	}
	return true
}

var opSeq struct {
	sync.Mutex
	n uint64
}

// Reset performs a power action with a real BMC's semantics, answered at
// once (see above). An action that boots the machine first waits for
// virtual media that is still loading (bounded, see WithMediaWait), so no
// boot sees half an image.
func (s *Service) Reset(ctx context.Context, id string, rt ResetType) (err error) {
	if s.observePower != nil {
		start := time.Now()
		defer func() { s.observePower(rt, err, time.Since(start)) }()
	}
	if !validReset(rt) {
		return invalidf("unknown reset type %q", rt)
	}
	return s.powerAction(ctx, id, rt)
}

// powerAction is Reset's work: it runs rt, joins the action under way,
// preempts it or is refused.
func (s *Service) powerAction(ctx context.Context, id string, rt ResetType) error {
	m, err := s.be.Get(id)
	if err == nil {
		err = usable(m)
	}
	if err != nil {
		return err
	}
	if rt == ResetNmi {
		return s.reset(ctx, m.ID, rt)
	}
	s.power.mu.Lock()
	prev := s.power.pending[m.ID]
	if prev != nil && !reached(prev, m.Power) {
		join, preempt := combine(rt, prev)
		if join {
			s.power.mu.Unlock()
			s.log.Debug("power action joined the one under way", zap.String("machine", m.Name), zap.String("type", string(rt)),
				zap.String("under way", string(prev.rt)), zap.String("reads", string(m.Power)), zap.Bool("started", prev.started.Load()))
			return nil // already on its way
		}
		if !preempt {
			s.power.mu.Unlock()
			return &BusyError{RetryAfter: retryBusy, msg: fmt.Sprintf("%v: %s is %s (%s under way); retry when it is done",
				ErrConflict, m.Name, prev.shows, prev.rt)}
		}
	} else if prev != nil {
		// The action under way has done what it was for (the machine
		// reads off after a ForceOff) and only ends its bookkeeping:
		// a client that saw the state and acts on it is not refused.
		// It ends within moments; this one then runs on its own.
		s.power.mu.Unlock()
		if onSettleWait != nil {
			onSettleWait()
		}
		t := time.NewTimer(settleWait)
		defer t.Stop()
		select {
		case <-prev.done:
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return &BusyError{RetryAfter: retryBusy, msg: fmt.Sprintf("%v: %s is still ending %s; retry when it is done",
				ErrConflict, m.Name, prev.rt)}
		}
		return s.powerAction(ctx, id, rt)
	} else if !changes(rt, m.Power) {
		s.power.mu.Unlock()
		s.log.Debug("power action changes nothing", zap.String("machine", m.Name), zap.String("type", string(rt)), zap.String("reads", string(m.Power)))
		return nil
	}
	opSeq.Lock()
	opSeq.n++
	seq := opSeq.n & 0x3fffff
	opSeq.Unlock()
	// The action outlives the request that asked for it.
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
	op := &powerOp{rt: rt, shows: shows(rt, m.Power), seq: seq, cancel: cancel, done: make(chan struct{})}
	bg = context.WithValue(bg, opKey{}, op)
	s.power.pending[m.ID] = op
	s.power.mu.Unlock()

	done := make(chan error, 1)
	queued := make(chan struct{})
	go func() {
		defer cancel()
		defer close(op.done)
		var err error
		if prev != nil {
			// Preempt: the action under way stops where it can, then
			// this one runs on the state it left.
			prev.cancel()
			<-prev.done
			s.log.Info("power action preempted", zap.String("machine", m.Name),
				zap.String("by", string(rt)), zap.String("preempted", string(prev.rt)))
			cur, gerr := s.be.Get(m.ID)
			switch {
			case bg.Err() != nil:
				err = bg.Err() // preempted in turn while it waited
			case gerr != nil:
				err = gerr
			case changes(rt, cur.Power):
				err = s.run(bg, cur, rt, boots(rt, cur.Power), queued)
			}
		} else {
			err = s.run(bg, m, rt, boots(rt, m.Power), queued)
		}
		s.power.mu.Lock()
		current := s.power.pending[m.ID] == op
		if current {
			delete(s.power.pending, m.ID)
			if err != nil {
				s.power.faults[m.ID] = err.Error()
			} else {
				delete(s.power.faults, m.ID)
			}
		}
		s.power.mu.Unlock()
		switch {
		case !current:
			err = nil // preempted: what follows says how it ended
		case err != nil:
			s.log.Warn("power action failed", zap.String("machine", m.Name), zap.String("type", string(rt)), zap.Error(err))
		}
		done <- err
	}()
	t := time.NewTimer(s.power.answerWithin)
	defer t.Stop()
	select {
	case err := <-done:
		if errors.Is(err, errPowerOnRefused) {
			return nil // accepted; the machine stays off and says why
		}
		return err
	case <-queued:
		return nil // its turn comes later
	case <-t.C:
		return nil
	}
}

// run carries an action out, a start after its turn in the queue.
func (s *Service) run(ctx context.Context, m *Machine, rt ResetType, boot bool, queued chan struct{}) error {
	if boot {
		if err := s.refusesPowerOn(m.ID); err != nil {
			return err
		}
		release, err := s.turn(ctx, queued)
		if err != nil {
			return err
		}
		defer release()
	}
	return s.reset(ctx, m.ID, rt)
}

// turn waits for a start slot and for the gap since the last start
// finished; it closes queued when it has to wait for either.
func (s *Service) turn(ctx context.Context, queued chan struct{}) (release func(), err error) {
	p := &s.power
	if p.slots == nil && p.gap <= 0 {
		return func() {}, nil
	}
	p.mu.Lock()
	p.queued++
	p.mu.Unlock()
	dequeue := func() {
		p.mu.Lock()
		p.queued--
		p.mu.Unlock()
	}
	var once sync.Once
	wait := func() { once.Do(func() { close(queued) }) }
	if p.slots != nil {
		select {
		case p.slots <- struct{}{}:
		default:
			wait()
			select {
			case p.slots <- struct{}{}:
			case <-ctx.Done():
				dequeue()
				return nil, fmt.Errorf("waiting to start: %w", ctx.Err())
			}
		}
	}
	// The gap runs from the last start that finished, and starts over if
	// another finishes meanwhile.
	for err == nil {
		p.mu.Lock()
		d := time.Until(p.lastDone.Add(p.gap))
		p.mu.Unlock()
		if d <= 0 {
			break
		}
		wait()
		select {
		case <-time.After(d):
		case <-ctx.Done():
			err = fmt.Errorf("waiting to start: %w", ctx.Err())
		}
	}
	dequeue()
	release = func() {
		p.mu.Lock()
		p.lastDone = time.Now()
		p.mu.Unlock()
		if p.slots != nil {
			<-p.slots
		}
	}
	if err != nil {
		release()
		return nil, err
	}
	return release, nil
}

func validReset(rt ResetType) bool {
	for _, t := range ResetTypes {
		if t == rt {
			return true
		}
	}
	return false
}
