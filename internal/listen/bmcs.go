package listen

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/pki"
	"github.com/bmlab/bmlab/internal/redfish"
)

// BMCs runs one Redfish listener per machine on the machine's own address
// (--bmc-addresses), as a real server's BMC has an address of its own. The
// listeners are served by the daemon's one http.Server, through the same
// Front (front.go), so every bound and budget of the Redfish listener
// holds on them too, shared with it; the server's ConnContext tells the Redfish face which
// machine's BMC a connection reached (redfish.AtBMC), and TLS serves each
// address a certificate of its own, issued on first use by the BMC CA.
type BMCs struct {
	svc   *machine.Service
	pool  *Pool
	log   *zap.Logger
	srv   *http.Server
	serve func(*http.Server, net.Listener) error // serves srv on a listener through the daemon's front (Front.Serve)
	port  int
	ca    *pki.CA // nil: plain HTTP

	mu      sync.RWMutex
	running map[string]*bmcListener // by machine ID
	byAddr  map[netip.AddrPort]string
	failed  map[string]netip.Addr // addresses that would not bind, retried on the tick
	certs   map[netip.Addr]*tls.Certificate
	stopped bool

	// short are the machines the ranges had no address left for at the
	// last reconcile: their events need no new one (Run's goroutine only).
	short map[string]bool
}

type bmcListener struct {
	addr netip.AddrPort
	ln   net.Listener
}

// NewBMCs keeps a Redfish listener per machine of svc at its address of
// pool (recorded with the machine), on port, served by srv through serve
// (a Front's Serve); ca, when not nil, issues each address its
// certificate. It sets srv's ConnContext and, over TLS, how srv picks a
// certificate (certificate). Nothing listens until Start.
func NewBMCs(svc *machine.Service, pool *Pool, srv *http.Server, serve func(*http.Server, net.Listener) error, port int, ca *pki.CA, log *zap.Logger) *BMCs {
	b := &BMCs{svc: svc, pool: pool, log: log, srv: srv, serve: serve, port: port, ca: ca,
		running: map[string]*bmcListener{}, byAddr: map[netip.AddrPort]string{},
		failed: map[string]netip.Addr{}, certs: map[netip.Addr]*tls.Certificate{}}
	srv.ConnContext = b.connContext
	if ca != nil && srv.TLSConfig != nil && len(srv.TLSConfig.Certificates) > 0 {
		main := srv.TLSConfig.Certificates[0]
		srv.TLSConfig.Certificates = nil // else a client that sends no SNI (one that dials an address) never reaches GetCertificate
		srv.TLSConfig.GetCertificate = b.certificate(&main)
	}
	return b
}

// connContext marks a connection that reached a machine's own listener.
func (b *BMCs) connContext(ctx context.Context, c net.Conn) context.Context {
	if id := b.machineAt(c.LocalAddr()); id != "" {
		return redfish.AtBMC(ctx, id)
	}
	return ctx
}

// machineAt is the machine whose listener a local address is, "" for none.
func (b *BMCs) machineAt(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return ""
	}
	ap := ta.AddrPort()
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.byAddr[ap]
}

// certificate serves each machine's listener a certificate for its address
// (issued once, kept in memory) and the service's own everywhere else.
func (b *BMCs) certificate(main *tls.Certificate) func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
		if h.Conn == nil || b.machineAt(h.Conn.LocalAddr()) == "" {
			return main, nil
		}
		ip := h.Conn.LocalAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
		b.mu.RLock()
		c := b.certs[ip]
		b.mu.RUnlock()
		if c != nil {
			return c, nil
		}
		pair, err := b.ca.Issue([]string{ip.String()}, time.Now())
		if err != nil {
			b.log.Error("issuing a BMC's certificate failed", zap.Stringer("addr", ip), zap.Error(err))
			return nil, err
		}
		b.mu.Lock()
		if prev := b.certs[ip]; prev != nil {
			b.mu.Unlock()
			return prev, nil
		}
		b.certs[ip] = &pair
		b.mu.Unlock()
		return &pair, nil
	}
}

// Start assigns every machine its address, records the new ones and
// starts their listeners; it fails when a pin names no machine. Run then
// keeps the listeners equal to the model.
func (b *BMCs) Start(ctx context.Context) error {
	ms := b.svc.List()
	if names := b.pool.unmatchedPins(ms); len(names) > 0 {
		return errPins(names)
	}
	b.reconcile(ctx, ms)
	return nil
}

func errPins(names []string) error {
	return errors.New("--bmc-addresses pins machines this vbmcd does not serve: " + strings.Join(names, ", ") +
		" (name a served machine or its UUID; vbmcd ipmi list shows them)")
}

// bmcReconcileEvery is how often Run re-reads every machine (events may be
// lost by a slow reader) and retries addresses that would not bind.
const bmcReconcileEvery = 5 * time.Second

// Run keeps the listeners equal to the model until ctx ends, then stops
// them.
func (b *BMCs) Run(ctx context.Context) {
	events, cancel := b.svc.Backend().Subscribe()
	defer cancel()
	machine.Follow(ctx, events, bmcReconcileEvery, func(ctx context.Context) { b.reconcile(ctx, b.svc.List()) }, b.event)
	b.stop()
}

