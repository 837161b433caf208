package lab

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/virt"
)

// preflight checks the host can carry the plan before anything is made.
func (l *Lab) preflight(ctx context.Context) (bool, error) {
	s := l.Spec
	if _, err := os.Stat("/dev/kvm"); err != nil {
		l.Rep.Note("preflight", "no /dev/kvm: the VMs run under TCG (software emulation), much slower than KVM")
	}
	var mem, cpus, disk uint
	for _, n := range s.Nodes {
		mem += n.MemoryMiB
		cpus += n.VCPUs
		disk += n.DiskGiB
	}
	if total := memTotalMiB(); total > 0 {
		ratio := float64(mem) / float64(total)
		msg := fmt.Sprintf("memory: %d MiB planned of %d MiB (%.0f%%)", mem, total, 100*ratio)
		if ratio > 1 {
			msg += fmt.Sprintf(": overcommitted %.1fx; VMs that touch it all will swap or be killed", ratio)
		}
		l.Rep.Note("preflight", msg)
	}
	if n := uint(runtime.NumCPU()); cpus > n {
		l.Rep.Note("preflight", fmt.Sprintf("CPU: %d vCPUs planned on %d host CPUs (overcommitted %.1fx)", cpus, n, float64(cpus)/float64(n)))
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return false, fmt.Errorf("lab directory: %w", err)
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(s.Dir, &fs); err == nil {
		free := fs.Bavail * uint64(fs.Bsize) >> 30
		l.Rep.Note("preflight", fmt.Sprintf("disk: %d GiB of thin disks planned, %d GiB free in %s (thin: space is used as the VMs write)", disk, free, s.Dir))
		if free < 1 {
			return false, fmt.Errorf("less than 1 GiB free in %s", s.Dir)
		}
	}
	if err := QemuCanReach(s.Dir); err != nil {
		return false, err
	}
	lc, err := l.Be.Conn().Client()
	if err != nil {
		return false, err
	}
	for _, n := range s.Nodes {
		found, owner, err := virt.DomainOwner(ctx, lc, n.Name, LabNS)
		if err != nil {
			return false, err
		}
		if found && owner != s.Name {
			return false, fmt.Errorf("a domain named %s exists and is not this lab's (owner %q): rename the lab (name: in the lab file) or remove that domain yourself (virsh undefine --nvram %s)", n.Name, owner, n.Name)
		}
	}
	return false, nil
}

func memTotalMiB() uint {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kib, _ := strconv.ParseUint(fields[1], 10, 64)
			return uint(kib / 1024)
		}
	}
	return 0
}

// QemuCanReach checks that qemu, which runs as an unprivileged user
// (libvirt-qemu on Debian), can enter every directory down to dir: the
// seed notes' classic "permission denied" when disks live in a home
// directory.
func QemuCanReach(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	uid, gids := -1, map[int]bool{}
	if u, err := user.Lookup("libvirt-qemu"); err == nil {
		uid, _ = strconv.Atoi(u.Uid)
		if g, err := u.GroupIds(); err == nil {
			for _, s := range g {
				n, _ := strconv.Atoi(s)
				gids[n] = true
			}
		}
	}
	for d := abs; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		mode := fi.Mode().Perm()
		ok := mode&0o001 != 0 ||
			(int(st.Uid) == uid && mode&0o100 != 0) ||
			(gids[int(st.Gid)] && mode&0o010 != 0)
		if !ok {
			return fmt.Errorf("permission denied for qemu: user libvirt-qemu cannot enter %s (mode %v), so VMs could not open their disks and logs under %s; run `chmod o+x %s` or put the lab elsewhere", d, mode, abs, d)
		}
		if d == "/" {
			return nil
		}
	}
}

func (l *Lab) serialLog(node string) string {
	return filepath.Join(StateDir(l.Spec.Dir), "logs", node+".serial.log")
}

