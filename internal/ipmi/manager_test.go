package ipmi

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/ipmi/client"
	"github.com/bmlab/bmlab/internal/ipmi/wire"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/sim"
	"github.com/bmlab/bmlab/internal/testenv"
)

func runManager(t *testing.T, svc *machine.Service, opts ...Option) *Manager {
	t.Helper()
	opts = append([]Option{WithCredentials(machine.Credential{Username: testUser, Password: testPass})}, opts...)
	mgr := NewManager(svc, testenv.Logger(t), opts...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		start := time.Now()
		select {
		case <-done:
			t.Logf("Run returned %v after cancel", time.Since(start).Round(time.Millisecond))
		case <-time.After(10 * time.Second):
			t.Error("Run did not return within 10 s")
		}
	})
	return mgr
}

func powerStatus(t *testing.T, addr, user, pass string) error {
	t.Helper()
	c, err := client.Dial(context.Background(), addr, client.Config{Username: user, Password: pass, Timeout: 200 * time.Millisecond})
	if err != nil {
		return err
	}
	defer c.Close()
	code, _, err := c.Do(wire.NetFnChassis, cmdGetChassisStatus)
	if err == nil && code != wire.CodeOK {
		err = code
	}
	return err
}

// TestEndpointsFollowTheModel: an endpoint recorded while the daemon runs
// (as `vbmcd ipmi set` does) starts a BMC; a change rebinds it; per-machine
// credentials replace the daemon's; unset stops it.
func TestEndpointsFollowTheModel(t *testing.T) {
	ctx := context.Background()
	svc := machine.NewService(sim.New(2), nil)
	mgr := runManager(t, svc, WithAddress("127.0.0.1"))
	id := svc.List()[0].ID
	setEP := func(ep *machine.IPMIEndpoint, creds []machine.Credential) {
		t.Helper()
		if _, err := svc.UpdateSettings(ctx, id, func(s *machine.Settings) error {
			s.IPMI, s.Credentials = ep, creds
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	p1 := testenv.Port(t, "127.0.0.1")
	setEP(&machine.IPMIEndpoint{Port: p1}, nil)
	a1 := net.JoinHostPort("127.0.0.1", strconv.Itoa(p1))
	if !testenv.WaitFor(3*time.Second, func() bool { return powerStatus(t, a1, testUser, testPass) == nil }) {
		t.Fatalf("no BMC on %s after the endpoint was recorded", a1)
	}
	p2 := testenv.Port(t, "::1")
	setEP(&machine.IPMIEndpoint{Address: "::1", Port: p2}, []machine.Credential{{Username: "own", Password: "own-pass"}})
	a2 := net.JoinHostPort("::1", strconv.Itoa(p2))
	if !testenv.WaitFor(3*time.Second, func() bool { return powerStatus(t, a2, "own", "own-pass") == nil }) {
		t.Fatalf("no BMC on %s after the rebind", a2)
	}
	if err := powerStatus(t, a2, testUser, testPass); err == nil {
		t.Errorf("the daemon's user still logs in to a machine with its own credentials")
	}
	if err := powerStatus(t, a1, "own", "own-pass"); err == nil {
		t.Errorf("the old endpoint still answers after the rebind")
	}
	setEP(nil, nil)
	if !testenv.WaitFor(3*time.Second, func() bool { return len(mgr.Endpoints()) == 0 }) {
		t.Errorf("BMC still running after its endpoint was removed: %v", mgr.Endpoints())
	}
}

// TestPortBase: every machine gets the lowest free port at or above the
// base, recorded with it, and keeps it when the daemon restarts.
func TestPortBase(t *testing.T) {
	ctx := context.Background()
	svc := machine.NewService(sim.New(3), nil)
	base := testenv.Port(t, "127.0.0.1")
	// A port in the middle is taken by an explicit endpoint of machine 3.
	ms := svc.List()
	if _, err := svc.UpdateSettings(ctx, ms[2].ID, func(s *machine.Settings) error {
		s.IPMI = &machine.IPMIEndpoint{Address: "127.0.0.1", Port: base + 1}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	func() {
		mgrCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		mgr := NewManager(svc, testenv.Logger(t), WithPortBase(base), WithAddress("127.0.0.1"))
		done := make(chan error, 1)
		go func() { done <- mgr.Run(mgrCtx) }()
		if !testenv.WaitFor(3*time.Second, func() bool { return len(mgr.Endpoints()) == 3 }) {
			t.Fatalf("endpoints: %v", mgr.Endpoints())
		}
		cancel()
		<-done
	}()
	want := []int{base, base + 2, base + 1}
	for i, m := range svc.List() {
		if m.Settings.IPMI == nil || m.Settings.IPMI.Port != want[i] {
			t.Errorf("%s: endpoint %+v, want port %d", m.Name, m.Settings.IPMI, want[i])
		}
	}
	// A second daemon over the same machines assigns nothing new.
	mgr := runManager(t, svc, WithPortBase(base), WithAddress("127.0.0.1"))
	if !testenv.WaitFor(3*time.Second, func() bool { return len(mgr.Endpoints()) == 3 }) {
		t.Fatalf("endpoints after restart: %v", mgr.Endpoints())
	}
	for i, m := range svc.List() {
		if m.Settings.IPMI.Port != want[i] {
			t.Errorf("%s: port moved to %d across a restart", m.Name, m.Settings.IPMI.Port)
		}
	}
}

// TestBMCAddress: with WithBMCPort, a machine with a BMC address of its own
// answers IPMI at that address and port; an endpoint that names only a
// port binds the machine's address at that port; without the option the
// address means nothing to IPMI.
func TestBMCAddress(t *testing.T) {
	ctx := context.Background()
	svc := machine.NewService(sim.New(3), nil)
	ms := svc.List()
	addrs := []string{"127.0.0.21", "127.0.0.22", "127.0.0.23"}
	port, other := testenv.Port(t, addrs[0]), testenv.Port(t, addrs[1])
	for i, m := range ms {
		if _, err := svc.UpdateSettings(ctx, m.ID, func(s *machine.Settings) error {
			s.BMCAddress = addrs[i]
			if i == 1 {
				s.IPMI = &machine.IPMIEndpoint{Port: other}
			}
			if i == 2 {
				s.IPMI = &machine.IPMIEndpoint{Address: "127.0.0.1", Port: other}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	mgr := runManager(t, svc, WithBMCPort(port), WithAddress("127.0.0.1"))
	want := map[string]string{
		ms[0].ID: net.JoinHostPort(addrs[0], strconv.Itoa(port)),
		ms[1].ID: net.JoinHostPort(addrs[1], strconv.Itoa(other)),
		ms[2].ID: net.JoinHostPort("127.0.0.1", strconv.Itoa(other)),
	}
	if !testenv.WaitFor(3*time.Second, func() bool { return len(mgr.Endpoints()) == 3 }) {
		t.Fatalf("endpoints: %v", mgr.Endpoints())
	}
	for _, ep := range mgr.Endpoints() {
		if ep.Addr != want[ep.MachineID] {
			t.Errorf("%s: BMC on %s, want %s", ep.MachineID, ep.Addr, want[ep.MachineID])
		}
	}
	if err := powerStatus(t, want[ms[0].ID], testUser, testPass); err != nil {
		t.Errorf("IPMI at the machine's own address: %v", err)
	}
	// Without WithBMCPort the address is Redfish's business only.
	svc2 := machine.NewService(sim.New(1), nil)
	if _, err := svc2.UpdateSettings(ctx, svc2.List()[0].ID, func(s *machine.Settings) error {
		s.BMCAddress = addrs[0]
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	mgr2 := runManager(t, svc2, WithAddress("127.0.0.1"))
	time.Sleep(200 * time.Millisecond) // the window in which no BMC may start
	if eps := mgr2.Endpoints(); len(eps) != 0 {
		t.Errorf("a BMC address without WithBMCPort started IPMI: %v", eps)
	}
}

// dial opens an IPMI session at addr as cfg says, closed when the test
// ends.
func dial(t *testing.T, addr string, cfg client.Config) *client.Client {
	t.Helper()
	c, err := client.Dial(context.Background(), addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestSessionLimitAndTimeout: beyond the limit Open Session says
// "insufficient resources"; idle sessions expire.
func TestSessionLimitAndTimeout(t *testing.T) {
	l := newLab(t, 1, "127.0.0.1", nil, WithSessionLimit(2), WithSessionTimeout(300*time.Millisecond))
	ctx := context.Background()
	cfg := client.Config{Username: testUser, Password: testPass}
	dial(t, l.addrs[0], cfg)
	dial(t, l.addrs[0], cfg)
	_, err := client.Dial(ctx, l.addrs[0], cfg)
	var se *client.StatusError
	if !errors.As(err, &se) || se.Status != wire.StatusNoResources {
		t.Fatalf("third session: %v, want insufficient resources", err)
	}
	// Once the idle timeout (300 ms) has closed the two, a session opens.
	var c3 *client.Client
	if !testenv.WaitFor(5*time.Second, func() bool { c3, err = client.Dial(ctx, l.addrs[0], cfg); return err == nil }) {
		t.Fatalf("after the idle timeout: %v", err)
	}
	c3.Close()
}

// TestCipherSuite0 is refused unless enabled.
func TestCipherSuite0(t *testing.T) {
	ctx := context.Background()
	l := newLab(t, 1, "127.0.0.1", nil)
	c, err := client.Dial(ctx, l.addrs[0], client.Config{Username: testUser, Password: testPass, Suite: client.Suite0})
	var se *client.StatusError
	if err == nil || !errors.As(err, &se) {
		c.Close()
		t.Fatalf("suite 0 accepted while disabled (err %v)", err)
	}
	l0 := newLab(t, 1, "127.0.0.1", nil, WithCipherSuite0(true))
	c, err = client.Dial(ctx, l0.addrs[0], client.Config{Username: testUser, Password: testPass, Suite: client.Suite0})
	if err != nil {
		t.Fatalf("suite 0 enabled: %v", err)
	}
	c.Close()
}
