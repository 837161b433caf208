package ipmi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/lograte"
	"github.com/bmlab/bmlab/internal/machine"
)

// Manager runs one BMC per machine that has an IPMI endpoint and keeps the
// set of listeners equal to what the model says, as machines gain, change or
// lose their endpoint.
type Manager struct {
	svc *machine.Service
	log *zap.Logger
	cfg config

	mu        sync.Mutex
	bmcs      map[string]*bmc
	failed    map[string]endpoint // endpoints that would not bind, retried on the tick
	failedKCS map[string]string   // in-band sockets that would not listen, likewise
	running   bool
}

// NewManager returns a Manager over svc. Nothing listens until Run.
func NewManager(svc *machine.Service, log *zap.Logger, opts ...Option) *Manager {
	if log == nil {
		log = zap.NewNop()
	}
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	cfg.refusals = lograte.New(log, "IPMI logins refused (more than the log shows one by one)", 20, 10*time.Second)
	cfg.throttled = lograte.New(log, "in-band IPMI requests slowed: a guest sends more than its rate", 5, 10*time.Second)
	return &Manager{svc: svc, log: log, cfg: cfg, bmcs: map[string]*bmc{}, failed: map[string]endpoint{}, failedKCS: map[string]string{}}
}

// reconcileEvery is how often Run re-reads the whole model (events may be
// lost by a slow reader) and retries endpoints that would not bind.
const reconcileEvery = 5 * time.Second

// shutdownWithin bounds how long Run takes to stop its BMCs.
const shutdownWithin = 5 * time.Second

// Run serves until ctx ends, then closes every BMC and returns nil. It
// returns an error only when it cannot start.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.running {
		m.mu.Unlock()
		return errors.New("ipmi: manager already running")
	}
	m.running = true
	m.mu.Unlock()

	events, cancel := m.svc.Backend().Subscribe()
	defer cancel()
	defer m.svc.OnBMCReset(func(id string) {
		m.mu.Lock()
		b := m.bmcs[id]
		m.mu.Unlock()
		if b != nil {
			b.controllerReset()
		}
	})()
	m.reconcileAll(ctx)
	accountsDone := m.followAccounts(ctx)
	machine.Follow(ctx, events, reconcileEvery, m.resync, m.event)
	m.shutdown()
	<-accountsDone
	return nil
}

// followAccounts ends or lowers sessions, until ctx ends, as soon as an
// account is deleted, disabled or changes role, not at their next
// command. The channel closes when it returns.
func (m *Manager) followAccounts(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	if m.cfg.accounts == nil {
		close(done)
		return done
	}
	changed := m.cfg.accounts.Changed() // the store's next change
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
			changed = m.cfg.accounts.Changed() // before the recheck: a change during it is the next one
			m.mu.Lock()
			for _, b := range m.bmcs {
				b.recheckAll()
			}
			m.mu.Unlock()
		}
	}()
	return done
}

// event follows one event of the model: a machine's BMC started, rebound
// or stopped, and the SEL's power events (sel.go).
func (m *Manager) event(ctx context.Context, ev machine.Event) {
	switch ev.Kind {
	case machine.EventRemoved:
		m.stop(ev.ID)
		return
	case machine.EventChanged:
		if ev.Machine != nil {
			if m.cfg.portBase > 0 && ev.Machine.Settings.IPMI == nil {
				m.assignPorts(ctx)
			} else {
				m.ensure(ctx, ev.Machine)
			}
		}
	}
	m.mu.Lock()
	b := m.bmcs[ev.ID]
	m.mu.Unlock()
	if b != nil {
		b.machineEvent(ev)
	}
}

// resync re-reads every machine and ends the sessions that timed out.
func (m *Manager) resync(ctx context.Context) {
	m.reconcileAll(ctx)
	now := time.Now()
	m.mu.Lock()
	for _, b := range m.bmcs {
		b.sweep(now)
	}
	m.mu.Unlock()
}