// event follows one event of the model.
func (b *BMCs) event(ctx context.Context, ev machine.Event) {
	switch {
	case ev.Kind == machine.EventRemoved:
		b.close(ev.ID)
	case ev.Machine != nil && b.settled(ev.Machine):
		b.ensure(ev.Machine)
	case ev.Machine != nil && b.short[ev.ID]:
		// Still no address for it; the tick tries again.
	case ev.Machine != nil:
		b.reconcile(ctx, b.svc.List()) // a new machine, or a pin's machine moved
	}
}

// settled reports whether m's recorded address is the one it keeps: its
// pin, or an address of the ranges.
func (b *BMCs) settled(m *machine.Machine) bool {
	a, err := netip.ParseAddr(m.Settings.BMCAddress)
	if err != nil {
		return false
	}
	if p, ok := b.pool.pinFor(m); ok {
		return p == a
	}
	return b.pool.InRange(a)
}

// reconcile records every machine's address where it changed, then makes
// the listeners follow.
func (b *BMCs) reconcile(ctx context.Context, ms []*machine.Machine) {
	want, short := b.pool.assign(ms)
	if len(short) > 0 && len(short) != len(b.short) {
		b.log.Error("--bmc-addresses has no address left for some machines; they get no BMC of their own",
			zap.Int("machines", len(short)), zap.String("first", short[0].Name), zap.Int("addresses", b.pool.size()))
	}
	b.short = make(map[string]bool, len(short))
	for _, m := range short {
		b.short[m.ID] = true
	}
	machine.Sync(ms, b.mu.RLocker(), b.running, func(m *machine.Machine) {
		a, ok := want[m.ID]
		if ok && m.Settings.BMCAddress != a.String() {
			addr := a.String()
			nm, err := b.svc.UpdateSettings(ctx, m.ID, func(s *machine.Settings) error {
				s.BMCAddress = addr
				return nil
			})
			if err != nil {
				b.log.Warn("recording a BMC address failed", zap.String("machine", m.Name), zap.String("addr", addr), zap.Error(err))
				return
			}
			b.log.Info("assigned BMC address", zap.String("machine", m.Name), zap.String("addr", addr))
			m = nm
		}
		if !ok {
			b.close(m.ID)
			return
		}
		b.ensure(m)
	}, b.close)
}

// ensure starts, moves or keeps m's listener at its recorded address.
func (b *BMCs) ensure(m *machine.Machine) {
	a, err := netip.ParseAddr(m.Settings.BMCAddress)
	if err != nil {
		return
	}
	want := netip.AddrPortFrom(a.Unmap(), uint16(b.port))
	b.mu.RLock()
	cur := b.running[m.ID]
	b.mu.RUnlock()
	if cur != nil && cur.addr == want {
		return
	}
	b.close(m.ID)
	ln, err := net.Listen("tcp", want.String())
	if err != nil {
		b.mu.Lock()
		logIt := b.failed[m.ID] != a
		b.failed[m.ID] = a
		b.mu.Unlock()
		if logIt {
			b.log.Error("a BMC cannot listen on its address (is the address on this host or in this namespace?); retried every few seconds",
				zap.String("machine", m.Name), zap.String("addr", want.String()), zap.Error(err))
		}
		return
	}
	l := &bmcListener{addr: want, ln: ln}
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		ln.Close()
		return
	}
	delete(b.failed, m.ID)
	b.running[m.ID] = l
	b.byAddr[want] = m.ID
	b.mu.Unlock()
	go func() {
		if err := b.serve(b.srv, l.ln); !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			b.log.Error("a BMC's Redfish listener stopped", zap.String("machine", m.Name), zap.String("addr", want.String()), zap.Error(err))
		}
	}()
	b.log.Debug("BMC listening", zap.String("machine", m.Name), zap.String("redfish", want.String()))
}

// close stops machine id's listener; its open connections end with the
// server (or their idle timeout).
func (b *BMCs) close(id string) {
	b.mu.Lock()
	l := b.running[id]
	delete(b.running, id)
	delete(b.failed, id)
	if l != nil {
		delete(b.byAddr, l.addr)
	}
	b.mu.Unlock()
	if l != nil {
		l.ln.Close()
	}
}

func (b *BMCs) stop() {
	b.mu.Lock()
	b.stopped = true
	ids := make([]string, 0, len(b.running))
	for id := range b.running {
		ids = append(ids, id)
	}
	b.mu.Unlock()
	for _, id := range ids {
		b.close(id)
	}
}

// AddrOf is the address machine id's own BMC listens on (invalid: none
// yet): the address it fetches images from, as a real BMC fetches from its
// management address (machine.WithMediaSource).
func (b *BMCs) AddrOf(id string) netip.Addr {
	if b == nil {
		return netip.Addr{}
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if l, ok := b.running[id]; ok {
		return l.addr.Addr()
	}
	return netip.Addr{}
}

// Listening counts the machines whose listener runs.
func (b *BMCs) Listening() int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return len(b.running)
}
