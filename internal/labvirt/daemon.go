package labvirt

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/plan"
)

// The lab's vbmcd is a process of the host that runs labctl (the hub),
// marked as the lab's in its environment (plan.MarkEnv=<lab>).

// daemon is a running vbmcd of a lab.
type daemon struct {
	pid  int
	args []string // argv without argv[0]
}

// daemons are the processes whose environment carries the lab's mark and
// whose program is vbmcd serving BMCs.
func daemons(lab string) ([]daemon, error) { return marked(lab, isVbmcd(false)) }

// senders are the lab's LLDP senders: vbmcd lldp with the lab's mark.
func senders(lab string) ([]daemon, error) { return marked(lab, isVbmcd(true)) }

// dhcpServers are the lab's provisioning DHCP servers: dnsmasq with the
// lab's mark.
func dhcpServers(lab string) ([]daemon, error) {
	return marked(lab, func(args []string) bool { return filepath.Base(args[0]) == "dnsmasq" })
}

// isVbmcd matches vbmcd's command line: its lldp subcommand, or not.
func isVbmcd(lldp bool) func([]string) bool {
	return func(args []string) bool {
		return filepath.Base(args[0]) == "vbmcd" && (len(args) > 1 && args[1] == "lldp") == lldp
	}
}

// markedOf are the lab's processes of a kind: vbmcd, the LLDP sender or
// the provisioning DHCP server.
func markedOf(labName string, kind lab.Kind) ([]daemon, error) {
	switch kind {
	case lab.KindLLDP:
		return senders(labName)
	case lab.KindDHCP:
		return dhcpServers(labName)
	}
	return daemons(labName)
}

// marked are the processes whose environment carries the lab's mark and
// whose command line is the kind's (is).
func marked(lab string, is func(args []string) bool) ([]daemon, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	mark := plan.MarkEnv + "=" + lab
	var out []daemon
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		args := procStrings(pid, "cmdline")
		if len(args) == 0 || !is(args) || !slices.Contains(procStrings(pid, "environ"), mark) {
			continue
		}
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && zombie(st) {
			continue
		}
		out = append(out, daemon{pid: pid, args: args[1:]})
	}
	return out, nil
}

func procStrings(pid int, file string) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// zombie reads the state field of /proc/PID/stat.
func zombie(stat []byte) bool {
	i := strings.LastIndexByte(string(stat), ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// startDaemon starts vbmcd (or its lldp subcommand, or another process of
// the lab) in its own session, in the lab's namespace, with the lab's mark
// in its environment, and returns its PID.
func startDaemon(v process, netns string) (int, error) {
	if v.Path == "" {
		return 0, errors.New("vbmcd not found next to labctl or on PATH: run `make build` (it puts both in bin/) or pass --vbmcd")
	}
	prog := filepath.Base(v.Path)
	if err := os.MkdirAll(filepath.Dir(v.Log), 0o755); err != nil {
		return 0, err
	}
	f, err := os.OpenFile(v.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	cmd := exec.Command(v.Path, v.Args...)
	if netns != "" {
		// ip netns exec execs vbmcd in place: same PID, same argv.
		cmd = exec.Command("ip", append([]string{"netns", "exec", netns, v.Path}, v.Args...)...)
	}
	cmd.Env = append(os.Environ(), v.Env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s (%s): %w", prog, v.Path, err)
	}
	go func() { _ = cmd.Wait() }() // reap it if it dies while labctl runs
	return cmd.Process.Pid, nil
}

// stopDaemon stops a process of the lab: SIGTERM, then SIGKILL after 5 s.
func stopDaemon(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return nil // gone already
	}
	for range 100 {
		if !alive(pid) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = p.Signal(syscall.SIGKILL)
	for range 40 {
		if !alive(pid) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("process %d of the lab does not stop", pid)
}

func alive(pid int) bool {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !zombie(st)
}