// Sessions counts the IPMI sessions of every BMC, set-up ones included.
func (m *Manager) Sessions() int {
	m.mu.Lock()
	bs := make([]*bmc, 0, len(m.bmcs))
	for _, b := range m.bmcs {
		bs = append(bs, b)
	}
	m.mu.Unlock()
	n := 0
	for _, b := range bs {
		b.mu.Lock()
		n += len(b.sessions)
		b.mu.Unlock()
	}
	return n
}

func (m *Manager) shutdown() {
	m.mu.Lock()
	all := m.bmcs
	m.bmcs = map[string]*bmc{}
	m.running = false
	m.mu.Unlock()
	done := make(chan struct{})
	go func() {
		var wg sync.WaitGroup
		for _, b := range all {
			wg.Add(1)
			go func() { defer wg.Done(); b.close() }()
		}
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(shutdownWithin):
		m.log.Warn("ipmi BMCs did not stop in time", zap.Duration("waited", shutdownWithin))
	}
}

func (m *Manager) reconcileAll(ctx context.Context) {
	if m.cfg.portBase > 0 {
		m.assignPorts(ctx)
	}
	machine.Sync(m.svc.List(), &m.mu, m.bmcs, func(mc *machine.Machine) { m.ensure(ctx, mc) }, m.stop)
}

// assignPorts records the lowest free port at or above the base for every
// machine without an endpoint, in the model's stable order. The address is
// left empty: such BMCs bind the Manager's address.
func (m *Manager) assignPorts(ctx context.Context) {
	all := m.svc.List()
	used := map[int]bool{}
	for _, mc := range all {
		if ep := mc.Settings.IPMI; ep != nil {
			used[ep.Port] = true
		}
	}
	next := m.cfg.portBase
	for _, mc := range all {
		if mc.Settings.IPMI != nil {
			continue
		}
		for used[next] {
			next++
		}
		if next > 65535 {
			m.log.Error("no free IPMI port left", zap.Int("base", m.cfg.portBase))
			return
		}
		port := next
		_, err := m.svc.UpdateSettings(ctx, mc.ID, func(s *machine.Settings) error {
			if s.IPMI == nil { // a concurrent writer may have set one
				s.IPMI = &machine.IPMIEndpoint{Port: port}
			}
			return nil
		})
		if err != nil {
			m.log.Warn("recording an IPMI port failed", zap.String("machine", mc.Name), zap.Int("port", port), zap.Error(err))
			continue
		}
		used[port] = true
		m.log.Info("assigned IPMI port", zap.String("machine", mc.Name), zap.Int("port", port))
	}
}

func (m *Manager) endpointOf(mc *machine.Machine) (endpoint, bool) {
	ep := mc.Settings.IPMI
	own := mc.Settings.BMCAddress
	if m.cfg.bmcPort <= 0 {
		own = ""
	}
	if ep == nil && own != "" {
		return endpoint{addr: own, port: m.cfg.bmcPort}, true
	}
	if ep == nil || ep.Port <= 0 || ep.Port > 65535 {
		return endpoint{}, false
	}
	addr := ep.Address
	if addr == "" {
		addr = own
	}
	if addr == "" {
		addr = m.cfg.addr
	}
	return endpoint{addr: addr, port: ep.Port}, true
}

// credsOf are the fixed users of mc's BMC: the machine's own
// (Settings.Credentials, own), else the daemon's.
func (m *Manager) credsOf(mc *machine.Machine) (creds []machine.Credential, own bool) {
	if len(mc.Settings.Credentials) > 0 {
		return mc.Settings.Credentials, true
	}
	return m.cfg.creds, false
}

