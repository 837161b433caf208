package ipmi

import (
	"time"

	"github.com/bmlab/bmlab/internal/accounts"
	"github.com/bmlab/bmlab/internal/lograte"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/metrics"
	"github.com/bmlab/bmlab/internal/personality"
)

// Option configures a Manager.
type Option func(*config)

type config struct {
	creds       []machine.Credential
	accounts    *accounts.Store
	throttle    *accounts.Throttle
	metrics     *metrics.Registry
	portBase    int
	bmcPort     int
	addr        string
	cipher0     bool
	maxSessions int
	idle        time.Duration
	halfOpen    time.Duration
	replyWithin time.Duration
	refusals    *lograte.Log // refused logins, rate-limited; made by NewManager
	persona     *personality.Personality
	hostNet     machine.HostNet
	kcsOff      bool
	kcsOwner    int // uid the in-band sockets are given to; -1: left as made
	kcsRate     float64
	kcsBurst    float64
	throttled   *lograte.Log // in-band requests slowed, rate-limited; made by NewManager
}

func defaultConfig() config {
	return config{
		maxSessions: 16,
		idle:        60 * time.Second, // IPMI v2.0 §6.12.15: 60 s ± 3 s by default
		// A console runs Open Session, RAKP 1 and RAKP 3 back to back (IPMI
		// v2.0 §13.15); a session not active 5 s after its last message is
		// not coming.
		halfOpen:    5 * time.Second,
		replyWithin: 50 * time.Millisecond,
		persona:     personality.Default(),
		kcsOwner:    -1,
		kcsRate:     inbandRate,
		kcsBurst:    inbandBurst,
	}
}

// WithPersonality sets the vendor BMC that machines naming none of their
// own look like (what Get Device ID reports: manufacturer, firmware). It
// panics on a name the caller did not check with personality.Lookup.
func WithPersonality(name string) Option {
	return func(c *config) {
		p, err := personality.Lookup(name)
		if err != nil {
			panic(err)
		}
		c.persona = p
	}
}

// WithHostNet tells the BMCs the prefix and gateway of the host network a
// BMC address is on, for their LAN configuration parameters (lan.go);
// without it they report neither.
func WithHostNet(h machine.HostNet) Option { return func(c *config) { c.hostNet = h } }

// WithInband serves (true, the default) or not the in-band face of each
// machine whose backend names an in-band socket.
func WithInband(on bool) Option { return func(c *config) { c.kcsOff = !on } }

// WithInbandOwner gives the in-band sockets (inband.go) to user uid, mode
// 0600: the user qemu runs as, so that qemu, and nobody else but root, can
// connect. Without it they are the daemon's own, 0600.
func WithInbandOwner(uid int) Option { return func(c *config) { c.kcsOwner = uid } }

// WithInbandRate bounds the requests one machine's system interface is
// answered at: rate a second, burst at once (defaults 200 and 100). A
// guest over it waits for its answers; other machines do not.
func WithInbandRate(rate, burst float64) Option {
	return func(c *config) {
		if rate > 0 && burst >= 1 {
			c.kcsRate, c.kcsBurst = rate, burst
		}
	}
}

// WithCredentials sets the daemon's users, which every BMC accepts unless its
// machine has credentials of its own (Settings.Credentials).
func WithCredentials(creds ...machine.Credential) Option {
	return func(c *config) { c.creds = append([]machine.Credential(nil), creds...) }
}

// WithAccounts adds the stored accounts (shared with Redfish): each BMC
// knows the global ones and those of its machine, with the privilege limit
// of their role, and its user commands (IPMI v2.0 §22.26-§22.30) change
// them.
func WithAccounts(st *accounts.Store) Option { return func(c *config) { c.accounts = st } }

// WithThrottle slows failed logins per source: a source over its budget
// gets no answer to RAKP Message 1 until it may try again (shared with the
// Redfish face when vbmcd passes both the same throttle).
func WithThrottle(t *accounts.Throttle) Option { return func(c *config) { c.throttle = t } }

// WithMetrics counts session requests by command and completion code, and
// refused logins.
func WithMetrics(m *metrics.Registry) Option { return func(c *config) { c.metrics = m } }

// WithPortBase gives every machine that has no IPMI endpoint the lowest free
// port at or above base, recorded with the machine (so it is stable across
// restarts and as machines are added). 0 (the default) assigns nothing.
func WithPortBase(base int) Option { return func(c *config) { c.portBase = base } }

// WithBMCPort serves IPMI on the machine's own BMC address
// (Settings.BMCAddress) at port, as a real server's BMC answers on port
// 623 of its address: a machine with such an address and no IPMI endpoint
// gets its BMC there, and an endpoint that names no address binds the
// machine's. 0 (the default) leaves BMC addresses to Redfish.
func WithBMCPort(port int) Option { return func(c *config) { c.bmcPort = port } }

// WithAddress is the address BMCs bind when their endpoint names none
// (default: every address, IPv4 and IPv6).
func WithAddress(addr string) Option { return func(c *config) { c.addr = addr } }

// WithCipherSuite0 offers and accepts cipher suite 0: no authentication, no
// integrity, no encryption. Off by default; anyone who can reach the port
// could then control the machine.
func WithCipherSuite0(on bool) Option { return func(c *config) { c.cipher0 = on } }

// WithSessionLimit sets how many sessions (established or being set up) one
// BMC holds at once (default 16). When they are all taken, Open Session
// pushes out a session still in set-up (chosen at random), or is answered
// with "insufficient resources" when every one is established.
func WithSessionLimit(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.maxSessions = n
		}
	}
}

// WithSessionTimeout sets how long an idle session lives (default 60 s, the
// spec's default, IPMI v2.0 §6.12.15).
func WithSessionTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.idle = d
		}
	}
}

// WithReplyWithin bounds how long a power command waits for the backend
// before it answers "accepted" and lets the work go on (default 50 ms, so
// that ipmitool's 1 s timeout is never hit).
func WithReplyWithin(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.replyWithin = d
		}
	}
}

func (c *config) suites() []uint8 {
	if c.cipher0 {
		return []uint8{17, 3, 0}
	}
	return []uint8{17, 3}
}
