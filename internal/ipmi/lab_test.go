package ipmi

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/testenv"
	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/ipmi/client"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/sim"
)

const (
	testUser = "admin"
	testPass = "s3cret-pass"
)

// lab is a Manager over the sim backend with one BMC per machine on
// 127.0.0.1 (or ::1), ports picked free.
type lab struct {
	svc   *machine.Service
	be    machine.Backend
	mgr   *Manager
	addrs []string // host:port per machine, in List order
	ids   []string
}

func newLab(t testing.TB, n int, host string, be machine.Backend, opts ...Option) *lab {
	t.Helper()
	return newLabLog(t, testenv.Logger(t), n, host, be, opts...)
}

// newLabLog is newLab with the BMCs logging to log.
func newLabLog(t testing.TB, log *zap.Logger, n int, host string, be machine.Backend, opts ...Option) *lab {
	t.Helper()
	if be == nil {
		be = sim.New(n)
	}
	svc := machine.NewService(be, nil)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	svc.Watch(ctx)
	var ids []string
	for _, m := range svc.List() {
		ids = append(ids, m.ID)
	}
	return serveLabLog(t, log, svc, ids, host, opts...)
}

// serveLab gives each of the machines ids a BMC on host (a free port,
// recorded in the model) and runs a Manager over svc until the test ends.
func serveLab(t testing.TB, svc *machine.Service, ids []string, host string, opts ...Option) *lab {
	t.Helper()
	return serveLabLog(t, testenv.Logger(t), svc, ids, host, opts...)
}

func serveLabLog(t testing.TB, log *zap.Logger, svc *machine.Service, ids []string, host string, opts ...Option) *lab {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &lab{svc: svc, be: svc.Backend()}
	for _, id := range ids {
		port := testenv.Port(t, host)
		if _, err := svc.UpdateSettings(ctx, id, func(s *machine.Settings) error {
			s.IPMI = &machine.IPMIEndpoint{Address: host, Port: port}
			return nil
		}); err != nil {
			cancel()
			t.Fatal(err)
		}
		l.addrs = append(l.addrs, net.JoinHostPort(host, strconv.Itoa(port)))
		l.ids = append(l.ids, id)
	}
	opts = append([]Option{WithCredentials(machine.Credential{Username: testUser, Password: testPass})}, opts...)
	l.mgr = NewManager(svc, log, opts...)
	done := make(chan error, 1)
	go func() { done <- l.mgr.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return within 10 s of cancel")
		}
	})
	deadline := time.Now().Add(5 * time.Second)
	for len(l.mgr.Endpoints()) < len(l.ids) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d BMCs listening", len(l.mgr.Endpoints()), len(l.ids))
		}
		time.Sleep(10 * time.Millisecond)
	}
	return l
}

func (l *lab) dial(t testing.TB, i int, suite int) *client.Client {
	t.Helper()
	c, err := client.Dial(context.Background(), l.addrs[i], client.Config{Username: testUser, Password: testPass, Suite: suite})
	if err != nil {
		t.Fatalf("dial %s: %v", l.addrs[i], err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func (l *lab) machine(t testing.TB, i int) *machine.Machine {
	t.Helper()
	m, err := l.svc.Get(l.ids[i])
	if err != nil {
		t.Fatal(err)
	}
	return m
}
