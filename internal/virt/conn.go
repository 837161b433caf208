package virt

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/digitalocean/go-libvirt"
	"github.com/digitalocean/go-libvirt/socket"
	"github.com/digitalocean/go-libvirt/socket/dialers"
	"go.uber.org/zap"
)

// Conn is one long-lived connection to a libvirt daemon. It pings the daemon
// every keepalive interval and reconnects with backoff when the connection
// drops; OnConnect hooks run after every (re)connect so subscribers can
// re-register their event streams and resynchronise.
type Conn struct {
	uri       string
	dialer    socket.Dialer
	keepalive time.Duration
	log       *zap.Logger

	mu       sync.RWMutex
	l        *libvirt.Libvirt
	up       bool
	connects int
	changed  chan struct{} // closed and replaced whenever up changes
}

// maxBackoff bounds the wait between reconnect attempts: a daemon that
// comes back is found within a second (a host's machines are unavailable
// until then), for one cheap dial per second while it is away.
const maxBackoff = time.Second

// ErrNotConnected is returned while the daemon is unreachable.
var ErrNotConnected = errors.New("libvirt is not connected")

// DialerFor returns the go-libvirt dialer for a libvirt URI: local sockets
// for qemu:///system and qemu:///session (or the socket given in the URI's
// ?socket= parameter); TCP for qemu+tcp://HOST[:PORT]/system; TLS for
// qemu+tls://HOST[:PORT]/system (?pkipath=DIR holds cacert.pem,
// clientcert.pem and clientkey.pem, libvirt's own names; ?no_verify=1 skips
// the server's certificate check); SSH for
// qemu+ssh://[USER@]HOST[:PORT]/system (?keyfile=, ?known_hosts=,
// ?socket= the remote daemon's socket, ?no_verify=1 accepts any host key).
func DialerFor(uri string) (socket.Dialer, libvirt.ConnectURI, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return nil, "", fmt.Errorf("libvirt URI %q: %w", uri, err)
	}
	path := "/" + strings.Trim(u.Path, "/")
	target := libvirt.ConnectURI("qemu://" + path)
	q := u.Query()
	host, port := u.Hostname(), u.Port()
	if u.Scheme != "qemu" && u.Scheme != "qemu+unix" && host == "" {
		return nil, "", fmt.Errorf("libvirt URI %q: %s needs a host (%s://HOST/system)", uri, u.Scheme, u.Scheme)
	}
	switch u.Scheme {
	case "qemu", "qemu+unix":
		sock := q.Get("socket")
		if sock == "" {
			sock = "/var/run/libvirt/libvirt-sock"
		}
		return dialers.NewLocal(dialers.WithSocket(sock), dialers.WithLocalTimeout(5*time.Second)), target, nil
	case "qemu+tcp":
		opts := ifSet([]dialers.RemoteOption{dialers.WithRemoteTimeout(5 * time.Second)}, port, dialers.UsePort)
		return dialers.NewRemote(host, opts...), target, nil
	case "qemu+tls":
		opts := ifSet(nil, port, dialers.UseTLSPort)
		opts = ifSet(opts, q.Get("pkipath"), dialers.UsePKIPath)
		if q.Get("no_verify") == "1" {
			opts = append(opts, dialers.WithInsecureNoVerify())
		}
		return dialers.NewTLS(host, opts...), target, nil
	case "qemu+ssh":
		opts := ifSet(nil, u.User.Username(), dialers.UseSSHUsername)
		opts = ifSet(opts, port, dialers.UseSSHPort)
		opts = ifSet(opts, q.Get("keyfile"), dialers.UseKeyFile)
		opts = ifSet(opts, q.Get("known_hosts"), dialers.UseKnownHostsFile)
		opts = ifSet(opts, q.Get("socket"), dialers.WithRemoteSocket)
		if q.Get("no_verify") == "1" {
			opts = append(opts, dialers.WithInsecureIgnoreHostKey())
		}
		return dialers.NewSSH(host, opts...), target, nil
	default:
		return nil, "", fmt.Errorf("libvirt URI %q: scheme %q is not supported (use qemu:///system, qemu+unix:///system?socket=PATH, qemu+tcp://HOST/system, qemu+tls://HOST/system or qemu+ssh://USER@HOST/system)", uri, u.Scheme)
	}
}

