package ipmi

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
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

// solConsole is `ipmitool sol activate` running under a pseudo-terminal
// that script(1) gives it.
type solConsole struct {
	in     io.WriteCloser
	out    *testenv.Buffer
	script *exec.Cmd
}

// solActivate starts `ipmitool sol activate` under script(1). The command
// line execs ipmitool, so that ipmitool itself is script's child and a test
// can kill it (see vanish).
func solActivate(t *testing.T, l *lab, i int) (io.WriteCloser, *testenv.Buffer, *exec.Cmd) {
	t.Helper()
	c := startSOL(t, l, i)
	return c.in, c.out, c.script
}

func startSOL(t *testing.T, l *lab, i int) *solConsole {
	t.Helper()
	return startSOLAs(t, l, i, testUser, testPass, "ADMINISTRATOR")
}

// startSOLAs is startSOL as user at privilege level.
func startSOLAs(t *testing.T, l *lab, i int, user, pass, level string) *solConsole {
	t.Helper()
	return underScript(t, l, i, user, pass, level, "sol", "activate")
}

// underScript runs ipmitool against BMC i as user at level with args under
// script(1), whose terminal it reads from the returned console's in.
func underScript(t *testing.T, l *lab, i int, user, pass, level string, args ...string) *solConsole {
	t.Helper()
	bin := testenv.Command(t, "ipmitool")
	scr := testenv.Command(t, "script")
	host, port, _ := net.SplitHostPort(l.addrs[i])
	line := strings.Join(append([]string{"exec", bin, "-I", "lanplus", "-H", host, "-p", port, "-U", user, "-P", pass, "-L", level}, args...), " ")
	cmd := exec.Command(scr, "-q", "-e", "-c", line, "/dev/null")
	cmd.Env = append(os.Environ(), "SHELL=/bin/sh")
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
	return &solConsole{in: in, out: out, script: cmd}
}

// vanish kills ipmitool with SIGKILL, the one way a console goes without
// deactivating its payload. Killing script(1) is not that: ipmitool then
// gets SIGHUP from the closed terminal, and where SIGHUP is ignored (nohup,
// some CI runners, a shell's `trap ” HUP`) it reads end of file on its
// terminal, leaves its loop and sends Deactivate Payload itself, as it does
// for ~. (ipmitool lib/ipmi_sol.c, ipmi_sol_red_pill).
func (c *solConsole) vanish(t *testing.T) {
	t.Helper()
	var pid int
	if !testenv.WaitFor(5*time.Second, func() bool {
		pid = childNamed(c.script.Process.Pid, "ipmitool")
		return pid != 0
	}) {
		t.Fatalf("no ipmitool process under script (pid %d):\n%q", c.script.Process.Pid, c.out.String())
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill ipmitool %d: %v", pid, err)
	}
	// Reaped by script, which then exits on its own.
	if !testenv.WaitFor(5*time.Second, func() bool { return syscall.Kill(pid, 0) != nil }) {
		t.Fatalf("ipmitool %d still there after SIGKILL", pid)
	}
}

// childNamed returns the pid of parent's child whose command is name, or 0.
func childNamed(parent int, name string) int {
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces, so split after ')'.
		s := string(stat)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) < 2 || s[open+1:end] != name {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid == parent {
			return pid
		}
	}
	return 0
}

// solActive reports whether machine i's BMC holds an active SOL payload.
func solActive(l *lab, i int) bool {
	l.mgr.mu.Lock()
	defer l.mgr.mu.Unlock()
	b := l.mgr.bmcs[l.ids[i]]
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sol != nil
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
		if !testenv.WaitFor(3*time.Second, func() bool { return !solActive(l, 0) }) {
			t.Fatalf("round %d: SOL still active after ~.", round)
		}
	}
	// A payload left active by a console that vanished (ipmitool killed,
	// no Deactivate Payload sent) is freed by `sol deactivate` from another
	// session.
	c := startSOL(t, l, 0)
	if !testenv.WaitFor(10*time.Second, func() bool { return strings.Contains(c.out.String(), testenv.Marker) }) {
		t.Fatalf("no marker:\n%q", c.out.String())
	}
	c.vanish(t)
	if !solActive(l, 0) {
		t.Fatalf("SOL payload not active after its console was killed; the test needs a payload left behind:\n%q", c.out.String())
	}
	l.mustIpmitool(t, 0, nil, "sol", "deactivate")
	if !testenv.WaitFor(3*time.Second, func() bool { return !solActive(l, 0) }) {
		t.Fatal("SOL still active after sol deactivate")
	}
	// A second deactivate finds nothing to free: IPMI v2.0 §24.3 answers
	// 80h "payload already deactivated", which ipmitool reports.
	if out, err := l.ipmitool(t, 0, nil, "sol", "deactivate"); err == nil || !strings.Contains(out, "already de-activated") {
		t.Errorf("deactivate of an inactive payload: err %v, output %q; want ipmitool's \"already de-activated\"", err, out)
	}
	in, out, _ := solActivate(t, l, 0)
	defer in.Close()
	if !testenv.WaitFor(10*time.Second, func() bool { return strings.Contains(out.String(), testenv.Marker) }) {
		t.Fatalf("reactivation after sol deactivate: no marker:\n%q", out.String())
	}
}