// ensure makes the machine's BMC match its snapshot: its LAN face started,
// rebound or stopped, its in-band face (the socket the machine's KCS
// interface connects to) likewise, its users replaced. The BMC itself, and
// the state both faces share, lives while the machine has either face.
func (m *Manager) ensure(ctx context.Context, mc *machine.Machine) {
	want, lanOK := m.endpointOf(mc)
	sock := m.socketOf(mc)
	m.mu.Lock()
	b := m.bmcs[mc.ID]
	if !lanOK {
		delete(m.failed, mc.ID)
	}
	if sock == "" {
		delete(m.failedKCS, mc.ID)
	}
	if b == nil && (!m.running || (!lanOK && sock == "")) {
		m.mu.Unlock()
		return
	}
	if b == nil {
		b = newBMC(ctx, mc, m.svc, &m.cfg, m.log.With(zap.String("machine", mc.Name)))
		m.bmcs[mc.ID] = b
	}
	b.setUsers(m.credsOf(mc))
	m.mu.Unlock()

	m.ensureLAN(b, mc, want, lanOK)
	m.ensureInband(b, mc, sock)
	if !lanOK && sock == "" {
		m.mu.Lock()
		if m.bmcs[mc.ID] == b {
			delete(m.bmcs, mc.ID)
		}
		m.mu.Unlock()
		b.close()
	}
}

// ensureLAN binds, rebinds or stops b's LAN face.
func (m *Manager) ensureLAN(b *bmc, mc *machine.Machine, want endpoint, ok bool) {
	if cur := b.lanOf(); cur != nil {
		if ok && cur.ep == want {
			return
		}
		b.unlisten()
		m.log.Info("ipmi BMC stopped", zap.String("machine", mc.Name), zap.String("addr", hostPort(cur.ep)))
	}
	if !ok {
		return
	}
	conn, err := m.listenLAN(want)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		if m.failed[mc.ID] != want {
			m.log.Error("ipmi BMC cannot listen", zap.String("machine", mc.Name), zap.String("addr", hostPort(want)), zap.Error(err))
		}
		m.failed[mc.ID] = want
		return
	}
	delete(m.failed, mc.ID)
	if !m.running || m.bmcs[mc.ID] != b {
		_ = conn.Close()
		return
	}
	b.listen(conn, want)
	m.log.Info("ipmi BMC listening", zap.String("machine", mc.Name), zap.String("addr", conn.LocalAddr().String()))
	b.mu.Lock()
	nobody := len(b.users) == 0
	b.mu.Unlock()
	if nobody {
		m.log.Warn("ipmi BMC has no users: nobody can log in", zap.String("machine", mc.Name))
	}
}

func hostPort(ep endpoint) string { return net.JoinHostPort(ep.addr, strconv.Itoa(ep.port)) }

func (m *Manager) listenLAN(ep endpoint) (net.PacketConn, error) {
	if ip := net.ParseIP(ep.addr); ep.addr != "" && ip == nil {
		return nil, fmt.Errorf("address %q is not an IP address", ep.addr)
	}
	return net.ListenPacket("udp", hostPort(ep))
}

func (m *Manager) stop(id string) {
	m.mu.Lock()
	b := m.bmcs[id]
	delete(m.bmcs, id)
	delete(m.failed, id)
	delete(m.failedKCS, id)
	m.mu.Unlock()
	if b != nil {
		l := b.lanOf()
		b.close()
		if l != nil {
			m.log.Info("ipmi BMC stopped", zap.String("machine", id), zap.String("addr", hostPort(l.ep)))
		}
	}
}

// Endpoint is a BMC as the Manager runs it.
type Endpoint struct {
	MachineID string
	Addr      string // host:port actually bound
}

// Endpoints lists the BMCs running now.
func (m *Manager) Endpoints() []Endpoint {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Endpoint, 0, len(m.bmcs))
	for id, b := range m.bmcs {
		if l := b.lanOf(); l != nil {
			out = append(out, Endpoint{MachineID: id, Addr: l.conn.LocalAddr().String()})
		}
	}
	return out
}