// ifSet appends the option option makes of v to opts when the URI sets v
// (a port, a query parameter).
func ifSet[O any](opts []O, v string, option func(string) O) []O {
	if v != "" {
		opts = append(opts, option(v))
	}
	return opts
}

// NewConn returns a connection to uri; call Run to connect and keep it up.
func NewConn(uri string, keepalive time.Duration, log *zap.Logger) (*Conn, error) {
	if keepalive <= 0 {
		keepalive = 5 * time.Second
	}
	d, _, err := DialerFor(uri)
	if err != nil {
		return nil, err
	}
	return &Conn{uri: uri, dialer: d, keepalive: keepalive, log: log, changed: make(chan struct{})}, nil
}

// Client returns the current client, or ErrNotConnected.
func (c *Conn) Client() (*libvirt.Libvirt, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if !c.up {
		return nil, fmt.Errorf("%w (%s)", ErrNotConnected, c.uri)
	}
	return c.l, nil
}

// Connected reports whether the connection is up.
func (c *Conn) Connected() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.up
}

// WaitConnected blocks until the connection is up or ctx ends.
func (c *Conn) WaitConnected(ctx context.Context) error {
	for {
		c.mu.RLock()
		up, ch := c.up, c.changed
		c.mu.RUnlock()
		if up {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for libvirt at %s: %w", c.uri, ctx.Err())
		case <-ch:
		}
	}
}

// Connects counts the connections made so far (reconnects included).
func (c *Conn) Connects() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.connects
}

func (c *Conn) setUp(l *libvirt.Libvirt, up bool) {
	c.mu.Lock()
	c.l, c.up = l, up
	if up {
		c.connects++
	}
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

func (c *Conn) dial() (*libvirt.Libvirt, error) {
	_, target, err := DialerFor(c.uri)
	if err != nil {
		return nil, err
	}
	l := libvirt.NewWithDialer(c.dialer)
	if err := l.ConnectToURI(target); err != nil {
		return nil, fmt.Errorf("connect to libvirt at %s: %w", c.uri, err)
	}
	return l, nil
}

// Run connects, calls onConnect with each new client, and keeps the
// connection up until ctx ends. onConnect's context ends when that client's
// connection is lost.
func (c *Conn) Run(ctx context.Context, onConnect func(ctx context.Context, l *libvirt.Libvirt)) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		l, err := c.dial()
		if err != nil {
			c.log.Warn("libvirt unreachable; retrying", zap.String("uri", c.uri), zap.Duration("in", backoff), zap.Error(err))
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, maxBackoff)
			continue
		}
		backoff = 100 * time.Millisecond
		c.log.Info("connected to libvirt", zap.String("uri", c.uri))
		// connCtx is not derived from ctx: the client's event subscriptions
		// must end only after the connection is closed. Cancelled first,
		// they would send deregister calls racing the disconnect, on which
		// libvirtd frees the same callbacks; libvirt 9.0 then logs "could
		// not find event callback ... for deletion" and, after enough
		// rounds, crashes with heap corruption (seen here). Closed first,
		// libvirtd drops the callbacks itself and the deregisters fail
		// locally without being sent.
		connCtx, cancel := context.WithCancel(context.Background())
		c.setUp(l, true)
		go onConnect(connCtx, l)
		c.watch(ctx, l)
		c.setUp(nil, false)
		_ = l.Disconnect()
		cancel()
		if ctx.Err() == nil {
			c.log.Warn("lost the libvirt connection; reconnecting", zap.String("uri", c.uri))
		}
	}
}

// watch returns when ctx ends, the socket drops, or a ping fails.
func (c *Conn) watch(ctx context.Context, l *libvirt.Libvirt) {
	t := time.NewTicker(c.keepalive)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.Disconnected():
			return
		case <-t.C:
			done := make(chan error, 1)
			go func() { _, err := l.ConnectGetLibVersion(); done <- err }()
			select {
			case err := <-done:
				if err != nil {
					c.log.Warn("libvirt keepalive failed", zap.Error(err))
					return
				}
			case <-time.After(c.keepalive):
				c.log.Warn("libvirt keepalive timed out", zap.Duration("after", c.keepalive))
				return
			case <-ctx.Done():
				return
			}
		}
	}
}