// ensureNodes defines a UEFI domain per node, shut off, with its boot NIC,
// an empty CD-ROM drive for virtual media, a serial log and the lab's mark.
func (l *Lab) ensureNodes(ctx context.Context) (bool, error) {
	lc, err := l.Be.Conn().Client()
	if err != nil {
		return false, err
	}
	if err := os.MkdirAll(filepath.Join(StateDir(l.Spec.Dir), "logs"), 0o755); err != nil {
		return false, err
	}
	changed := false
	for _, n := range l.Spec.Nodes {
		found, owner, err := virt.DomainOwner(ctx, lc, n.Name, LabNS)
		if err != nil {
			return changed, err
		}
		if found && owner != l.Spec.Name {
			return changed, fmt.Errorf("domain %s is not this lab's; remove it or rename the lab", n.Name)
		}
		if found {
			l.State.Domains = addUnique(l.State.Domains, n.Name)
			continue
		}
		spec := virt.DomainSpec{
			Name: n.Name, UUID: n.UUID, MemoryMiB: n.MemoryMiB, VCPUs: n.VCPUs, UEFI: true,
			NICs:      []virt.NICSpec{{Network: l.Spec.Network, Bridge: l.Spec.Bridge, MAC: n.MAC}},
			SerialLog: l.serialLog(n.Name),
			BootOrder: []string{"hd", "network"},
			Metadata:  virt.LabMarkXML(LabNS, l.Spec.Name),
		}
		for _, p := range l.volumePaths(n) {
			spec.Disks = append(spec.Disks, virt.DiskSpec{Path: p})
		}
		if _, err := virt.DefineDomain(ctx, lc, spec, virt.DetectFirmware()); err != nil {
			return changed, err
		}
		l.State.Domains = addUnique(l.State.Domains, n.Name)
		if err := l.State.Save(l.Spec.Dir); err != nil {
			return true, err
		}
		changed = true
	}
	return changed, nil
}

// volumePaths are the node's disks, from a storage step (VolumePaths).
func (l *Lab) volumePaths(n NodeSpec) []string {
	if l.VolumePaths == nil {
		return nil
	}
	return l.VolumePaths(n)
}

// deleteNodes removes the lab's domains, and only those.
func (l *Lab) deleteNodes(ctx context.Context) error {
	lc, err := l.Be.Conn().Client()
	if err != nil {
		return err
	}
	var kept []string
	for _, name := range l.State.Domains {
		found, owner, err := virt.DomainOwner(ctx, lc, name, LabNS)
		if err != nil {
			kept = append(kept, name)
			continue
		}
		if !found {
			continue
		}
		if owner != l.Spec.Name {
			l.Rep.Note("remove nodes", fmt.Sprintf("left %s alone: it is not this lab's", name))
			continue
		}
		if err := virt.DeleteDomain(ctx, lc, name); err != nil {
			return err
		}
	}
	l.State.Domains = kept
	return nil
}

// vbmcdArgs is the command line of the lab's vbmcd.
func (l *Lab) vbmcdArgs() []string {
	sd := StateDir(l.Spec.Dir)
	b := l.Spec.BMC
	args := []string{
		"--domains", strings.Join(nodeNames(l.Spec), ","),
		"--redfish-addr", fmt.Sprintf(":%d", b.RedfishPort),
		"--username", b.Username, "--password", b.Password,
		"--state-dir", filepath.Join(sd, "vbmcd"),
		"--media-dir", filepath.Join(sd, "media"),
		"--log-format", "json",
	}
	return args
}

