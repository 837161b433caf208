package ipmi

import (
	"bytes"
	"context"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/sim"
	"github.com/bmlab/bmlab/internal/testenv"
)

// consoleSim is the sim backend with a fake serial console per machine: it
// prints the marker when opened and answers every input chunk with
// "typed:<chunk>".
type consoleSim struct {
	*sim.Backend
	mu    sync.Mutex
	typed bytes.Buffer
}

func (c *consoleSim) OpenConsole(_ context.Context, _ string) (io.ReadWriteCloser, error) {
	ours, theirs := net.Pipe()
	go func() {
		defer theirs.Close()
		if _, err := theirs.Write([]byte("\r\n" + testenv.Marker + "\r\n")); err != nil {
			return
		}
		buf := make([]byte, 256)
		for {
			n, err := theirs.Read(buf)
			if err != nil {
				return
			}
			c.mu.Lock()
			c.typed.Write(buf[:n])
			c.mu.Unlock()
			if _, err := theirs.Write([]byte("typed:" + string(buf[:n]) + "\r\n")); err != nil {
				return
			}
		}
	}()
	return ours, nil
}

// solActivate runs `ipmitool sol activate` under a pseudo-terminal (script
// gives it one) and returns its stdin and output.
func solActivate(t *testing.T, l *lab, i int) (io.WriteCloser, *testenv.Buffer, *exec.Cmd) {
	t.Helper()
	bin := testenv.Command(t, "ipmitool")
	scr := testenv.Command(t, "script")
	host, port, _ := net.SplitHostPort(l.addrs[i])
	line := strings.Join([]string{bin, "-I", "lanplus", "-H", host, "-p", port, "-U", testUser, "-P", testPass, "sol", "activate"}, " ")
	cmd := exec.Command(scr, "-q", "-e", "-c", line, "/dev/null")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out := &testenv.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return in, out, cmd
}

// solLeave types ipmitool's escape sequence ~. and waits for it to exit.
func solLeave(t *testing.T, in io.Writer, out *testenv.Buffer, cmd *exec.Cmd) {
	t.Helper()
	_, _ = in.Write([]byte("\r~."))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("ipmitool did not leave on ~.:\n%q", out.String())
	}
}

func TestIpmitoolSOL(t *testing.T) {
	testenv.Integration(t)
	be := &consoleSim{Backend: sim.New(1)}
	l := newLab(t, 1, "127.0.0.1", be)
	for round := 1; round <= 2; round++ {
		in, out, cmd := solActivate(t, l, 0)
		if !testenv.WaitFor(10*time.Second, func() bool { return strings.Contains(out.String(), testenv.Marker) }) {
			t.Fatalf("round %d: no marker on the SOL console:\n%q", round, out.String())
		}
		word := "hello" + string(rune('0'+round))
		if _, err := in.Write([]byte(word)); err != nil {
			t.Fatal(err)
		}
		if !testenv.WaitFor(10*time.Second, func() bool { return strings.Contains(out.String(), "typed:"+word) }) {
			t.Fatalf("round %d: typed text did not come back:\n%q", round, out.String())
		}
		// Leave with the escape sequence, as a user would; the payload is
		// deactivated and the next round can activate it again.
		solLeave(t, in, out, cmd)
		if !testenv.WaitFor(3*time.Second, func() bool {
			l.mgr.mu.Lock()
			defer l.mgr.mu.Unlock()
			b := l.mgr.bmcs[l.ids[0]]
			b.mu.Lock()
			defer b.mu.Unlock()
			return b.sol == nil
		}) {
			t.Fatalf("round %d: SOL still active after ~.", round)
		}
	}
	// A payload left active by a console that vanished is freed by `sol
	// deactivate` from another session.
	_, out, cmd := solActivate(t, l, 0)
	if !testenv.WaitFor(10*time.Second, func() bool { return strings.Contains(out.String(), testenv.Marker) }) {
		t.Fatalf("no marker:\n%q", out.String())
	}
	_ = cmd.Process.Kill()
	l.mustIpmitool(t, 0, nil, "sol", "deactivate")
	in, out, _ := solActivate(t, l, 0)
	defer in.Close()
	if !testenv.WaitFor(10*time.Second, func() bool { return strings.Contains(out.String(), testenv.Marker) }) {
		t.Fatalf("reactivation after sol deactivate: no marker:\n%q", out.String())
	}
}
