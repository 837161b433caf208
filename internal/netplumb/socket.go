package netplumb

import (
	"context"
	"fmt"
	"net"
	"runtime"

	"github.com/vishvananda/netns"
)

// InNamespace runs fn with the calling OS thread in the named network
// namespace ("" runs fn where it is) and switches back. It is the only
// place that switches namespaces: the thread is locked for fn's duration,
// and a thread that cannot switch back is retired with the goroutine (not
// unlocked), so no other goroutine ever runs in the wrong namespace.
// Sockets fn creates stay in the namespace; that is its use: a dialer or a
// listener for a lab whose network lives in a namespace.
func InNamespace(name string, fn func() error) error {
	if name == "" {
		return fn()
	}
	target, err := netns.GetFromName(name)
	if err != nil {
		return fmt.Errorf("network namespace %q: %w (list them with `ip netns list`)", name, err)
	}
	defer target.Close()
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("current network namespace: %w", err)
	}
	defer orig.Close()
	if err := netns.Set(target); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter network namespace %q: %w", name, err)
	}
	ferr := fn()
	if err := netns.Set(orig); err != nil {
		// Leave the thread locked: the runtime ends it with the goroutine.
		return fmt.Errorf("leave network namespace %q: %w", name, err)
	}
	runtime.UnlockOSThread()
	return ferr
}

// DialContextIn returns a DialContext that makes its sockets in the named
// namespace ("" : the current one), for an http.Transport.
func DialContextIn(name string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := InNamespace(name, func() error {
			var err error
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// ListenIn listens in the named namespace ("" : the current one).
func ListenIn(name, network, addr string) (net.Listener, error) {
	var ln net.Listener
	err := InNamespace(name, func() error {
		var err error
		ln, err = net.Listen(network, addr)
		return err
	})
	return ln, err
}