// ensureBMCs records each node's IPMI endpoint (for the ipmi kind), starts
// vbmcd unless the lab's one runs, and checks that every node's BMC answers
// with the node's UUID.
func (l *Lab) ensureBMCs(ctx context.Context) (bool, error) {
	changed := false
	if l.Spec.BMC.Kind == "ipmi" {
		svc := machine.NewService(l.Be, l.Log)
		for i, n := range l.Spec.Nodes {
			want := &machine.IPMIEndpoint{Port: l.Spec.BMC.IPMIPortBase + i}
			m, err := svc.Await(ctx, n.UUID, 10*time.Second)
			if err != nil {
				return changed, err
			}
			if m.Settings.IPMI != nil && *m.Settings.IPMI == *want {
				continue
			}
			if _, err := svc.UpdateSettings(ctx, n.UUID, func(s *machine.Settings) error { s.IPMI = want; return nil }); err != nil {
				return changed, err
			}
			changed = true
		}
	}
	args := l.vbmcdArgs()
	if d := l.State.Vbmcd; d != nil && processMatches(d.PID, l.Spec.VbmcdPath, args) {
		return changed, l.checkBMCs(ctx)
	}
	logFile := filepath.Join(StateDir(l.Spec.Dir), "vbmcd.log")
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return changed, err
	}
	defer f.Close()
	cmd := exec.Command(l.Spec.VbmcdPath, args...)
	if l.Spec.Netns != "" {
		// ip netns exec execs vbmcd in place: same PID, same command line.
		cmd = exec.Command("ip", append([]string{"netns", "exec", l.Spec.Netns, l.Spec.VbmcdPath}, args...)...)
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return changed, fmt.Errorf("start vbmcd (%s): %w; build it with `make build` or set the vbmcd path", l.Spec.VbmcdPath, err)
	}
	go func() { _ = cmd.Wait() }() // reap it if it dies while labctl runs
	l.State.Vbmcd = &Daemon{PID: cmd.Process.Pid, Args: args, Log: logFile}
	if err := l.State.Save(l.Spec.Dir); err != nil {
		return true, err
	}
	return true, l.checkBMCs(ctx)
}

// BMCClient is an HTTP client that reaches the lab's BMCs where the nodes
// reach them: its sockets live in the lab's network namespace.
func (l *Lab) BMCClient() *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext:     netplumb.DialContextIn(l.Spec.Netns),
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // vbmcd's own self-signed certificate
	}}
}

// checkBMCs waits until every node's Redfish system answers with its UUID,
// at the address install-config gives (reached from the lab's namespace).
func (l *Lab) checkBMCs(ctx context.Context) error {
	hc := l.BMCClient()
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range l.Spec.Nodes {
		url := fmt.Sprintf("https://%s/redfish/v1/Systems/%s", net.JoinHostPort(l.Spec.BMC.Host, strconv.Itoa(l.Spec.BMC.RedfishPort)), n.UUID)
		for {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			req.SetBasicAuth(l.Spec.BMC.Username, l.Spec.BMC.Password)
			resp, err := hc.Do(req)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the BMC of %s does not answer at %s (status %v, error %v); see %s", n.Name, url, statusOf(resp), err, filepath.Join(StateDir(l.Spec.Dir), "vbmcd.log"))
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

func statusOf(r *http.Response) any {
	if r == nil {
		return "none"
	}
	return r.StatusCode
}

// processMatches reports whether pid runs exe with args (so a recycled PID
// is never mistaken for the lab's vbmcd).
func processMatches(pid int, exe string, args []string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	got := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	want := append([]string{exe}, args...)
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// stopBMCs stops the lab's vbmcd.
func (l *Lab) stopBMCs(context.Context) error {
	d := l.State.Vbmcd
	if d == nil {
		return nil
	}
	if processMatches(d.PID, l.Spec.VbmcdPath, d.Args) {
		p, _ := os.FindProcess(d.PID)
		_ = p.Signal(syscall.SIGTERM)
		for i := 0; i < 100 && processMatches(d.PID, l.Spec.VbmcdPath, d.Args); i++ {
			time.Sleep(50 * time.Millisecond)
		}
		if processMatches(d.PID, l.Spec.VbmcdPath, d.Args) {
			_ = p.Signal(syscall.SIGKILL)
		}
	}
	l.State.Vbmcd = nil
	return nil
}

// VbmcdRunning reports whether the lab's vbmcd runs.
func (l *Lab) VbmcdRunning() bool {
	d := l.State.Vbmcd
	return d != nil && processMatches(d.PID, l.Spec.VbmcdPath, d.Args)
}
