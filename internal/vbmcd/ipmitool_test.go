package vbmcd

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/testenv"
)

// freeUDPPort returns a port on 127.0.0.1, free for UDP and TCP and
// reserved for the test (testenv.Port: below the kernel's ephemeral range,
// so no client socket takes it between the pick and vbmcd's bind), for an
// IPMI listener or an IPMI port base.
func freeUDPPort(t testing.TB) int {
	t.Helper()
	return testenv.Port(t, "127.0.0.1")
}

// ipmiTool is ipmitool, the real client, over lanplus at the test BMC on
// 127.0.0.1:port, as admin with pass.
type ipmiTool struct {
	path string
	port int
	pass string
}

// newIPMITool finds ipmitool (testenv.Command: under CI a missing one fails
// the test) and reserves a free port (freeUDPPort) for the BMC it talks to;
// ipmiOn gives a daemon that BMC.
func newIPMITool(t testing.TB, pass string) ipmiTool {
	t.Helper()
	return ipmiTool{path: testenv.Command(t, "ipmitool"), port: freeUDPPort(t), pass: pass}
}

// ipmiOn turns IPMI on in c with i's port as the port base: the daemon's
// first machine answers ipmitool at that port.
func (i ipmiTool) ipmiOn(c *Config) { c.IPMI, c.IPMIPortBase = true, i.port }

// at is the same ipmitool for the BMC at another port (another machine's).
func (i ipmiTool) at(port int) ipmiTool {
	i.port = port
	return i
}

// run runs ipmitool with args and returns what it printed (stdout and
// stderr) and how it ended.
func (i ipmiTool) run(args ...string) (string, error) {
	out, err := exec.Command(i.path, lanplus(i.port, i.pass, args...)...).CombinedOutput()
	return string(out), err
}

// startSOL starts `ipmitool sol activate` at i's BMC under script(1), which
// gives ipmitool the terminal it wants, and returns the running script, its
// input and its output; the caller ends it.
func (i ipmiTool) startSOL(t testing.TB) (*exec.Cmd, io.WriteCloser, *testenv.Buffer, error) {
	t.Helper()
	scr := testenv.Command(t, "script")
	line := strings.Join(append([]string{"exec", i.path}, lanplus(i.port, i.pass, "sol", "activate")...), " ")
	cmd := exec.Command(scr, "-q", "-e", "-c", line, "/dev/null")
	cmd.Env = append(os.Environ(), "SHELL=/bin/sh")
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	out := &testenv.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	return cmd, in, out, cmd.Start()
}

// must runs ipmitool with args and fails the test when ipmitool fails.
func (i ipmiTool) must(t testing.TB, args ...string) string {
	t.Helper()
	out, err := i.run(args...)
	if err != nil {
		t.Fatalf("ipmitool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// solProbe runs `ipmitool sol activate` against ipmi's BMC (startSOL: under
// script(1)) and has grub, at its prompt on the disk marker, print a word
// that only its answer holds (the typed line holds "${x}PROBE"); then leaves
// with ~. It returns what went wrong, if anything; a prompt must come within
// the given time.
func solProbe(t *testing.T, ipmi ipmiTool, within time.Duration) error {
	t.Helper()
	cmd, in, out, err := ipmi.startSOL(t)
	if err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if !testenv.WaitFor(20*time.Second, func() bool { return strings.Contains(out.String(), "SOL Session operational") }) {
		return fmt.Errorf("ipmitool sol activate did not start: %q", out.String())
	}
	// The guest may still be booting (what is typed before grub reads
	// its prompt is lost): ask for a prompt until one comes, then type.
	prompt := func() bool {
		from := len(out.String())
		if _, err := in.Write([]byte("\r")); err != nil {
			return false
		}
		return testenv.WaitFor(2*time.Second, func() bool { return strings.Contains(out.String()[from:], "grub>") })
	}
	if !testenv.WaitFor(within, prompt) {
		return fmt.Errorf("no grub prompt over SOL; got %q", out.String())
	}
	if _, err := in.Write([]byte("set x=SOL\recho ${x}PROBE\r")); err != nil {
		return err
	}
	if !testenv.WaitFor(30*time.Second, func() bool { return strings.Contains(out.String(), "SOLPROBE") }) {
		return fmt.Errorf("grub's answer did not come back over SOL; got %q", out.String())
	}
	_, _ = in.Write([]byte("\r~."))
	return nil
}
